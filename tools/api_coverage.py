"""The API reference's coverage: public names documented / public names.

    python tools/api_coverage.py [--min FRACTION]

Reads the sources as the site's API reference does (griffe, statically, no
TensorFlow): the public names of `monsession`, `monsession.plugins`,
`monsession.testing`, `monsession.tf_logging` and each hook family's
package are their `__all__`; `monsession.hooks` has no names of its own (it
resolves the families' hook classes by name). A name counts as documented
when it has a docstring; so does each public method and property of a
public class (its members). Prints one line per module and the totals, and
exits with status 1 when a total is below `--min` (default 1.0: every name).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import griffe

ROOT = Path(__file__).parents[1]
PACKAGES = {
    "monsession": "core/src",
    "monsession_hooks_checkpoint": "hooks-checkpoint/src",
    "monsession_hooks_summary": "hooks-summary/src",
    "monsession_hooks_logging": "hooks-logging/src",
    "monsession_hooks_debug": "hooks-debug/src",
    "monsession_hooks_keras": "hooks-keras/src",
    "monsession_hooks_mlflow": "hooks-mlflow/src",
}
# The callback methods whose contract their base class documents.
CALLBACKS = frozenset(
    {"begin", "after_create_session", "before_run", "after_run", "end", "next_action"}
    | {"on_failure", "state_dict", "load_state_dict", "epoch_begin", "epoch_end"}
    | {"create_session"}
)
MODULES = (
    "monsession",
    "monsession.plugins",
    "monsession.testing",
    "monsession.tf_logging",
    *list(PACKAGES)[1:],
)


def _documented(obj: griffe.Object | griffe.Alias) -> bool:
    return obj.docstring is not None and obj.docstring.value.strip() != ""


def _members(obj: griffe.Object | griffe.Alias) -> list[griffe.Object | griffe.Alias]:
    """The public methods and properties a public class defines (not inherited ones).

    Overrides of the callback methods of the hook API (`SessionRunHook.begin`,
    ...), of `SessionCreator.create_session` and of Keras' `Callback.on_*`
    are left out: their contract is documented once, on the base class.
    """
    if not obj.is_class:
        return []
    return [
        member
        for name, member in obj.members.items()
        if not name.startswith("_")
        and (member.is_function or "property" in member.labels)
        and name not in CALLBACKS
        and not name.startswith("on_")
    ]


def public_names(module: griffe.Module) -> list[str]:
    """`module`'s `__all__`; without one, the public names it defines."""
    if module.exports is not None:
        return list(module.exports)
    return [
        name
        for name, obj in module.members.items()
        if not name.startswith("_") and not obj.is_alias
    ]


def coverage(loader: griffe.GriffeLoader, module: str) -> tuple[list[str], int, list[str], int]:
    """(undocumented names, public names, undocumented members, public members) of `module`."""
    found = loader.modules_collection[module]
    names = public_names(found)
    missing, members, missing_members = [], 0, []
    for name in names:
        obj = found[name]
        if not _documented(obj):
            missing.append(f"{module}.{name}")
        if obj.is_module:
            continue
        for member in _members(obj):
            members += 1
            if not _documented(member):
                missing_members.append(f"{module}.{name}.{member.name}")
    return missing, len(names), missing_members, members


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--min", type=float, default=1.0)
    args = parser.parse_args(argv)
    loader = griffe.GriffeLoader(search_paths=[str(ROOT / path) for path in PACKAGES.values()])
    for package in PACKAGES:
        loader.load(package)
    loader.resolve_aliases(external=False)
    totals = [0, 0, 0, 0]
    for module in MODULES:
        missing, names, missing_members, members = coverage(loader, module)
        totals = [
            totals[0] + names - len(missing),
            totals[1] + names,
            totals[2] + members - len(missing_members),
            totals[3] + members,
        ]
        print(
            f"{module}: {names - len(missing)}/{names} names, "
            f"{members - len(missing_members)}/{members} methods and properties"
        )
        for name in missing + missing_members:
            print(f"  undocumented: {name}")
    names_share, members_share = totals[0] / totals[1], totals[2] / totals[3]
    print(
        f"total: {totals[0]}/{totals[1]} public names documented ({names_share:.1%}), "
        f"{totals[2]}/{totals[3]} of their public methods and properties ({members_share:.1%})"
    )
    return 0 if min(names_share, members_share) >= args.min else 1


if __name__ == "__main__":
    sys.exit(main())
