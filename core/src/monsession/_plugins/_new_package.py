"""`monsession new-package NAME`: a new hook package, ready to test and publish.

The package is rendered from the plain files of `package_template/` (shipped
with core): each ``*.tmpl`` file, its path included, with its ``{{name}}``
placeholders replaced. Names must have the form ``monsession-hooks-<name>``,
which gives the import name ``monsession_hooks_<name>`` and the plugin (entry
point) name ``<name>``, as this project's own families have. Nothing here
imports TensorFlow.
"""

from __future__ import annotations

import dataclasses
import importlib.resources
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from monsession._plugins._families import OWN_DISTRIBUTIONS
from monsession._plugins._plugin_types import core_range, normalize

if TYPE_CHECKING:
    from importlib.abc import Traversable

PREFIX = "monsession-hooks-"
_SUFFIX = re.compile(r"[a-z][a-z0-9]*(?:-[a-z0-9]+)*")
_PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}")
_TEMPLATE_SUFFIX = ".tmpl"


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

    def placeholders(self) -> dict[str, str]:
        return dataclasses.asdict(self)


def package_names(name: str, core_version: str) -> PackageNames:
    """The names of the package `name`, after checking it.

    Raises:
      NewPackageError: If `name` is not ``monsession-hooks-<name>`` with
        `<name>` made of lowercase letters, digits and single hyphens,
        starting with a letter, or names one of monsession's own
        distributions.
    """
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
    """Creates the hook package `name` in a new folder `parent/name`.

    Args:
      name: The distribution name, ``monsession-hooks-<name>``.
      parent: The existing folder to create it in.
      core_version: The version of monsession-core it is made for.

    Returns:
      The new folder.

    Raises:
      NewPackageError: If `name` is refused (see `package_names`), `parent`
        is not a folder, or `parent/name` exists: nothing is overwritten.
    """
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
    values = names.placeholders()
    try:
        for relative, source in _template_files(template()):
            path = target / _render(relative, values, f"path {relative!r}")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(_render(source.read_text("utf-8"), values, relative), "utf-8")
    except BaseException:
        shutil.rmtree(target, ignore_errors=True)  # Ours: made above.
        raise
    return target
