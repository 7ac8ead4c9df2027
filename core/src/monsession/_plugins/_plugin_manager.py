"""The plugin manager: built once per process from core's plugin and the entry points.

Core's `CorePlugin` first, then the ``monsession`` entry points in reverse name order (pluggy
then calls them by name); the ``ENV_*`` variables are read then. A plugin that fails, loading or
called, is reported once (WARNING, with its distribution and version) and left out, or raises
`PluginLoadError` / `PluginCallError` in strict mode. A plugin built for a newer or older core
is named with the fix and stays loaded. (pluggy's own loader stops at the first failure and
cannot skip a distribution.) Nothing here imports TensorFlow.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.metadata
import logging
import os
from collections.abc import Callable, Sequence
from typing import TypeVar

import pluggy

from monsession._durability._files import DirectoryLockedError
from monsession._plugins import _hookspecs
from monsession._plugins._hookspecs import PROJECT_NAME, Answer, ask_one, hookimpl
from monsession._plugins._plugin_types import (
    ENV_DISABLE_AUTOLOAD,
    ENV_DISABLED_PLUGINS,
    ENV_STRICT,
    Plugin,
    PluginCallError,
    PluginCallFailure,
    PluginFailure,
    PluginForNewerCore,
    PluginForOlderCore,
    PluginLoadError,
    PluginSource,
    core_range,
    core_requirement,
    ends_below,
    normalize,
    unknown_hookspecs,
)

ENTRY_POINT_GROUP = PROJECT_NAME
CORE_PLUGIN_NAME = "core"
CORE_DISTRIBUTION = "monsession-core"
# The entry point that installs of older monsession-core metadata may still
# declare for core's plugin, which is now registered directly.
_OLD_CORE_ENTRY_POINT = "monsession._plugins._builtin_plugin"
_CONTROL_HOOKS = ("StopAtStepHook", "FeedFnHook", "FinalOpsHook", "GlobalStepWaiterHook")

logger = logging.getLogger(PROJECT_NAME)
T = TypeVar("T")
_P = TypeVar("_P", PluginFailure, PluginForNewerCore, PluginForOlderCore)


class CorePlugin:
    """Core's control hooks, registered as ``"core"`` (not an entry point: always there)."""

    @hookimpl
    def monsession_hook_classes(self) -> list[str]:
        """Returns lazy references to core's control hooks."""
        return [f"monsession._api._control_hooks:{name}" for name in _CONTROL_HOOKS]


@dataclasses.dataclass
class Discovery:
    """The manager and what building it found; cached until `_families.reset_plugin_manager`."""

    manager: pluggy.PluginManager
    sources: dict[str, PluginSource]
    autoload: bool
    strict: bool
    failures: list[PluginFailure] = dataclasses.field(default_factory=list)
    blocked: list[PluginSource] = dataclasses.field(default_factory=list)
    newer_core: list[PluginForNewerCore] = dataclasses.field(default_factory=list)
    older_core: list[PluginForOlderCore] = dataclasses.field(default_factory=list)
    warned: set[str] = dataclasses.field(default_factory=set)

    def warn_once(self, message: str, key: str | None = None) -> None:
        """Logs `message` at WARNING unless a warning with the same `key` was logged."""
        key = message if key is None else key
        if key not in self.warned:
            self.warned.add(key)
            logger.warning(message)

    def source(self, plugin: str) -> PluginSource:
        """Where the registered plugin `plugin` comes from (only its name if registered by hand)."""
        return self.sources.get(plugin, PluginSource(plugin))


def env_flag(name: str) -> bool:
    """Whether environment variable `name` is set: any value but empty, ``0`` or ``false``."""
    value = os.environ.get(name, "").strip().lower()
    return value not in ("", "0", "false")


def core_version() -> str | None:
    """Returns the installed version of `monsession-core`, or `None`."""
    try:
        return importlib.metadata.version(CORE_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return None


@functools.cache
def discovery() -> Discovery:
    """Builds the manager on first call and returns it with what discovery found."""
    manager = pluggy.PluginManager(PROJECT_NAME)
    manager.add_hookspecs(_hookspecs)
    manager.register(CorePlugin(), name=CORE_PLUGIN_NAME)
    core = PluginSource(CORE_PLUGIN_NAME, None, CORE_DISTRIBUTION, core_version())
    found = Discovery(
        manager=manager,
        sources={CORE_PLUGIN_NAME: core},
        autoload=not env_flag(ENV_DISABLE_AUTOLOAD),
        strict=env_flag(ENV_STRICT),
    )
    if found.autoload:
        _load_entry_points(found)
    return found


def _entry_points() -> list[importlib.metadata.EntryPoint]:
    """The group's entry points, each once, last name first (pluggy calls LIFO)."""
    unique: dict[tuple[str, str], importlib.metadata.EntryPoint] = {}
    for entry_point in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        unique.setdefault((entry_point.name, entry_point.value), entry_point)
    unique.pop((CORE_PLUGIN_NAME, _OLD_CORE_ENTRY_POINT), None)
    return sorted(unique.values(), key=lambda entry_point: entry_point.name, reverse=True)


def _load_entry_points(found: Discovery) -> None:
    disabled = _disabled_names()
    for entry_point in _entry_points():
        dist = entry_point.dist
        source = _source(entry_point, dist)
        if disabled & {normalize(source.name), normalize(source.distribution or "")}:
            found.blocked.append(source)
            continue
        registered = None
        try:
            plugin = entry_point.load()
            registered = found.manager.register(plugin, name=source.name)
            # Ask the registration hooks now so a broken answer is reported
            # like any other load failure, naming the plugin.
            _hookspecs.check_registrations(found.manager, source.name)
        except Exception as error:
            _failed_to_load(found, source, registered, error)
            continue
        found.sources[source.name] = source
        _check_cores(found, plugin, source, dist)


def _disabled_names() -> set[str]:
    """The normalized names listed in `MONSESSION_DISABLED_PLUGINS`."""
    return {
        normalize(name.strip())
        for name in os.environ.get(ENV_DISABLED_PLUGINS, "").split(",")
        if name.strip()
    }


def _source(
    entry_point: importlib.metadata.EntryPoint, dist: importlib.metadata.Distribution | None
) -> PluginSource:
    return PluginSource(
        entry_point.name,
        entry_point.value,
        dist.name if dist is not None else None,
        dist.version if dist is not None else None,
    )


def _failed_to_load(
    found: Discovery, source: PluginSource, registered: str | None, error: Exception
) -> None:
    """Unregisters a plugin that failed to load, and reports it."""
    if registered is not None:
        found.manager.unregister(name=registered)
    _report_load(found, PluginFailure(source, error), found.failures, error)


def _check_cores(
    found: Discovery,
    plugin: Plugin,
    source: PluginSource,
    dist: importlib.metadata.Distribution | None,
) -> None:
    """Reports a loaded plugin built for a newer core, or for an older one."""
    unknown = unknown_hookspecs(found.manager, plugin)
    version, requirement = core_version(), core_requirement(dist)
    if unknown:
        newer = PluginForNewerCore(source, unknown, version, requirement)
        _report_load(found, newer, found.newer_core)
    if requirement and version is not None and ends_below(requirement, version):
        older = PluginForOlderCore(source, version, requirement, core_range(version))
        _report_load(found, older, found.older_core)


def _report_load(
    found: Discovery, problem: _P, kept: list[_P], error: Exception | None = None
) -> None:
    """Logs `problem` at WARNING and keeps it, or raises `PluginLoadError` in strict mode."""
    if found.strict:
        raise PluginLoadError(problem.message, name=problem.source.name) from error
    kept.append(problem)
    logger.warning(problem.message)


def get_plugin_manager() -> pluggy.PluginManager:
    """The process-wide `pluggy.PluginManager` (core's and every loaded plugin), built once.

    Raises:
      PluginLoadError: If a plugin fails to load under `MONSESSION_STRICT_PLUGINS`.
    """
    return discovery().manager


def warn_once(message: str, key: str | None = None) -> None:
    """Logs `message` at WARNING once per plugin manager (per `key`, default `message`)."""
    discovery().warn_once(message, key)


# --- calling the registered plugins, with the one failure policy ---


def plugin_names(manager: pluggy.PluginManager) -> list[str]:
    """The registered plugin names, core first, then by name."""
    names = (name for name, plugin in manager.list_name_plugin() if plugin is not None)
    return sorted(names, key=lambda name: (name != CORE_PLUGIN_NAME, name))


def report(found: Discovery, plugin: str, hook_name: str, error: Exception) -> None:
    """Applies the failure policy: raise in strict mode, else warn (once) and go on."""
    failure = PluginCallFailure(found.source(plugin), hook_name, error)
    if found.strict:
        raise PluginCallError(failure.message) from error
    found.warn_once(failure.message)


def answers_by_plugin(
    found: Discovery, hook_name: str, check: Callable[[Sequence[Answer]], list[T]]
) -> list[tuple[str, list[T]]]:
    """Each plugin's checked items for a registration hook, core first, then by name.

    A plugin that raises, or whose items `check` rejects, is left out (see `report`).
    """
    answers = []
    for plugin in plugin_names(found.manager):
        try:
            answers.append((plugin, check(ask_one(found.manager, hook_name, plugin))))
        except Exception as error:
            report(found, plugin, hook_name, error)
    return answers


def call_all(found: Discovery, hook_name: str, **kwargs: object) -> list[Answer]:
    """One pluggy call of `hook_name`; a plugin that raises is left out, then it is retried.

    `ValueError`, `TypeError` (a bad argument of the user's) and
    `DirectoryLockedError` reach the user unchanged.
    """
    left_out: list[Plugin] = []
    while True:
        caller = found.manager.subset_hook_caller(hook_name, left_out)
        try:
            return list(caller(**kwargs))
        except (ValueError, TypeError, DirectoryLockedError):
            raise
        except Exception as error:
            plugin = _raising_plugin(found.manager, hook_name, error)
            if plugin is None:
                raise
            report(found, plugin, hook_name, error)
            left_out.append(found.manager.get_plugin(plugin))


def _raising_plugin(manager: pluggy.PluginManager, hook_name: str, error: Exception) -> str | None:
    """The plugin whose implementation raised `error`: the innermost in its traceback."""
    codes = {
        impl.function.__code__: impl.plugin_name
        for impl in getattr(manager.hook, hook_name).get_hookimpls()
        if hasattr(impl.function, "__code__")
    }
    found = None
    traceback = error.__traceback__
    while traceback is not None:
        found = codes.get(traceback.tb_frame.f_code, found)
        traceback = traceback.tb_next
    return found
