"""The monsession-core range of hook packages: the one to require, and one that ends too soon.

`core_range` gives the range a new package requires (`monsession
new-package` writes it): the major series, which the stability policy keeps
compatible.

`ends_below` finds a plugin built for an older core. A package made from an
older template (``monsession-core>=0.1,<0.2``) or pinned to an older series
still installs beside a newer core when pip is told not to check
(``--no-deps``, an environment built by hand, a lock file). It may work, or
not. Discovery asks whether a loaded plugin's declared range ends below the
installed core, so that the plugin is named (WARNING, or an error in strict
mode) with its range and the fix, rather than failing later without its
name.

Versions compare by their release numbers (``1.0.0rc1`` as ``1.0.0``); the
stdlib suffices, nothing here imports TensorFlow.
"""

from __future__ import annotations

import re


def core_range(version: str) -> str:
    """The `monsession-core` requirement for packages made with core `version`: its major series.

    ``1.0.0`` gives ``>=1.0,<2`` (the stability policy keeps a major series
    compatible, so the package survives minor releases); a pre-release or
    development version is the lower bound itself (``2.0.0rc1`` gives
    ``>=2.0.0rc1,<3``), so that the core that made the package satisfies it.
    A 0.x core keeps its minor series (``0.1.0`` gives ``>=0.1,<0.2``).

    Raises:
      ValueError: If `version` does not start with ``MAJOR.MINOR``.
    """
    match = re.match(r"(\d+)\.(\d+)(\.\d+)*(.*)$", version)
    if match is None:
        raise ValueError(f"monsession-core's version {version!r} is not a release version.")
    major, minor = int(match.group(1)), int(match.group(2))
    lower = version if match.group(4) else f"{major}.{minor}"
    upper = f"{major + 1}" if major else f"0.{minor + 1}"
    return f">={lower},<{upper}"


_CLAUSE = re.compile(r"^(~=|===|==|!=|<=|>=|<|>)\s*v?(\d+(?:\.\d+)*)(\.\*)?")


def _release(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def _padded(left: tuple[int, ...], right: tuple[int, ...]) -> tuple[tuple[int, ...], ...]:
    width = max(len(left), len(right))
    return tuple(numbers + (0,) * (width - len(numbers)) for numbers in (left, right))


def _above(core: tuple[int, ...], operator: str, bound: tuple[int, ...], wildcard: bool) -> bool:
    """Whether `core` is past the upper end of one clause ``<operator><bound>``."""
    if operator == "~=" and len(bound) > 1:
        operator, bound = "<", (*bound[:-2], bound[-2] + 1)
    elif operator in ("==", "===") and wildcard:
        core = core[: len(bound)]
    version, limit = _padded(core, bound)
    if operator == "<":
        return version >= limit
    if operator in ("<=", "==", "==="):
        return version > limit
    return False


def ends_below(requirement: str | None, core_version: str | None) -> bool:
    """Whether the range `requirement` (e.g. ``">=0.1,<0.2"``) ends below `core_version`.

    Returns:
      True when some clause bounds the range from above below the core
      (``<0.2``, ``<=0.9``, ``==0.1.*``, ``~=0.1``); false when the range
      admits the core, ends above it, or either is unknown.
    """
    if not requirement or core_version is None:
        return False
    match = re.match(r"\d+(?:\.\d+)*", core_version)
    if match is None:
        return False
    core = _release(match.group(0))
    for clause in requirement.split(","):
        found = _CLAUSE.match(clause.strip())
        if found and _above(core, found.group(1), _release(found.group(2)), bool(found.group(3))):
            return True
    return False
