"""Refuse a release whose packages disagree on the version.

One version policy: every released package carries the same version, in its
``pyproject.toml`` and as its ``__version__``, and every hook package requires
a ``monsession-core`` range that contains that version. With ``--tag`` the
version must also equal the release tag (``v0.1.0`` or ``0.1.0``).

    python tools/check_versions.py [--root .] [--tag v0.1.0]

Prints the version and exits 0 when everything agrees; otherwise prints one
line per disagreement and exits 1. Needs ``packaging`` (and ``tomli`` on
Python 3.10); imports none of the packages.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import pathlib
import sys

from packaging.requirements import Requirement
from packaging.version import InvalidVersion, Version

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

CORE = "monsession-core"
# The released packages: folder -> import name. Examples are not released.
PACKAGES = {
    "core": "monsession",
    "hooks-checkpoint": "monsession_hooks_checkpoint",
    "hooks-summary": "monsession_hooks_summary",
    "hooks-logging": "monsession_hooks_logging",
    "hooks-debug": "monsession_hooks_debug",
    "hooks-keras": "monsession_hooks_keras",
    "hooks-mlflow": "monsession_hooks_mlflow",
}


@dataclasses.dataclass(frozen=True)
class Package:
    """What a released package says about its version."""

    folder: str
    name: str
    version: str
    module_version: str | None
    core_requirement: Requirement | None


def read_package(root: pathlib.Path, folder: str, module: str) -> Package:
    """Reads `folder`'s pyproject.toml and `__version__` without importing it.

    Raises:
      FileNotFoundError: If the pyproject.toml or the package's `__init__.py` is missing.
    """
    project = tomllib.loads((root / folder / "pyproject.toml").read_text("utf-8"))["project"]
    init = root / folder / "src" / module / "__init__.py"
    core = [Requirement(text) for text in project.get("dependencies", [])]
    return Package(
        folder=folder,
        name=project["name"],
        version=str(project.get("version", "")),
        module_version=module_version(init),
        core_requirement=next((r for r in core if r.name == CORE), None),
    )


def module_version(init: pathlib.Path) -> str | None:
    """The string assigned to `__version__` at the top level of `init`, or None."""
    for node in ast.parse(init.read_text("utf-8"), str(init)).body:
        if (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "__version__" for t in node.targets)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            return node.value.value
    return None


def disagreements(packages: list[Package], tag: str | None = None) -> list[str]:
    """Every way `packages` (and `tag`) disagree on one version; empty when they agree."""
    problems = []
    versions = {p.version for p in packages}
    if len(versions) != 1:
        listed = ", ".join(f"{p.name} {p.version or '(none)'}" for p in packages)
        problems.append(f"The packages' pyproject.toml versions differ: {listed}.")
    version = packages[0].version
    for package in packages:
        try:
            Version(package.version)
        except InvalidVersion:
            problems.append(
                f"{package.name} ({package.folder}/pyproject.toml): version "
                f"{package.version!r} is not a valid version."
            )
            continue
        if package.module_version != package.version:
            problems.append(
                f"{package.name}: __version__ is {package.module_version!r} but "
                f"{package.folder}/pyproject.toml says {package.version!r}."
            )
        if package.name == CORE:
            continue
        if package.core_requirement is None:
            problems.append(f"{package.name} does not require {CORE}.")
        elif not package.core_requirement.specifier.contains(version, prereleases=True):
            problems.append(
                f"{package.name} requires {package.core_requirement}, which excludes "
                f"{CORE} {version}: widen the range to contain the release version."
            )
    if tag is not None and tag.removeprefix("v") != version:
        problems.append(f"The tag {tag!r} does not name the packages' version {version!r}.")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--root",
        type=pathlib.Path,
        default=pathlib.Path(__file__).resolve().parents[1],
        help="the repository (default: this script's checkout)",
    )
    parser.add_argument("--tag", help="the release tag, e.g. v0.1.0 (default: not checked)")
    args = parser.parse_args(argv)
    packages = [read_package(args.root, folder, module) for folder, module in PACKAGES.items()]
    problems = disagreements(packages, args.tag)
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    if problems:
        print("Release refused: every package must carry one version.", file=sys.stderr)
        return 1
    print(packages[0].version)
    return 0


if __name__ == "__main__":
    sys.exit(main())
