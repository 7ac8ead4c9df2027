"""The plugin manager: discovers hook families and answers questions about them.

Core registers its own plugin (`monsession._plugins._builtin_plugin`) directly, then
loads the entry points of the ``monsession`` group, in reverse name order so
that pluggy calls plugins by name (tryfirst/trylast and wrappers still
apply: pluggy does every call). Environment variables, read when the
manager is built:

* ``MONSESSION_DISABLE_PLUGIN_AUTOLOAD``: load no entry point at all.
* ``MONSESSION_DISABLED_PLUGINS``: comma-separated entry-point or
  distribution names to skip, before they are imported.
* ``MONSESSION_STRICT_PLUGINS``: a plugin that fails is fatal.

A plugin that loads but implements a hookspec this core does not declare
(built for a newer core, `_newer_core`) is named with both versions at
WARNING, or raises `PluginLoadError` in strict mode; it stays loaded, and
its known hookimpls are called.

One policy for a failing plugin, at load time and at call time: it is
reported with its name, distribution and version, and left out; in strict
mode the report is raised instead (`PluginLoadError` when loading,
`PluginCallError` when called). A call-time failure is an exception raised
by the plugin's implementation or an answer of the wrong type.

Nothing here imports TensorFlow.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.metadata
import logging
import os
import re
from collections.abc import Callable, Sequence
from typing import Any

import pluggy

from monsession._durability._directory_lock import DirectoryLockedError
from monsession._plugins import _builtin_plugin, _hookspecs, _newer_core
from monsession._plugins._hookspecs import PROJECT_NAME, DefaultHook, TrainingSettings
from monsession._plugins._plugin_types import (
    ENV_DISABLE_AUTOLOAD,
    ENV_DISABLED_PLUGINS,
    ENV_STRICT,
    HookClassEntry,
    PluginCallError,
    PluginCallFailure,
    PluginFailure,
    PluginForNewerCore,
    PluginInfo,
    PluginListing,
    PluginLoadError,
    PluginSource,
    UnknownHookError,
)

ENTRY_POINT_GROUP = PROJECT_NAME
CORE_PLUGIN_NAME = "core"
CORE_DISTRIBUTION = "monsession-core"

# The hook classes and `MonitoredTrainingSession` arguments of the families
# this project ships, so a missing one gets an install hint. The `all` tox
# env checks them against the families' registrations
# (examples/tests/test_known_families.py).
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
    "KerasCallbacksHook": "monsession-hooks-keras",
}
"""{class name: distribution} of this project's families' classes (for install hints)."""
KNOWN_ARGUMENT_FAMILIES: dict[str, str] = {
    "save_checkpoint_secs": "monsession-hooks-checkpoint",
    "save_checkpoint_steps": "monsession-hooks-checkpoint",
    "save_summaries_steps": "monsession-hooks-summary",
    "save_summaries_secs": "monsession-hooks-summary",
    "log_step_count_steps": "monsession-hooks-summary",
}
"""{`MonitoredTrainingSession` argument: distribution} of this project's families."""

# This repository's distributions: their folder in a checkout is the name
# without "monsession-" (install hints give that form too).
_OWN_DISTRIBUTIONS = frozenset(
    {CORE_DISTRIBUTION, *KNOWN_HOOK_FAMILIES.values(), *KNOWN_ARGUMENT_FAMILIES.values()}
)

__all__ = [  # Re-exported types, for callers of this module.
    "ENV_DISABLED_PLUGINS",
    "ENV_DISABLE_AUTOLOAD",
    "ENV_STRICT",
    "HookClassEntry",
    "PluginCallError",
    "PluginCallFailure",
    "PluginFailure",
    "PluginForNewerCore",
    "PluginInfo",
    "PluginListing",
    "PluginLoadError",
    "PluginSource",
    "UnknownHookError",
]

logger = logging.getLogger(PROJECT_NAME)

_LAZY_REF = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")


@dataclasses.dataclass
class _Discovery:
    """The cached result of building the manager."""

    manager: pluggy.PluginManager
    sources: dict[str, PluginSource]
    failures: list[PluginFailure]
    blocked: list[PluginSource]
    newer_core: list[PluginForNewerCore]
    autoload: bool
    strict: bool
    warned: set[str] = dataclasses.field(default_factory=set)

    def warn_once(self, message: str, key: str | None = None) -> None:
        key = message if key is None else key
        if key not in self.warned:
            self.warned.add(key)
            logger.warning(message)

    def source(self, plugin: str) -> PluginSource:
        return self.sources.get(plugin, PluginSource(plugin))


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
        newer_core=[],
        autoload=not env_flag(ENV_DISABLE_AUTOLOAD),
        strict=env_flag(ENV_STRICT),
    )
    if discovery.autoload:
        _load_entry_points(discovery)
    return discovery


def _entry_points() -> list[importlib.metadata.EntryPoint]:
    """The group's entry points, each once, last name first (pluggy calls LIFO)."""
    # Core registers itself directly; installs of older monsession-core
    # metadata may still declare this entry point.
    seen = {(CORE_PLUGIN_NAME, _builtin_plugin.__name__)}
    unique = []
    for entry_point in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        key = (entry_point.name, entry_point.value)
        if key not in seen:
            seen.add(key)
            unique.append(entry_point)
    return sorted(unique, key=lambda entry_point: entry_point.name, reverse=True)


def _load_entry_points(discovery: _Discovery) -> None:
    disabled = {
        _normalize(name.strip())
        for name in os.environ.get(ENV_DISABLED_PLUGINS, "").split(",")
        if name.strip()
    }
    for entry_point in _entry_points():
        source = _entry_point_source(entry_point)
        if disabled & {_normalize(source.name), _normalize(source.distribution or "")}:
            discovery.blocked.append(source)
            continue
        registered = False
        try:
            plugin = entry_point.load()
            discovery.manager.register(plugin, name=source.name)
            registered = True
            # Ask the registration hooks now so a broken answer is reported
            # like any other load failure, naming the plugin.
            _hook_class_refs(_call_one(discovery.manager, "monsession_hook_classes", source.name))
            _other_class_refs(_call_one(discovery.manager, "monsession_other_classes", source.name))
            _argument_names(
                _call_one(discovery.manager, "monsession_training_arguments", source.name)
            )
            discovery.sources[source.name] = source
        except Exception as error:
            if registered:
                discovery.manager.unregister(name=source.name)
            failure = PluginFailure(source, error)
            if discovery.strict:
                raise PluginLoadError(failure.message, name=source.name) from error
            discovery.failures.append(failure)
            logger.warning(failure.message)
            continue
        _check_hookspecs(discovery, plugin, source, entry_point.dist)


def _check_hookspecs(
    discovery: _Discovery,
    plugin: object,
    source: PluginSource,
    dist: importlib.metadata.Distribution | None,
) -> None:
    """Names a loaded plugin built for a newer core: WARNING, or `PluginLoadError` if strict."""
    unknown = _newer_core.unknown_hookspecs(discovery.manager, plugin)
    if not unknown:
        return
    newer = PluginForNewerCore(source, unknown, core_version(), _newer_core.core_requirement(dist))
    if discovery.strict:
        raise PluginLoadError(newer.message, name=source.name)
    discovery.newer_core.append(newer)
    logger.warning(newer.message)


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


_ON_RESET: list[Callable[[], None]] = []


def on_reset(callback: Callable[[], None]) -> None:
    """Calls `callback()` at each `reset_plugin_manager()` (`monsession.hooks` forgets classes)."""
    _ON_RESET.append(callback)


def reset_plugin_manager() -> None:
    """Forgets the plugin manager, and the classes `monsession.hooks` resolved.

    The next call rebuilds it, reading the environment variables again. For
    tests.
    """
    _discovery.cache_clear()
    for callback in _ON_RESET:
        callback()


def warn_once(message: str, key: str | None = None) -> None:
    """Logs `message` at WARNING on the ``monsession`` logger, once per process.

    Once per plugin manager, in fact: `reset_plugin_manager` (tests) forgets
    what was said.

    Args:
      message: The warning.
      key: What makes two warnings the same one; `message` by default.
    """
    _discovery().warn_once(message, key)


# -- Calling plugins ----------------------------------------------------------


def _plugin_order(name: str) -> tuple[bool, str]:
    return (name != CORE_PLUGIN_NAME, name)


def _plugins(manager: pluggy.PluginManager) -> list[str]:
    """The registered plugin names, core first, then by name."""
    names = (name for name, plugin in manager.list_name_plugin() if plugin is not None)
    return sorted(names, key=_plugin_order)


def _call_one(manager: pluggy.PluginManager, hook_name: str, plugin: str, **kwargs: Any) -> list:
    """Calls one plugin's implementations of `hook_name` through pluggy; its items."""
    others = [
        registered
        for name, registered in manager.list_name_plugin()
        if name != plugin and registered is not None
    ]
    answers = manager.subset_hook_caller(hook_name, others)(**kwargs)
    return [item for answer in answers for item in _sequence(answer, hook_name)]


def _sequence(answer: Any, hook_name: str) -> Sequence[Any]:
    if isinstance(answer, (str, bytes)) or not isinstance(answer, Sequence):
        raise TypeError(f"Returned {answer!r} from {hook_name}; expected a list or None.")
    return answer


def _failed(discovery: _Discovery, plugin: str, hook_name: str, error: Exception) -> None:
    """Applies the failure policy: raise in strict mode, else warn (once) and go on."""
    failure = PluginCallFailure(discovery.source(plugin), hook_name, error)
    if discovery.strict:
        raise PluginCallError(failure.message) from error
    discovery.warn_once(failure.message)


def _answers_by_plugin(
    discovery: _Discovery, hook_name: str, check: Callable[[list[Any]], list[Any]]
) -> list[tuple[str, list[Any]]]:
    """Each plugin's checked items for a registration hook, core first, then by name.

    A plugin that raises, or whose items `check` rejects, is left out (see
    `_failed`).
    """
    answers = []
    for plugin in _plugins(discovery.manager):
        try:
            answers.append((plugin, check(_call_one(discovery.manager, hook_name, plugin))))
        except Exception as error:
            _failed(discovery, plugin, hook_name, error)
    return answers


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


def _call_all(discovery: _Discovery, hook_name: str, **kwargs: Any) -> list[Any]:
    """One pluggy call of `hook_name`; a plugin that raises is left out, then it is retried.

    `ValueError` and `TypeError` are the user's: a plugin raises them for a
    bad argument (e.g. ``save_checkpoint_steps=-1``), and they reach the
    user unchanged, naming the argument. So does `DirectoryLockedError`
    (another live session holds the checkpoint directory a family locks).
    """
    left_out: list[Any] = []
    while True:
        caller = (
            discovery.manager.subset_hook_caller(hook_name, left_out)
            if left_out
            else getattr(discovery.manager.hook, hook_name)
        )
        try:
            return list(caller(**kwargs))
        except (ValueError, TypeError, DirectoryLockedError):
            raise
        except Exception as error:
            plugin = _raising_plugin(discovery.manager, hook_name, error)
            if plugin is None:
                raise
            _failed(discovery, plugin, hook_name, error)
            left_out.append(discovery.manager.get_plugin(plugin))


def _hook_class_refs(
    items: list[Any], hook_name: str = "monsession_hook_classes"
) -> list[tuple[str, type | str]]:
    """`(class name, ref)` for each item a plugin returned from `hook_name`."""
    refs: list[tuple[str, type | str]] = []
    for ref in items:
        if isinstance(ref, type):
            refs.append((ref.__name__, ref))
        elif isinstance(ref, str) and _LAZY_REF.match(ref):
            refs.append((ref.partition(":")[2].rpartition(".")[2], ref))
        else:
            raise TypeError(
                f"Returned {ref!r} from {hook_name}; expected a class or a "
                "'package.module:ClassName' string."
            )
    return refs


def _other_class_refs(items: list[Any]) -> list[tuple[str, type | str]]:
    """`(class name, ref)` for each item a plugin returned from monsession_other_classes."""
    return _hook_class_refs(items, "monsession_other_classes")


def _class_refs(discovery: _Discovery) -> list[tuple[str, list[tuple[str, type | str]]]]:
    """Each plugin's hook classes, then each plugin's other classes."""
    return [
        *_answers_by_plugin(discovery, "monsession_hook_classes", _hook_class_refs),
        *_answers_by_plugin(discovery, "monsession_other_classes", _other_class_refs),
    ]


def _argument_names(items: list[Any]) -> list[str]:
    """Checks the items a plugin returned from monsession_training_arguments."""
    for argument in items:
        if not (isinstance(argument, str) and argument.isidentifier()):
            raise TypeError(
                f"Returned {argument!r} from monsession_training_arguments; expected "
                "argument names of MonitoredTrainingSession such as 'save_checkpoint_steps'."
            )
    return items


def hook_class_entries() -> dict[str, HookClassEntry]:
    """Returns every hook class the registered plugins provide, by name.

    When two plugins provide the same name, core's wins, then the plugin whose
    name sorts first; a warning names both.

    Returns:
      A dict from class name to `HookClassEntry`.
    """
    discovery = _discovery()
    entries: dict[str, HookClassEntry] = {}
    for plugin, refs in _class_refs(discovery):
        source = discovery.source(plugin)
        for name, ref in refs:
            kept = entries.get(name)
            if kept is None:
                entries[name] = HookClassEntry(
                    name, ref, plugin, source.distribution, source.version
                )
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
    answers = _answers_by_plugin(discovery, "monsession_training_arguments", _argument_names)
    for plugin, arguments in answers:
        for argument in arguments:
            owner = owners.setdefault(argument, plugin)
            if owner != plugin:
                discovery.warn_once(
                    f"Argument '{argument}' is served by plugins '{owner}' and '{plugin}'; "
                    f"'{owner}' is used."
                )
    return owners


def _default_hook_items(items: Sequence[Any]) -> list[DefaultHook]:
    """Checks the items a plugin returned from monsession_default_hooks."""
    for item in items:
        if not (
            isinstance(item, DefaultHook)
            and isinstance(item.order, int)
            and isinstance(item.arguments, tuple)
            and all(isinstance(argument, str) for argument in item.arguments)
        ):
            raise TypeError(
                f"Returned {item!r} from monsession_default_hooks; expected DefaultHook(hook, "
                "order, arguments) items with an int order and a tuple of argument names, "
                "e.g. [DefaultHook(MyHook(), ORDER_OTHER)]."
            )
    return list(items)


def default_hooks(settings: TrainingSettings) -> list[Any]:
    """Returns the default hooks of a `MonitoredTrainingSession` call.

    The hooks of `default_hook_items`, in their order.
    """
    return [item.hook for item in default_hook_items(settings)]


def default_hook_items(settings: TrainingSettings) -> list[DefaultHook]:
    """Returns the default hooks of a `MonitoredTrainingSession` call, as `DefaultHook`s.

    pluggy calls every plugin once (by plugin name unless tryfirst/trylast
    say otherwise; wrappers wrap the call). A `ValueError` or `TypeError`
    from a plugin is a bad argument of the user's and is raised as it is; a
    plugin that raises anything else, or answers with something other than
    `DefaultHook`s, is reported and left out, or raises `PluginCallError` in
    strict mode.

    Args:
      settings: The resolved `TrainingSettings` of the call.

    Returns:
      The `DefaultHook`s the plugins contributed, sorted stably by their
      `order`.
    """
    discovery = _discovery()
    hook_name = "monsession_default_hooks"
    items: list[DefaultHook] = []
    for answer in _call_all(discovery, hook_name, settings=settings):
        try:
            items.extend(_default_hook_items(_sequence(answer, hook_name)))
        except TypeError as error:
            plugin = _plugin_with_bad_default_hooks(discovery, settings)
            _failed(discovery, plugin, hook_name, error)
    items.sort(key=lambda item: item.order)
    return items


def _plugin_with_bad_default_hooks(discovery: _Discovery, settings: TrainingSettings) -> str:
    """Which plugin answered badly: each is asked alone (only when one did)."""
    for plugin in _plugins(discovery.manager):
        try:
            _default_hook_items(
                _call_one(discovery.manager, "monsession_default_hooks", plugin, settings=settings)
            )
        except Exception:
            return plugin
    return "unknown"


def plugin_infos() -> PluginListing:
    """Returns the registered plugins, the failed ones and the blocked ones.

    Lazy hook class references are listed by name, never imported.
    """
    discovery = _discovery()
    classes = dict(_answers_by_plugin(discovery, "monsession_hook_classes", _hook_class_refs))
    others = dict(_answers_by_plugin(discovery, "monsession_other_classes", _other_class_refs))
    arguments = dict(
        _answers_by_plugin(discovery, "monsession_training_arguments", _argument_names)
    )
    plugins = tuple(
        PluginInfo(
            discovery.source(name),
            tuple(sorted(class_name for class_name, _ in classes.get(name, ()))),
            tuple(sorted(arguments.get(name, ()))),
            tuple(sorted(class_name for class_name, _ in others.get(name, ()))),
        )
        for name in _plugins(discovery.manager)
    )
    return PluginListing(
        plugins,
        tuple(discovery.failures),
        tuple(discovery.blocked),
        discovery.autoload,
        tuple(discovery.newer_core),
    )


def install_commands(distribution: str, upgrade: bool = False) -> str:
    """Returns how to install `distribution`: from the package index, and from a checkout.

    The checkout form is given for this repository's own distributions (their
    folder is the name without ``monsession-``, e.g. ``./hooks-summary``).

    Args:
      distribution: A distribution name, e.g. ``"monsession-hooks-summary"``.
      upgrade: Whether the distribution is installed and must be upgraded.

    Returns:
      E.g. ``"pip install monsession-hooks-summary (or, from a checkout of the
      monsession repository: pip install ./hooks-summary)"``.
    """
    index = f"pip install --upgrade {distribution}" if upgrade else f"pip install {distribution}"
    if distribution not in _OWN_DISTRIBUTIONS:
        return index
    checkout = "an up-to-date checkout" if upgrade else "a checkout"
    folder = distribution.removeprefix("monsession-")
    return f"{index} (or, from {checkout} of the monsession repository: pip install ./{folder})"


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
            f"installed. Install it with: {install_commands(distribution)}"
        )
    if not discovery.autoload:
        return (
            f"{what} is provided by the distribution '{distribution}', which is installed "
            f"but not loaded because {ENV_DISABLE_AUTOLOAD} is set; unset it, or "
            f"register the plugin with get_plugin_manager().register(...)."
        )
    return (
        f"{what} is provided by the distribution '{distribution}', which is installed "
        "but does not provide it; upgrade it with: " + install_commands(distribution, upgrade=True)
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
