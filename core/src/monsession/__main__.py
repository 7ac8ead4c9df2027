"""``python -m monsession``: the `monsession` command line.

    monsession plugins [--json]             list hook families, failures, blocked plugins,
                                            plugins built for a newer or an older core
    monsession new-package NAME [--dir D]   create a hook package (see `_new_package`)
    monsession --version

Neither command imports TensorFlow: lazy hook class references are shown by
name, not loaded.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import sys
from collections.abc import Sequence
from typing import Any

from monsession import __version__
from monsession._plugins import _new_package, _plugin_manager
from monsession._plugins._families import plugin_infos
from monsession._plugins._plugin_types import (
    ENV_DISABLE_AUTOLOAD,
    ENV_DISABLED_PLUGINS,
    PluginInfo,
    PluginListing,
    PluginLoadError,
    PluginSource,
)


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
    new_package.add_argument(
        "name", metavar="NAME", help=f"the distribution name, {_new_package.PREFIX}<name>"
    )
    new_package.add_argument(
        "--dir", default=".", help="the folder to create it in (default: the current one)"
    )
    return parser


def _source_json(source: PluginSource) -> dict[str, Any]:
    return {
        "name": source.name,
        "distribution": source.distribution,
        "version": source.version,
        "entry_point": source.entry_point,
    }


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
    """Returns `listing` as an aligned table of hook classes, then the other
    classes, plugins built for a newer or an older core, failures, blocked
    plugins and whether autoloading is off."""
    lines = _hook_table(listing)
    for section in (
        _other_classes,
        _other_cores,
        _failures,
        _blocked,
        _autoload_off,
    ):
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
    entry_point = source.entry_point or (
        "(built in)" if source.name == _plugin_manager.CORE_PLUGIN_NAME else "-"
    )
    return (
        source.name,
        source.distribution or "-",
        source.version or "-",
        entry_point,
        ", ".join(info.hook_classes) or "-",
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
    """Runs the `monsession` command line.

    Args:
      argv: The arguments, without the program name; defaults to `sys.argv[1:]`.

    Returns:
      The exit status: 0 on success, 1 when a plugin fails to load in strict
      mode (`MONSESSION_STRICT_PLUGINS`), 2 for a usage error (a package
      name or folder that `new-package` refuses), 141 when the reader of its output
      closed the pipe early (as for a Unix tool killed by SIGPIPE).
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
        target = _new_package.create_package(name, parent, version)
    except _new_package.NewPackageError as error:
        print(f"monsession new-package: error: {error}", file=sys.stderr)
        return 2
    print(f"Created {target}: the hook package {name}. Next: cd {shlex.quote(str(target))} && tox")
    return 0


def _write(text: str) -> int:
    """Prints `text`; the exit status: 0, or 141 (SIGPIPE's) if the reader closed the pipe.

    ``monsession plugins | head`` then ends quietly, as a Unix tool killed by
    SIGPIPE does: no traceback, and no second error when Python flushes
    stdout at exit (it is pointed at the null device).
    """
    try:
        print(text, flush=True)
    except BrokenPipeError:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)
        return 128 + signal.SIGPIPE
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
