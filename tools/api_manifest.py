"""The public API of a release, recorded in api/ and compared with the sources.

    python tools/api_manifest.py check   # the sources against the newest manifest
    python tools/api_manifest.py write   # api/monsession-<version>.json (when releasing)

A manifest holds every public module's names (`__all__`) with their kind and
signature, the public methods and properties of each class (inherited ones
included), the hookspecs with their arguments, the entry-point group and
the environment variables. It is read from the sources by griffe,
statically, as the API reference is: no TensorFlow. `check` compares the
sources with the newest manifest no newer than core's version and exits 1
on an incompatible change (docs/stability.md): a removed name, member,
hookspec or argument, a changed kind, a removed or reordered parameter, a
new parameter without a default, a changed default, unless core's
deprecation registry lists the name and its removing release is reached.
Additions are listed and pass.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import griffe

sys.path.insert(0, str(Path(__file__).parent))
from api_coverage import MODULES, PACKAGES, public_names

ROOT = Path(__file__).parents[1]
API = ROOT / "api"
_HOOKSPECS = "monsession._plugins._hookspecs"
# Where the environment variables are named (ENV_* constants).
_ENV_CONSTANTS = ("monsession._plugins._plugin_types", "monsession._fusion._plan")
_POSITIONAL = ("positional-only", "positional or keyword")
# Kind changes that accept every call the old kind did.
_WIDENING = {
    ("positional-only", "positional or keyword"),
    ("keyword-only", "positional or keyword"),
}
Removable = Callable[[str, str], object]


def _parameters(obj: griffe.Object | griffe.Alias) -> list[dict[str, str]]:
    found = []
    for parameter in obj.parameters:
        if parameter.name in ("self", "cls") and not found:
            continue
        entry = {"name": parameter.name, "kind": parameter.kind.value}
        if parameter.default is not None:
            entry["default"] = str(parameter.default)
        found.append(entry)
    return found


def _describe(obj: griffe.Object | griffe.Alias, depth: int = 0) -> dict[str, Any]:
    entry: dict[str, Any] = {"kind": obj.kind.value}
    if obj.is_function or obj.is_class:
        entry["parameters"] = _parameters(obj)
    if obj.is_class and depth == 0:
        entry["members"] = {
            name: _describe(member, depth + 1)
            for name, member in sorted(obj.all_members.items())
            if not name.startswith("_")
        }
    return entry


def extract(root: Path = ROOT) -> dict[str, Any]:
    """The public API of the sources under `root`, as a manifest (without its version)."""
    loader = griffe.GriffeLoader(search_paths=[str(root / path) for path in PACKAGES.values()])
    for package in PACKAGES:
        loader.load(package)
    loader.resolve_aliases(external=False)
    modules = loader.modules_collection
    hookspecs = modules[_HOOKSPECS]
    return {
        "entry_point_group": json.loads(hookspecs["PROJECT_NAME"].value.replace("'", '"')),
        "environment_variables": sorted(
            json.loads(str(attribute.value).replace("'", '"'))
            for module in _ENV_CONSTANTS
            for name, attribute in modules[module].members.items()
            if name.startswith("ENV_")
        ),
        "hookspecs": {
            name: [parameter.name for parameter in function.parameters]
            for name, function in hookspecs.members.items()
            if name.startswith("monsession_") and function.is_function
        },
        "modules": {
            module: {
                name: _describe(modules[module][name]) for name in public_names(modules[module])
            }
            for module in MODULES
        },
    }


def core_version(root: Path = ROOT) -> str:
    """Core's version, from its `__version__`."""
    text = (root / "core/src/monsession/__init__.py").read_text("utf-8")
    match = re.search(r'^__version__ = "([^"]+)"', text, re.M)
    if match is None:
        raise SystemExit("core/src/monsession/__init__.py has no __version__.")
    return match.group(1)


def release(version: str) -> tuple[int, int, int]:
    """The release numbers of `version` (``1.2`` is ``(1, 2, 0)``)."""
    parts = [int(part) for part in re.findall(r"\d+", version)[:3]]
    return (*parts, 0, 0, 0)[:3]  # type: ignore[return-value]


def baseline(version: str, folder: Path = API) -> Path | None:
    """The newest manifest of `folder` whose release is no newer than `version`."""
    manifests = [
        (release(path.stem.removeprefix("monsession-")), path)
        for path in folder.glob("monsession-*.json")
    ]
    older = [found for found in manifests if found[0] <= release(version)]
    return max(older)[1] if older else None


def registry(root: Path = ROOT) -> Removable:
    """`removable(name, version)` of core's deprecation registry (stdlib only, loaded by path)."""
    path = root / "core/src/monsession/_attributes.py"
    spec = importlib.util.spec_from_file_location("_monsession_deprecation", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses looks its module up.
    spec.loader.exec_module(module)
    return module.removable  # type: ignore[no-any-return]


@dataclasses.dataclass
class Report:
    """What changed: incompatible changes (each fails the check) and additions."""

    incompatible: list[str] = dataclasses.field(default_factory=list)
    added: list[str] = dataclasses.field(default_factory=list)


def _compare_parameters(
    where: str, old: list[dict[str, str]], new: list[dict[str, str]]
) -> list[str]:
    problems = []
    by_name = {parameter["name"]: parameter for parameter in new}
    for parameter in old:
        name, now = parameter["name"], by_name.get(parameter["name"])
        if now is None:
            problems.append(f"{where}: parameter {name!r} removed")
            continue
        if now["kind"] != parameter["kind"] and (parameter["kind"], now["kind"]) not in _WIDENING:
            problems.append(
                f"{where}: parameter {name!r} changed from {parameter['kind']} to {now['kind']}"
            )
        if "default" in parameter and parameter.get("default") != now.get("default"):
            problems.append(
                f"{where}: parameter {name!r} default changed from {parameter['default']} to "
                f"{now.get('default', '(required)')}"
            )
    old_names = {parameter["name"] for parameter in old}
    for parameter in new:
        if (
            parameter["name"] not in old_names
            and "default" not in parameter
            and "variadic" not in parameter["kind"]
        ):
            problems.append(f"{where}: new required parameter {parameter['name']!r}")
    positional = [parameter["name"] for parameter in old if parameter["kind"] in _POSITIONAL]
    now_positional = [parameter["name"] for parameter in new if parameter["kind"] in _POSITIONAL]
    if now_positional[: len(positional)] != positional and set(positional) <= set(now_positional):
        problems.append(
            f"{where}: positional parameters reordered: {positional} -> {now_positional}"
        )
    return problems


def _compare_entry(
    where: str,
    old: dict[str, Any],
    new: dict[str, Any],
    report: Report,
    removable: Callable[[str], object],
) -> None:
    if old["kind"] != new["kind"]:
        report.incompatible.append(f"{where}: changed from {old['kind']} to {new['kind']}")
        return
    if "parameters" in old:
        report.incompatible += _compare_parameters(where, old["parameters"], new["parameters"])
    _compare_names(where, old.get("members", {}), new.get("members", {}), report, removable)


def _compare_names(
    where: str,
    old: dict[str, Any],
    new: dict[str, Any],
    report: Report,
    removable: Callable[[str], object],
) -> None:
    for name, entry in old.items():
        path = f"{where}.{name}"
        if name in new:
            _compare_entry(path, entry, new[name], report, removable)
        elif not removable(path):
            report.incompatible.append(f"{path}: removed")
    report.added += [f"{where}.{name}" for name in new if name not in old]


def compare(old: dict[str, Any], new: dict[str, Any], version: str, removable: Removable) -> Report:
    """The changes from manifest `old` to `new`, for sources at `version`."""
    report = Report()

    def gone(name: str) -> bool:
        return removable(name, version) is not None

    if old["entry_point_group"] != new["entry_point_group"]:
        report.incompatible.append(
            f"entry-point group renamed from {old['entry_point_group']!r} "
            f"to {new['entry_point_group']!r}"
        )
    for variable in sorted(set(old["environment_variables"]) - set(new["environment_variables"])):
        if not gone(variable):
            report.incompatible.append(f"environment variable {variable}: removed")
    for name, arguments in old["hookspecs"].items():
        now = new["hookspecs"].get(name)
        if now is None:
            if not gone(name):
                report.incompatible.append(f"hookspec {name}: removed")
            continue
        report.incompatible += [
            f"hookspec {name}: argument {argument!r} removed"
            for argument in arguments
            if argument not in now and not gone(f"{name}({argument})")
        ]
        report.added += [
            f"hookspec {name}({argument})" for argument in now if argument not in arguments
        ]
    report.added += [
        f"hookspec {name}" for name in new["hookspecs"] if name not in old["hookspecs"]
    ]
    for module, names in old["modules"].items():
        _compare_names(module, names, new["modules"].get(module, {}), report, gone)
    report.added += [module for module in new["modules"] if module not in old["modules"]]
    return report


def check(root: Path = ROOT, folder: Path = API) -> int:
    """Prints the changes since the newest manifest; returns 1 if one is incompatible."""
    version = core_version(root)
    path = baseline(version, folder)
    if path is None:
        print(f"No API manifest in {folder} for monsession {version} or older.")
        return 1
    report = compare(json.loads(path.read_text("utf-8")), extract(root), version, registry(root))
    print(
        f"monsession {version} against {path.name}: {len(report.added)} additions, "
        f"{len(report.incompatible)} incompatible changes"
    )
    for line in report.added:
        print(f"  added: {line}")
    for line in report.incompatible:
        print(f"  INCOMPATIBLE: {line}")
    if report.incompatible:
        print(
            "A public name or signature changed incompatibly (docs/stability.md): restore it, or "
            "deprecate it first (monsession/_attributes.py) and remove it in its removing release."
        )
    return 1 if report.incompatible else 0


def write(root: Path = ROOT, folder: Path = API) -> Path:
    """Writes the manifest of core's current version into `folder`; returns its path."""
    version = core_version(root)
    path = folder / f"monsession-{version}.json"
    path.write_text(
        json.dumps({"version": version, **extract(root)}, indent=1, sort_keys=True) + "\n", "utf-8"
    )
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=("check", "write"))
    parser.add_argument(
        "--root", type=Path, default=ROOT, help="the sources (default: this checkout)"
    )
    args = parser.parse_args(argv)
    if args.command == "write":
        print(write(args.root))
        return 0
    return check(args.root)


if __name__ == "__main__":
    sys.exit(main())
