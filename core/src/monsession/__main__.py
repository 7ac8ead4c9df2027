"""``python -m monsession``: the `monsession` command line.

    monsession plugins [--json]             list hook families, failures, blocked plugins,
                                            plugins built for a newer or an older core
    monsession new-package NAME [--dir D]   create a hook package
    monsession --version

Neither imports TensorFlow. `new-package` renders the ``*.tmpl`` files of
`_plugins/package_template/` (paths included), filling ``{{name}}`` with
the names of ``monsession-hooks-<name>``.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.resources
import json
import os
import re
import shlex
import shutil
import signal
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from monsession import __version__
from monsession._plugins import _plugin_manager
from monsession._plugins._families import OWN_DISTRIBUTIONS, plugin_infos
from monsession._plugins._plugin_types import (
    ENV_DISABLE_AUTOLOAD,
    ENV_DISABLED_PLUGINS,
    PluginInfo,
    PluginListing,
    PluginLoadError,
    PluginSource,
    core_range,
    normalize,
)

if TYPE_CHECKING:
    from importlib.abc import Traversable

PREFIX = "monsession-hooks-"
_SUFFIX = re.compile(r"[a-z][a-z0-9]*(?:-[a-z0-9]+)*")
_PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}")
_TEMPLATE_SUFFIX = ".tmpl"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="monsession", description="MonitoredSession for TensorFlow, with plugins."
    )
    parser.add_argument(
        "--version",
        action="version",
        version=f"monsession {_plugin_manager.core_version() or 'unknown'}",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    plugins = commands.add_parser(
        "plugins", help="list the installed hook families and any that failed to load"
    )
    plugins.add_argument("--json", action="store_true", help="print a JSON document")
    new_package = commands.add_parser(
        "new-package",
        help="create a hook package (pyproject.toml, hook, plugin, README, tests, tox.ini)",
        description="Creates the folder NAME holding a ready hook package: its tests pass "
        "once it is installed (run `tox` in it).",
    )
    new_package.add_argument("name", metavar="NAME", help=f"the distribution name, {PREFIX}<name>")
    new_package.add_argument(
        "--dir", default=".", help="the folder to create it in (default: the current one)"
    )
    return parser


def _source_json(source: PluginSource) -> dict[str, Any]:
    return {key: getattr(source, key) for key in ("name", "distribution", "version", "entry_point")}


def listing_json(listing: PluginListing) -> dict[str, Any]:
    """Returns `listing` as a JSON-serializable dict (the ``--json`` output)."""
    return {
        "monsession_version": _plugin_manager.core_version(),
        "autoload": listing.autoload,
        "plugins": [
            {
                **_source_json(info.source),
                "hook_classes": list(info.hook_classes),
                "other_classes": list(info.other_classes),
                "training_arguments": list(info.training_arguments),
            }
            for info in listing.plugins
        ],
        "failures": [
            {
                **_source_json(failure.source),
                "error": f"{type(failure.error).__name__}: {failure.error}",
                "message": failure.message,
            }
            for failure in listing.failures
        ],
        "blocked": [_source_json(source) for source in listing.blocked],
        "newer_core": [
            {
                **_source_json(newer.source),
                "unknown_hookspecs": list(newer.unknown_hookspecs),
                "core_requirement": newer.core_requirement,
                "message": newer.message,
            }
            for newer in listing.newer_core
        ],
        "older_core": [
            {
                **_source_json(older.source),
                "core_requirement": older.core_requirement,
                "message": older.message,
            }
            for older in listing.older_core
        ],
    }


def _describe(source: PluginSource) -> str:
    return f"{source.describe()}, entry point {source.entry_point or '-'}"


def _requires(requirement: str | None) -> str:
    if requirement is None:
        return "declares no monsession-core range"
    return f"requires monsession-core{requirement or ' (any version)'}"


def listing_text(listing: PluginListing) -> str:
    """`listing` as an aligned table of hook classes, then the other sections that apply."""
    lines = _hook_table(listing)
    for section in (_other_classes, _other_cores, _failures, _blocked, _autoload_off):
        lines += section(listing)
    return "\n".join(lines)


def _hook_table(listing: PluginListing) -> list[str]:
    """One row per plugin, its first four columns padded to the widest cell."""
    rows = [("PLUGIN", "DISTRIBUTION", "VERSION", "ENTRY POINT", "HOOK CLASSES")]
    rows += [_hook_row(info) for info in listing.plugins]
    widths = [max(len(row[column]) for row in rows) for column in range(4)]
    lines = []
    for row in rows:
        padded = [cell.ljust(width) for cell, width in zip(row[:4], widths, strict=True)]
        lines.append("  ".join([*padded, row[4]]))
    return lines


def _hook_row(info: PluginInfo) -> tuple[str, str, str, str, str]:
    source = info.source
    built_in = "(built in)" if source.name == _plugin_manager.CORE_PLUGIN_NAME else "-"
    classes = ", ".join(info.hook_classes) or "-"
    return (
        source.name,
        source.distribution or "-",
        source.version or "-",
        source.entry_point or built_in,
        classes,
    )


def _section(title: str, entries: list[str]) -> list[str]:
    """A blank line, `title` and `entries`; nothing when there are no entries."""
    return ["", title, *entries] if entries else []


def _other_classes(listing: PluginListing) -> list[str]:
    return _section(
        "Other classes (not hooks):",
        [
            f"  {info.source.name}: {', '.join(info.other_classes)}"
            for info in listing.plugins
            if info.other_classes
        ],
    )


def _other_cores(listing: PluginListing) -> list[str]:
    """The plugins built for a newer core, then those built for an older one."""
    if not listing.newer_core and not listing.older_core:
        return []
    version = _plugin_manager.core_version() or "(unknown version)"
    newer = [
        f"  {_describe(plugin.source)}: {', '.join(plugin.unknown_hookspecs)} "
        f"({_requires(plugin.core_requirement)})"
        for plugin in listing.newer_core
    ]
    older = [
        f"  {_describe(plugin.source)} ({_requires(plugin.core_requirement)})"
        for plugin in listing.older_core
    ]
    return _section(
        f"Built for a newer core ({len(newer)}): monsession-core {version} does not declare "
        "these hookspecs and never calls them; upgrade monsession-core:",
        newer,
    ) + _section(
        f"Built for an older core ({len(older)}): their monsession-core range excludes "
        f"monsession-core {version}; they are loaded and may work until their authors widen "
        "the range:",
        older,
    )


def _failures(listing: PluginListing) -> list[str]:
    return _section(
        f"Failed to load ({len(listing.failures)}):",
        [
            f"  {_describe(failure.source)}: {type(failure.error).__name__}: {failure.error}"
            for failure in listing.failures
        ],
    )


def _blocked(listing: PluginListing) -> list[str]:
    return _section(
        f"Blocked by {ENV_DISABLED_PLUGINS} ({len(listing.blocked)}):",
        [f"  {_describe(source)}" for source in listing.blocked],
    )


def _autoload_off(listing: PluginListing) -> list[str]:
    if listing.autoload:
        return []
    return [
        "",
        f"Entry-point autoloading is off ({ENV_DISABLE_AUTOLOAD} is set); "
        "only core's plugin and plugins registered by hand are loaded.",
    ]


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the `monsession` command line on `argv` (default: `sys.argv[1:]`).

    Returns:
      The exit status: 0 on success, 1 when a plugin fails to load in strict
      mode (`MONSESSION_STRICT_PLUGINS`), 2 for a name or folder `new-package`
      refuses, 141 when the reader closed the pipe early (as SIGPIPE would).
    """
    args = _parser().parse_args(argv)
    if args.command == "new-package":
        return _new_package_command(args.name, args.dir)
    try:
        listing = plugin_infos()
    except PluginLoadError as error:
        print(f"monsession: error: {error}", file=sys.stderr)
        return 1
    return _write(
        json.dumps(listing_json(listing), indent=2) if args.json else listing_text(listing)
    )


def _new_package_command(name: str, parent: str) -> int:
    try:
        # The installed distribution's version: what an installer checks the range against.
        version = _plugin_manager.core_version() or __version__
        target = create_package(name, parent, version)
    except NewPackageError as error:
        print(f"monsession new-package: error: {error}", file=sys.stderr)
        return 2
    print(f"Created {target}: the hook package {name}. Next: cd {shlex.quote(str(target))} && tox")
    return 0


def _write(text: str) -> int:
    """Prints `text`; 0, or 141 if the reader closed the pipe (``monsession plugins | head``).

    Stdout then points at the null device, so the flush at exit is quiet too.
    """
    try:
        print(text, flush=True)
    except BrokenPipeError:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)
        return 128 + signal.SIGPIPE
    return 0


# --- new-package ---


class NewPackageError(ValueError):
    """A package that `new-package` refuses to create (the message says why)."""


@dataclasses.dataclass(frozen=True)
class PackageNames:
    """The names a new hook package is made of, e.g. for ``monsession-hooks-my-metric``."""

    distribution: str  # monsession-hooks-my-metric
    import_name: str  # monsession_hooks_my_metric
    module_name: str  # my_metric (test file names)
    plugin_name: str  # my-metric (the entry point)
    hook_class: str  # MyMetricHook
    core_range: str  # >=1.0,<2


def package_names(name: str, core_version: str) -> PackageNames:
    """The names of the package `name`; `NewPackageError` unless it is a valid
    ``monsession-hooks-<name>`` that is not one of monsession's own distributions."""
    suffix = name.removeprefix(PREFIX)
    if not name.startswith(PREFIX) or not _SUFFIX.fullmatch(suffix):
        canonical = normalize(name.strip())
        hint = ""
        if canonical != name and canonical.startswith(PREFIX):
            if _SUFFIX.fullmatch(canonical.removeprefix(PREFIX)):
                hint = f" Did you mean {canonical!r}?"
        raise NewPackageError(
            f"{name!r} is not a valid hook package name: expected {PREFIX}<name>, where <name> "
            "is lowercase letters, digits and single hyphens, starting with a letter (e.g. "
            f"{PREFIX}demo). It gives the import name monsession_hooks_<name> and the plugin "
            f"name <name>.{hint}"
        )
    if name in OWN_DISTRIBUTIONS:
        raise NewPackageError(
            f"{name!r} is a distribution of monsession itself: choose another name "
            f"({PREFIX}<name>)."
        )
    try:
        series = core_range(core_version)
    except ValueError as error:
        raise NewPackageError(str(error)) from None
    module_name = suffix.replace("-", "_")
    return PackageNames(
        distribution=name,
        import_name=f"monsession_hooks_{module_name}",
        module_name=module_name,
        plugin_name=suffix,
        hook_class="".join(part.capitalize() for part in suffix.split("-")) + "Hook",
        core_range=series,
    )


def _render(text: str, values: dict[str, str], where: str) -> str:
    def replace(match: re.Match[str]) -> str:
        key = match.group(1)
        if key not in values:
            raise KeyError(f"The package template's {where} uses an unknown placeholder {key!r}.")
        return values[key]

    return _PLACEHOLDER.sub(replace, text)


def _template_files(folder: Traversable, prefix: str = "") -> Iterator[tuple[str, Traversable]]:
    """Every ``*.tmpl`` file under `folder`, with its path relative to it, in name order."""
    for entry in sorted(folder.iterdir(), key=lambda entry: entry.name):
        path = f"{prefix}{entry.name}"
        if entry.is_dir():
            yield from _template_files(entry, f"{path}/")
        elif entry.name.endswith(_TEMPLATE_SUFFIX):
            yield path.removesuffix(_TEMPLATE_SUFFIX), entry


def template() -> Traversable:
    """The folder of the package template, shipped with core."""
    return importlib.resources.files("monsession._plugins") / "package_template"


def create_package(name: str, parent: str | os.PathLike[str], core_version: str) -> Path:
    """Creates the hook package `name` for monsession-core `core_version` in a new folder
    `parent/name`, and returns it. `NewPackageError` if `name` is refused (`package_names`),
    `parent` is not a folder or `parent/name` exists: nothing is overwritten."""
    names = package_names(name, core_version)
    parent = Path(parent)
    if not parent.is_dir():
        raise NewPackageError(f"--dir {str(parent)!r} is not an existing folder.")
    target = parent / name
    try:
        target.mkdir()  # Atomic: never into an existing folder.
    except FileExistsError:
        raise NewPackageError(
            f"{str(target)!r} already exists; new-package never overwrites it. Remove it or "
            "create the package elsewhere (--dir)."
        ) from None
    values = dataclasses.asdict(names)
    try:
        for relative, source in _template_files(template()):
            path = target / _render(relative, values, f"path {relative!r}")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(_render(source.read_text("utf-8"), values, relative), "utf-8")
    except BaseException:
        shutil.rmtree(target, ignore_errors=True)  # Ours: made above.
        raise
    return target


if __name__ == "__main__":
    raise SystemExit(main())
