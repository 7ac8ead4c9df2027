"""The plugin manager: discovers hook families and answers questions about them.

Core registers its own plugin (`monsession._builtin_plugin`) directly, then
loads the entry points of the ``monsession`` group. A plugin that fails to
load is reported and skipped, unless strict mode is on. Environment
variables, read when the manager is built:

* ``MONSESSION_DISABLE_PLUGIN_AUTOLOAD``: load no entry point at all.
* ``MONSESSION_DISABLED_PLUGINS``: comma-separated entry-point or
  distribution names to skip, before they are imported.
* ``MONSESSION_STRICT_PLUGINS``: a plugin that fails to load raises
  `PluginLoadError` instead of logging a warning.

Nothing here imports TensorFlow; hook classes given as lazy references stay
unimported until `HookClassEntry.load` is called.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import importlib.metadata
import logging
import os
import re
import sys
from collections.abc import Sequence
from typing import Any

import pluggy

from monsession import _builtin_plugin, _hookspecs
from monsession._hookspecs import PROJECT_NAME, DefaultHook, TrainingSettings

ENTRY_POINT_GROUP = PROJECT_NAME
CORE_PLUGIN_NAME = "core"
CORE_DISTRIBUTION = "monsession-core"

ENV_DISABLE_AUTOLOAD = "MONSESSION_DISABLE_PLUGIN_AUTOLOAD"
ENV_DISABLED_PLUGINS = "MONSESSION_DISABLED_PLUGINS"
ENV_STRICT = "MONSESSION_STRICT_PLUGINS"

# The hook classes and `MonitoredTrainingSession` arguments of the families
# this project ships, so a missing one gets an install hint.
KNOWN_HOOK_FAMILIES: dict[str, str] = {
    "CheckpointSaverHook": "monsession-hooks-checkpoint",
    "CheckpointSaverListener": "monsession-hooks-checkpoint",
    "SummarySaverHook": "monsession-hooks-summary",
    "StepCounterHook": "monsession-hooks-summary",
    "SummaryWriterCache": "monsession-hooks-summary",
    "LoggingTensorHook": "monsession-hooks-logging",
    "ProgressBarHook": "monsession-hooks-logging",
    "NanTensorHook": "monsession-hooks-debug",
    "NanLossDuringTrainingError": "monsession-hooks-debug",
    "ProfilerHook": "monsession-hooks-debug",
    "HookTimingHook": "monsession-hooks-debug",
}
KNOWN_ARGUMENT_FAMILIES: dict[str, str] = {
    "save_checkpoint_secs": "monsession-hooks-checkpoint",
    "save_checkpoint_steps": "monsession-hooks-checkpoint",
    "save_summaries_steps": "monsession-hooks-summary",
    "save_summaries_secs": "monsession-hooks-summary",
    "log_step_count_steps": "monsession-hooks-summary",
}

logger = logging.getLogger(PROJECT_NAME)

_LAZY_REF = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")


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
            f"{type(self.error).__name__}: {self.error}; "
            f"set {ENV_DISABLED_PLUGINS}={self.source.name} to skip it."
        )


@dataclasses.dataclass(frozen=True)
class PluginInfo:
    """A registered plugin, for listings."""

    source: PluginSource
    hook_classes: tuple[str, ...]
    training_arguments: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class PluginListing:
    """Everything `monsession plugins` shows.

    Args:
      plugins: The registered plugins, core first, then by name.
      failures: Plugins that failed to load and were skipped.
      blocked: Plugins skipped because of `MONSESSION_DISABLED_PLUGINS`.
      autoload: False when `MONSESSION_DISABLE_PLUGIN_AUTOLOAD` is set.
    """

    plugins: tuple[PluginInfo, ...]
    failures: tuple[PluginFailure, ...]
    blocked: tuple[PluginSource, ...]
    autoload: bool


@dataclasses.dataclass(frozen=True)
class HookClassEntry:
    """A hook class that a plugin provides, reachable from `monsession.hooks`.

    Args:
      name: The class name users import.
      ref: The class, or a lazy reference ``"package.module:QualName"``.
      plugin: The name of the plugin that provides it.
      distribution: The distribution that ships the plugin, if known.
      version: That distribution's version, if known.
    """

    name: str
    ref: type | str
    plugin: str
    distribution: str | None = None
    version: str | None = None

    def load(self) -> type:
        """Returns the class, importing its module if `ref` is lazy.

        Raises:
          ImportError: If the module cannot be imported or lacks the class.
          TypeError: If the reference does not name a class.
        """
        if isinstance(self.ref, type):
            return self.ref
        module_name, _, qualname = self.ref.partition(":")
        obj: Any = importlib.import_module(module_name)
        for part in qualname.split("."):
            try:
                obj = getattr(obj, part)
            except AttributeError as error:
                source = PluginSource(self.plugin, None, self.distribution, self.version)
                raise ImportError(
                    f"Hook class reference {self.ref!r} of plugin {source.describe()} does "
                    f"not resolve: {error}; upgrade or reinstall the plugin's distribution.",
                    name=self.name,
                ) from error
        if not isinstance(obj, type):
            raise TypeError(
                f"Hook class reference {self.ref!r} of plugin '{self.plugin}' names "
                f"{obj!r}, not a class; the plugin must return a class or a "
                "'package.module:ClassName' string."
            )
        return obj


@dataclasses.dataclass
class _Discovery:
    """The cached result of building the manager."""

    manager: pluggy.PluginManager
    sources: dict[str, PluginSource]
    failures: list[PluginFailure]
    blocked: list[PluginSource]
    autoload: bool
    warned: set[str] = dataclasses.field(default_factory=set)

    def warn_once(self, message: str) -> None:
        if message not in self.warned:
            self.warned.add(message)
            logger.warning(message)


def env_flag(name: str) -> bool:
    """Returns whether environment variable `name` is set to a true value.

    Any non-empty value other than ``0`` or ``false`` (any case) is true.
    """
    value = os.environ.get(name, "").strip().lower()
    return value not in ("", "0", "false")


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def core_version() -> str | None:
    """Returns the installed version of `monsession-core`, or `None`."""
    try:
        return importlib.metadata.version(CORE_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return None


def _entry_point_source(entry_point: importlib.metadata.EntryPoint) -> PluginSource:
    dist = entry_point.dist
    return PluginSource(
        name=entry_point.name,
        entry_point=entry_point.value,
        distribution=dist.name if dist is not None else None,
        version=dist.version if dist is not None else None,
    )


@functools.cache
def _discovery() -> _Discovery:
    manager = pluggy.PluginManager(PROJECT_NAME)
    manager.add_hookspecs(_hookspecs)
    manager.register(_builtin_plugin, name=CORE_PLUGIN_NAME)
    core = PluginSource(CORE_PLUGIN_NAME, None, CORE_DISTRIBUTION, core_version())
    discovery = _Discovery(
        manager=manager,
        sources={CORE_PLUGIN_NAME: core},
        failures=[],
        blocked=[],
        autoload=not env_flag(ENV_DISABLE_AUTOLOAD),
    )
    if discovery.autoload:
        _load_entry_points(discovery)
    return discovery


def _load_entry_points(discovery: _Discovery) -> None:
    disabled = {
        _normalize(name.strip())
        for name in os.environ.get(ENV_DISABLED_PLUGINS, "").split(",")
        if name.strip()
    }
    strict = env_flag(ENV_STRICT)
    # Core registers itself directly; installs of older monsession-core
    # metadata may still declare this entry point.
    seen = {(CORE_PLUGIN_NAME, _builtin_plugin.__name__)}
    for entry_point in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        key = (entry_point.name, entry_point.value)
        if key in seen:
            continue
        seen.add(key)
        source = _entry_point_source(entry_point)
        if disabled & {_normalize(source.name), _normalize(source.distribution or "")}:
            discovery.blocked.append(source)
            continue
        registered = False
        try:
            discovery.manager.register(entry_point.load(), name=source.name)
            registered = True
            # Ask the registration hooks now so a broken answer is reported
            # like any other load failure, naming the plugin.
            _hook_class_refs(discovery.manager, only=source.name)
            _training_arguments(discovery.manager, only=source.name)
            discovery.sources[source.name] = source
        except Exception as error:
            if registered:
                discovery.manager.unregister(name=source.name)
            failure = PluginFailure(source, error)
            if strict:
                raise PluginLoadError(failure.message, name=source.name) from error
            discovery.failures.append(failure)
            logger.warning(failure.message)


def get_plugin_manager() -> pluggy.PluginManager:
    """Returns the process-wide plugin manager, building it on first use.

    Returns:
      A `pluggy.PluginManager` with core's plugin and every installed plugin
      of the ``monsession`` entry-point group that loaded.

    Raises:
      PluginLoadError: If a plugin fails to load and `MONSESSION_STRICT_PLUGINS`
        is set.
    """
    return _discovery().manager


def reset_plugin_manager() -> None:
    """Forgets the plugin manager, and the classes `monsession.hooks` resolved.

    The next call rebuilds it, reading the environment variables again. For
    tests.
    """
    _discovery.cache_clear()
    hooks = sys.modules.get("monsession.hooks")
    if hooks is not None:
        hooks._forget_resolved()


def _plugin_order(name: str) -> tuple[bool, str]:
    return (name != CORE_PLUGIN_NAME, name)


def _answers(
    manager: pluggy.PluginManager, hook_name: str, only: str | None = None, **kwargs: Any
) -> list[tuple[str, list[Any]]]:
    """Calls each plugin's implementation of a hook on its own.

    Returns:
      ``(plugin name, items)`` pairs, core first, then by plugin name.

    Raises:
      TypeError: If a plugin returns something other than a list or `None`.
    """
    answers = []
    for impl in getattr(manager.hook, hook_name).get_hookimpls():
        if impl.wrapper or impl.hookwrapper or (only is not None and impl.plugin_name != only):
            continue
        result = impl.function(*(kwargs[arg] for arg in impl.argnames))
        if result is None:
            result = []
        if isinstance(result, (str, bytes)) or not isinstance(result, Sequence):
            raise TypeError(
                f"Plugin '{impl.plugin_name}' returned {result!r} from {hook_name}; "
                "expected a list or None."
            )
        answers.append((impl.plugin_name, list(result)))
    answers.sort(key=lambda answer: _plugin_order(answer[0]))
    return answers


def _hook_class_refs(
    manager: pluggy.PluginManager, only: str | None = None
) -> list[tuple[str, str, type | str]]:
    """Returns ``(plugin, class name, ref)`` for every hook class provided."""
    refs: list[tuple[str, str, type | str]] = []
    for plugin, items in _answers(manager, "monsession_hook_classes", only):
        for ref in items:
            if isinstance(ref, type):
                refs.append((plugin, ref.__name__, ref))
            elif isinstance(ref, str) and _LAZY_REF.match(ref):
                refs.append((plugin, ref.partition(":")[2].rpartition(".")[2], ref))
            else:
                raise TypeError(
                    f"Plugin '{plugin}' returned {ref!r} from monsession_hook_classes; "
                    "expected a class or a 'package.module:ClassName' string."
                )
    return refs


def _training_arguments(
    manager: pluggy.PluginManager, only: str | None = None
) -> list[tuple[str, str]]:
    """Returns ``(plugin, argument name)`` for every argument served."""
    arguments = []
    for plugin, items in _answers(manager, "monsession_training_arguments", only):
        for argument in items:
            if not (isinstance(argument, str) and argument.isidentifier()):
                raise TypeError(
                    f"Plugin '{plugin}' returned {argument!r} from "
                    "monsession_training_arguments; expected argument names of "
                    "MonitoredTrainingSession such as 'save_checkpoint_steps'."
                )
            arguments.append((plugin, argument))
    return arguments


def hook_class_entries() -> dict[str, HookClassEntry]:
    """Returns every hook class the registered plugins provide, by name.

    When two plugins provide the same name, core's wins, then the plugin whose
    name sorts first; a warning names both.

    Returns:
      A dict from class name to `HookClassEntry`.

    Raises:
      TypeError: If a plugin returns something that is not a hook class.
    """
    discovery = _discovery()
    entries: dict[str, HookClassEntry] = {}
    for plugin, name, ref in _hook_class_refs(discovery.manager):
        source = discovery.sources.get(plugin, PluginSource(plugin))
        kept = entries.get(name)
        if kept is None:
            entries[name] = HookClassEntry(name, ref, plugin, source.distribution, source.version)
        elif kept.ref != ref:
            discovery.warn_once(
                f"Hook class '{name}' of plugin {source.describe()} is ignored: plugin "
                f"'{kept.plugin}' already provides it. Set {ENV_DISABLED_PLUGINS}={plugin} "
                "to silence this warning."
            )
    return entries


def training_argument_owners() -> dict[str, str]:
    """Returns which plugin serves each `MonitoredTrainingSession` argument.

    Returns:
      A dict from argument name to plugin name; on a collision core's plugin
      wins, then the plugin whose name sorts first.
    """
    discovery = _discovery()
    owners: dict[str, str] = {}
    for plugin, argument in _training_arguments(discovery.manager):
        owner = owners.setdefault(argument, plugin)
        if owner != plugin:
            discovery.warn_once(
                f"Argument '{argument}' is served by plugins '{owner}' and '{plugin}'; "
                f"'{owner}' is used."
            )
    return owners


def default_hooks(settings: TrainingSettings) -> list[Any]:
    """Returns the default hooks of a `MonitoredTrainingSession` call.

    Args:
      settings: The resolved `TrainingSettings` of the call.

    Returns:
      The `SessionRunHook`s every plugin contributed, sorted stably by their
      `DefaultHook.order`, then by plugin name.

    Raises:
      TypeError: If a plugin returns something other than `DefaultHook`s.
    """
    ordered = []
    answers = _answers(get_plugin_manager(), "monsession_default_hooks", settings=settings)
    for plugin, items in answers:
        for item in items:
            if not (isinstance(item, DefaultHook) and isinstance(item.order, int)):
                raise TypeError(
                    f"Plugin '{plugin}' returned {item!r} from monsession_default_hooks; "
                    "expected DefaultHook(hook, order) items with an int order, e.g. "
                    "[DefaultHook(MyHook(), ORDER_OTHER)]."
                )
            ordered.append((item.order, plugin, item.hook))
    ordered.sort(key=lambda entry: entry[:2])
    return [hook for _, _, hook in ordered]


def plugin_infos() -> PluginListing:
    """Returns the registered plugins, the failed ones and the blocked ones.

    Lazy hook class references are listed by name, never imported.
    """
    discovery = _discovery()
    classes: dict[str, list[str]] = {}
    for plugin, name, _ in _hook_class_refs(discovery.manager):
        classes.setdefault(plugin, []).append(name)
    arguments: dict[str, list[str]] = {}
    for plugin, argument in _training_arguments(discovery.manager):
        arguments.setdefault(plugin, []).append(argument)
    names = sorted(
        (name for name, plugin in discovery.manager.list_name_plugin() if plugin is not None),
        key=_plugin_order,
    )
    plugins = tuple(
        PluginInfo(
            discovery.sources.get(name, PluginSource(name)),
            tuple(sorted(classes.get(name, ()))),
            tuple(sorted(arguments.get(name, ()))),
        )
        for name in names
    )
    return PluginListing(
        plugins, tuple(discovery.failures), tuple(discovery.blocked), discovery.autoload
    )


def missing_family_message(what: str, distribution: str) -> str:
    """Returns why `distribution`, which provides `what`, is unavailable, and the fix.

    Args:
      what: What the user asked for, e.g. ``"SummarySaverHook"``.
      distribution: The distribution that provides it.
    """
    discovery = _discovery()
    wanted = _normalize(distribution)
    for failure in discovery.failures:
        if _normalize(failure.source.distribution or "") == wanted:
            return f"{what} is provided by the distribution '{distribution}', but " + (
                failure.message[0].lower() + failure.message[1:]
            )
    for source in discovery.blocked:
        if _normalize(source.distribution or "") == wanted:
            return (
                f"{what} is provided by the distribution '{distribution}', whose plugin "
                f"'{source.name}' is blocked by {ENV_DISABLED_PLUGINS}; remove it from "
                "that variable to use it."
            )
    try:
        importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError:
        return (
            f"{what} is provided by the distribution '{distribution}', which is not "
            f"installed. Install it with: pip install {distribution}"
        )
    if not discovery.autoload:
        return (
            f"{what} is provided by the distribution '{distribution}', which is installed "
            f"but not loaded because {ENV_DISABLE_AUTOLOAD} is set; unset it, or "
            f"register the plugin with get_plugin_manager().register(...)."
        )
    return (
        f"{what} is provided by the distribution '{distribution}', which is installed "
        f"but does not provide it; upgrade it with: pip install --upgrade {distribution}"
    )


def resolve_hook_class(name: str) -> type:
    """Returns the hook class called `name`, whichever plugin provides it.

    Args:
      name: A hook class name, e.g. ``"SummarySaverHook"``.

    Returns:
      The class, imported if its plugin gave a lazy reference.

    Raises:
      ImportError: If a known family provides `name` but is not installed or
        not loaded; the message says what to install or change.
      UnknownHookError: (an `AttributeError`) If no plugin provides `name`;
        the message lists the available names.
    """
    entries = hook_class_entries()
    entry = entries.get(name)
    if entry is not None:
        return entry.load()
    distribution = KNOWN_HOOK_FAMILIES.get(name)
    if distribution is not None:
        raise ImportError(missing_family_message(name, distribution), name=name)
    available = ", ".join(sorted(entries)) or "none"
    raise UnknownHookError(
        f"No installed hook family provides a hook class named '{name}'. Available: "
        f"{available}. Run 'monsession plugins' to see the installed families.",
        name=name,
    )
