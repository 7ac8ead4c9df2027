"""The plugin system's value types: where a plugin comes from, what it gives, what failed.

Nothing here imports TensorFlow or pluggy. (`HookClassEntry`, which loads a
class, is in `_hook_classes`.)
"""

from __future__ import annotations

import dataclasses
from typing import TypeAlias

Plugin: TypeAlias = object
"""A registered plugin: a module or any object holding hook implementations (as pluggy takes it)."""

ENV_DISABLE_AUTOLOAD = "MONSESSION_DISABLE_PLUGIN_AUTOLOAD"
"""The environment variable that, set to 1, loads no plugin entry point."""
ENV_DISABLED_PLUGINS = "MONSESSION_DISABLED_PLUGINS"
"""The environment variable naming plugins to skip (entry-point or distribution names, a,b)."""
ENV_STRICT = "MONSESSION_STRICT_PLUGINS"
"""The environment variable that, set to 1, makes a failing plugin an error, not a warning."""


class PluginLoadError(ImportError):
    """A plugin failed to load while `MONSESSION_STRICT_PLUGINS` is set."""


class UnknownHookError(AttributeError):
    """No installed hook family provides a hook class of this name."""


@dataclasses.dataclass(frozen=True)
class PluginSource:
    """Where a plugin comes from.

    Args:
      name: The plugin name (the entry-point name, or ``"core"``).
      entry_point: The entry point's value, ``None`` for core's built-in plugin
        and for plugins registered by hand.
      distribution: The name of the distribution that ships it, if known.
      version: That distribution's version, if known.
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

    Args:
      source: The plugin.
      unknown_hookspecs: The names of its hookimpls that no hookspec of this
        core declares; monsession never calls them.
      core_version: This core's installed version, if known.
      core_requirement: The monsession-core range its distribution requires
        (``""`` for any version), or `None` if it requires none.
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

    Args:
      source: The plugin.
      core_version: This core's installed version.
      core_requirement: The monsession-core range its distribution requires.
      core_range: The range a package made by this core requires (its major
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

    Args:
      plugins: The registered plugins, core first, then by name.
      failures: Plugins that failed to load and were skipped.
      blocked: Plugins skipped because of `MONSESSION_DISABLED_PLUGINS`.
      autoload: False when `MONSESSION_DISABLE_PLUGIN_AUTOLOAD` is set.
      newer_core: Loaded plugins that implement hookspecs this core does not
        declare (they are in `plugins` too).
      older_core: Loaded plugins whose monsession-core range ends below this
        core (they are in `plugins` too).
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
