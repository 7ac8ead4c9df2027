"""The plugin system's value types (where a plugin comes from, what it gives, what failed),
and which monsession-core a plugin was built for.

A family built for a later core may implement hookspecs this core lacks
(`unknown_hookspecs`); one pinned to an older series may be installed beside
a newer core without pip checking (`ends_below`). Versions compare by release
numbers (``1.0.0rc1`` as ``1.0.0``). Nothing here imports TensorFlow.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import re
from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    import pluggy

Plugin: TypeAlias = object
"""A registered plugin: a module or any object holding hook implementations (as pluggy takes it)."""

ENV_DISABLE_AUTOLOAD = "MONSESSION_DISABLE_PLUGIN_AUTOLOAD"
"""The environment variable that, set to 1, loads no plugin entry point."""
ENV_DISABLED_PLUGINS = "MONSESSION_DISABLED_PLUGINS"
"""The environment variable naming plugins to skip (entry-point or distribution names, a,b)."""
ENV_STRICT = "MONSESSION_STRICT_PLUGINS"
"""The environment variable that, set to 1, makes a failing plugin an error, not a warning."""


def normalize(name: str) -> str:
    """`name` as package indexes and the environment variables compare names (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


class PluginLoadError(ImportError):
    """A plugin failed to load while `MONSESSION_STRICT_PLUGINS` is set."""


class UnknownHookError(AttributeError):
    """No installed hook family provides a hook class of this name."""


@dataclasses.dataclass(frozen=True)
class PluginSource:
    """Where a plugin comes from.

    `name` is the entry point's (or ``"core"``); `entry_point` its value
    (`None` for core's and hand-registered plugins); `distribution` and
    `version` those of the distribution that ships it, if known.
    """

    name: str
    entry_point: str | None = None
    distribution: str | None = None
    version: str | None = None

    def describe(self) -> str:
        """Returns e.g. ``'x' (monsession-hooks-x 1.2)`` for messages."""
        if self.distribution is None:
            return f"'{self.name}' (unknown distribution)"
        return f"'{self.name}' ({self.distribution} {self.version})"


@dataclasses.dataclass(frozen=True)
class PluginFailure:
    """A plugin that failed to load and was skipped."""

    source: PluginSource
    error: Exception

    @property
    def message(self) -> str:
        """The sentence logged for this failure, with the fix."""
        return (
            f"Plugin {self.source.describe()} failed to load: "
            f"{type(self.error).__name__}: {str(self.error).rstrip('.')}; "
            f"set {ENV_DISABLED_PLUGINS}={self.source.name} to skip it."
        )


@dataclasses.dataclass(frozen=True)
class PluginForNewerCore:
    """A loaded plugin that implements hookspecs this core does not declare.

    `unknown_hookspecs` are never called; `core_requirement` is the monsession-core range its
    distribution requires (``""``: any version; `None`: none required).
    """

    source: PluginSource
    unknown_hookspecs: tuple[str, ...]
    core_version: str | None
    core_requirement: str | None

    @property
    def message(self) -> str:
        """The sentence logged (or raised in strict mode), with both versions and the fix."""
        one = len(self.unknown_hookspecs) == 1
        names = ", ".join(self.unknown_hookspecs)
        if self.core_requirement is None:
            requires = "its distribution declares no monsession-core range"
        else:
            requires = f"it requires monsession-core{self.core_requirement or ' (any version)'}"
        return (
            f"Plugin {self.source.describe()} implements the hookspec{'' if one else 's'} "
            f"{names}, which monsession-core {self.core_version or '(unknown version)'} does "
            f"not declare: it was built for a newer core ({requires}) or misspells a hookspec "
            f"name, and monsession never calls {'that hookimpl' if one else 'those hookimpls'}. "
            "Upgrade monsession-core (pip install --upgrade monsession-core), or set "
            f"{ENV_DISABLED_PLUGINS}={self.source.name} to skip the plugin."
        )


@dataclasses.dataclass(frozen=True)
class PluginForOlderCore:
    """A loaded plugin whose monsession-core range ends below the installed core.

    `core_range` is the range a package made by this core requires (its major
    series), which the fix widens to.
    """

    source: PluginSource
    core_version: str
    core_requirement: str
    core_range: str

    @property
    def message(self) -> str:
        """The sentence logged (or raised in strict mode): the range, the core and the fix."""
        return (
            f"Plugin {self.source.describe()} requires monsession-core{self.core_requirement}, "
            f"which excludes the installed monsession-core {self.core_version}: it was built "
            "for an older core. It is loaded and may work; to support this core, widen its "
            f"requirement to monsession-core{self.core_range} and release it again (or make "
            "the package again with `monsession new-package`), or install a monsession-core "
            f"in its range. Set {ENV_DISABLED_PLUGINS}={self.source.name} to skip the plugin."
        )


@dataclasses.dataclass(frozen=True)
class PluginInfo:
    """A registered plugin, for listings."""

    source: PluginSource
    hook_classes: tuple[str, ...]
    training_arguments: tuple[str, ...]
    other_classes: tuple[str, ...] = ()  # Not hooks: listeners, caches, errors.


@dataclasses.dataclass(frozen=True)
class PluginListing:
    """Everything `monsession plugins` shows.

    `plugins` (core first, then by name) includes those of `newer_core` and
    `older_core`; `blocked` are skipped by `MONSESSION_DISABLED_PLUGINS`;
    `autoload` is false under `MONSESSION_DISABLE_PLUGIN_AUTOLOAD`.
    """

    plugins: tuple[PluginInfo, ...]
    failures: tuple[PluginFailure, ...]
    blocked: tuple[PluginSource, ...]
    autoload: bool
    newer_core: tuple[PluginForNewerCore, ...] = ()
    older_core: tuple[PluginForOlderCore, ...] = ()


class PluginCallError(RuntimeError):
    """A plugin raised or answered badly while `MONSESSION_STRICT_PLUGINS` is set."""


@dataclasses.dataclass(frozen=True)
class PluginCallFailure:
    """A plugin that raised (or answered badly) when called, and was left out."""

    source: PluginSource
    hook_name: str
    error: Exception

    @property
    def message(self) -> str:
        """The sentence logged (or raised in strict mode) for this failure."""
        return (
            f"Plugin {self.source.describe()} failed in {self.hook_name}: "
            f"{type(self.error).__name__}: {str(self.error).rstrip('.')}; "
            "its contribution is skipped. "
            f"Set {ENV_DISABLED_PLUGINS}={self.source.name} to stop loading it."
        )


# --- which core a plugin was built for ---

_CORE_REQUIREMENT = re.compile(r"^monsession[-_.]core(?![\w.-])\s*(?P<range>[^;]*)", re.I)


def unknown_hookspecs(manager: pluggy.PluginManager, plugin: Plugin) -> tuple[str, ...]:
    """The names of `plugin`'s hookimpls that no hookspec of `manager` declares, sorted."""
    callers = manager.get_hookcallers(plugin) or []
    return tuple(sorted(caller.name for caller in callers if not caller.has_spec()))


def core_requirement(dist: importlib.metadata.Distribution | None) -> str | None:
    """The monsession-core range `dist` requires (e.g. ``">=0.1,<0.2"``, ``""`` for any
    version), or `None` when the distribution is unknown or does not require it."""
    for requirement in (dist.requires or []) if dist is not None else []:
        match = _CORE_REQUIREMENT.match(requirement.strip())
        if match:
            return match.group("range").strip().strip("()").replace(" ", "")
    return None


def core_range(version: str) -> str:
    """The `monsession-core` range of packages made with core `version`: its major series.

    ``1.0.0``: ``>=1.0,<2``; ``2.0.0rc1``: ``>=2.0.0rc1,<3``; ``0.1.3``:
    ``>=0.1,<0.2``. `ValueError` if `version` does not start with ``MAJOR.MINOR``.
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
    """Whether some clause of `requirement` (``<0.2``, ``<=0.9``, ``==0.1.*``, ``~=0.1``)
    bounds it from above below `core_version`; false when either is unknown."""
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
