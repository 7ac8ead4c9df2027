"""What the registered plugins provide, and what to tell a user who lacks a family.

`hook_class_entries` collects the plugins' classes by name (those of `monsession.hooks`),
`resolve_hook_class` imports one, `plugin_infos` lists the plugins without loading a lazy
reference, `default_hook_items` gathers what `MonitoredTrainingSession` adds.
`KNOWN_HOOK_FAMILIES` and `KNOWN_ARGUMENTS` (checked against the families by the `all` tox env)
give install hints. Nothing here imports TensorFlow until a lazy reference is loaded.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import importlib.metadata
from collections.abc import Callable
from typing import Any, Literal

from monsession._plugins._hookspecs import (
    Answer,
    DefaultHook,
    TrainingSettings,
    argument_names,
    as_sequence,
    ask_one,
    checked_default_hooks,
    class_refs,
    other_class_refs,
)
from monsession._plugins._plugin_manager import (
    CORE_DISTRIBUTION,
    Discovery,
    answers_by_plugin,
    call_all,
    discovery,
    plugin_names,
    report,
)
from monsession._plugins._plugin_types import (
    ENV_DISABLE_AUTOLOAD,
    ENV_DISABLED_PLUGINS,
    PluginInfo,
    PluginListing,
    PluginSource,
    UnknownHookError,
    normalize,
)

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
    "MlflowHook": "monsession-hooks-mlflow",
}
"""{class name: distribution} of this project's families' classes (for install hints)."""

NOT_HOOKS: dict[str, str] = {
    "HooksCallback": (
        "a Keras callback (it runs monsession hooks inside model.fit), not a hook: "
        "`from monsession_hooks_keras import HooksCallback` (pip install monsession-hooks-keras)"
    ),
}
"""{name: where it lives} of this project's classes that `monsession.hooks` does not hold."""


@dataclasses.dataclass(frozen=True)
class KnownArgument:
    """A `MonitoredTrainingSession` argument that one of this project's families serves.

    Args:
      distribution: The family that serves it.
      directory: The `TrainingSettings` directory its default hook writes into.
      saves: What that hook saves, for messages (e.g. ``"checkpoints"``).
    """

    distribution: str
    directory: Literal["checkpoint_dir", "summary_dir"]
    saves: str

    def directory_in(self, settings: TrainingSettings) -> str | None:
        """The directory its default hook would write into under `settings`."""
        if self.directory == "checkpoint_dir":
            return settings.checkpoint_dir
        return settings.summary_dir


_CHECKPOINTS = KnownArgument("monsession-hooks-checkpoint", "checkpoint_dir", "checkpoints")
_SUMMARIES = KnownArgument("monsession-hooks-summary", "summary_dir", "summaries")
KNOWN_ARGUMENTS: dict[str, KnownArgument] = {
    "save_checkpoint_secs": _CHECKPOINTS,
    "save_checkpoint_steps": _CHECKPOINTS,
    "save_summaries_steps": _SUMMARIES,
    "save_summaries_secs": _SUMMARIES,
    "log_step_count_steps": KnownArgument(
        "monsession-hooks-summary", "summary_dir", "the step rate"
    ),
}
"""{`MonitoredTrainingSession` argument: who serves it and where it writes}."""

KNOWN_ARGUMENT_FAMILIES: dict[str, str] = {
    argument: known.distribution for argument, known in KNOWN_ARGUMENTS.items()
}
"""{`MonitoredTrainingSession` argument: distribution} of this project's families."""

# This repository's distributions: `new-package` refuses their names.
OWN_DISTRIBUTIONS = frozenset(
    {CORE_DISTRIBUTION, *KNOWN_HOOK_FAMILIES.values(), *KNOWN_ARGUMENT_FAMILIES.values()}
)


def install_commands(distribution: str, upgrade: bool = False) -> str:
    """How to install `distribution` (``upgrade``: a newer one): from the index, and for
    this repository's own, from a checkout (``pip install ./hooks-summary``)."""
    index = f"pip install --upgrade {distribution}" if upgrade else f"pip install {distribution}"
    if distribution not in OWN_DISTRIBUTIONS:
        return index
    checkout = "an up-to-date checkout" if upgrade else "a checkout"
    folder = distribution.removeprefix("monsession-")
    return f"{index} (or, from {checkout} of the monsession repository: pip install ./{folder})"


def missing_family_message(what: str, distribution: str) -> str:
    """Why `distribution`, which provides `what` (e.g. ``"SummarySaverHook"``), is
    unavailable, and the fix."""
    found = discovery()
    wanted = normalize(distribution)
    provided = f"{what} is provided by the distribution '{distribution}'"
    for failure in found.failures:
        if normalize(failure.source.distribution or "") == wanted:
            return f"{provided}, but {failure.message[0].lower()}{failure.message[1:]}"
    for source in found.blocked:
        if normalize(source.distribution or "") == wanted:
            return (
                f"{provided}, whose plugin '{source.name}' is blocked by "
                f"{ENV_DISABLED_PLUGINS}; remove it from that variable to use it."
            )
    try:
        importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError:
        return (
            f"{provided}, which is not installed. Install it with: {install_commands(distribution)}"
        )
    if not found.autoload:
        return (
            f"{provided}, which is installed but not loaded because {ENV_DISABLE_AUTOLOAD} "
            "is set; unset it, or register the plugin with get_plugin_manager().register(...)."
        )
    return (
        f"{provided}, which is installed but does not provide it; upgrade it with: "
        + install_commands(distribution, upgrade=True)
    )


# --- what the registered plugins provide ---


@dataclasses.dataclass(frozen=True)
class HookClassEntry:
    """A hook class that a plugin provides, reachable from `monsession.hooks`.

    `ref` is the class or a lazy reference ``"package.module:QualName"``;
    `distribution` and `version` are the plugin's, if known.
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
        module = importlib.import_module(module_name)
        try:
            obj: Answer = functools.reduce(getattr, qualname.split("."), module)
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


_ON_RESET: list[Callable[[], None]] = []


def on_reset(callback: Callable[[], None]) -> None:
    """Calls `callback()` at each `reset_plugin_manager()` (`monsession.hooks` forgets classes)."""
    _ON_RESET.append(callback)


def reset_plugin_manager() -> None:
    """Forgets the plugin manager, and the classes `monsession.hooks` resolved.

    The next call rebuilds it, reading the environment variables again (for tests).
    """
    discovery.cache_clear()
    for callback in _ON_RESET:
        callback()


def hook_class_entries() -> dict[str, HookClassEntry]:
    """Returns every hook class the registered plugins provide: {class name: `HookClassEntry`}.

    When two plugins provide the same name, core's wins, then the plugin whose
    name sorts first; a warning names both.
    """
    found = discovery()
    entries: dict[str, HookClassEntry] = {}
    answers = [
        *answers_by_plugin(found, "monsession_hook_classes", class_refs),
        *answers_by_plugin(found, "monsession_other_classes", other_class_refs),
    ]
    for plugin, refs in answers:
        source = found.source(plugin)
        for name, ref in refs:
            kept = entries.setdefault(
                name, HookClassEntry(name, ref, plugin, source.distribution, source.version)
            )
            if kept.ref != ref:
                found.warn_once(
                    f"Hook class '{name}' of plugin {source.describe()} is ignored: plugin "
                    f"'{kept.plugin}' already provides it. Set {ENV_DISABLED_PLUGINS}={plugin} "
                    "to silence this warning."
                )
    return entries


def resolve_hook_class(name: str) -> type:
    """Returns the hook class called `name` (e.g. ``"SummarySaverHook"``), imported if lazy.

    Raises:
      ImportError: If a known family providing `name` is not installed or not
        loaded, `name` is not a hook, or blocked plugins may provide it; the
        message says what to install, change or import instead.
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
    if name in NOT_HOOKS:
        raise ImportError(f"monsession.hooks has no {name}: it is {NOT_HOOKS[name]}.", name=name)
    available = ", ".join(sorted(entries)) or "none"
    blocked = discovery().blocked
    if blocked:
        # A blocked plugin is never imported, so which names it provides is unknown.
        plugins = ", ".join(source.describe() for source in blocked)
        raise ImportError(
            f"No loaded hook family provides a hook class named '{name}'; "
            f"{ENV_DISABLED_PLUGINS} blocks the plugin(s) {plugins}, which may provide it: "
            f"remove it from that variable to use it. Available: {available}.",
            name=name,
        )
    raise UnknownHookError(
        f"No installed hook family provides a hook class named '{name}'. Available: "
        f"{available}. Run 'monsession plugins' to see the installed families.",
        name=name,
    )


def plugin_infos() -> PluginListing:
    """Returns the registered plugins, the failed ones and the blocked ones.

    Lazy hook class references are listed by name, never imported.
    """
    found = discovery()
    classes = dict(answers_by_plugin(found, "monsession_hook_classes", class_refs))
    others = dict(answers_by_plugin(found, "monsession_other_classes", other_class_refs))
    arguments = dict(answers_by_plugin(found, "monsession_training_arguments", argument_names))
    plugins = tuple(
        PluginInfo(
            found.source(name),
            tuple(sorted(class_name for class_name, _ in classes.get(name, ()))),
            tuple(sorted(arguments.get(name, ()))),
            tuple(sorted(class_name for class_name, _ in others.get(name, ()))),
        )
        for name in plugin_names(found.manager)
    )
    return PluginListing(
        plugins,
        tuple(found.failures),
        tuple(found.blocked),
        found.autoload,
        tuple(found.newer_core),
        tuple(found.older_core),
    )


# --- what `MonitoredTrainingSession` gets: argument owners and default hooks ---


def training_argument_owners() -> dict[str, str]:
    """{`MonitoredTrainingSession` argument: plugin serving it}; core, then the first name wins."""
    found = discovery()
    owners: dict[str, str] = {}
    hook_name = "monsession_training_arguments"
    for plugin, arguments in answers_by_plugin(found, hook_name, argument_names):
        for argument in arguments:
            owner = owners.setdefault(argument, plugin)
            if owner != plugin:
                found.warn_once(
                    f"Argument '{argument}' is served by plugins '{owner}' and '{plugin}'; "
                    f"'{owner}' is used."
                )
    return owners


def default_hooks(settings: TrainingSettings) -> list[Any]:
    """Returns the default hooks of a `MonitoredTrainingSession` call.

    The hooks of `default_hook_items`, in their order.
    """
    return [item.hook for item in default_hook_items(settings)]


def default_hook_items(settings: TrainingSettings) -> list[DefaultHook]:
    """The `DefaultHook`s of a `MonitoredTrainingSession` call, sorted stably by `order`.

    A plugin that fails or answers badly is left out (see `call_all`).
    """
    found = discovery()
    hook_name = "monsession_default_hooks"
    items: list[DefaultHook] = []
    for answer in call_all(found, hook_name, settings=settings):
        try:
            items.extend(checked_default_hooks(as_sequence(answer, hook_name)))
        except TypeError as error:
            report(found, _badly_answering_plugin(found, settings), hook_name, error)
    items.sort(key=lambda item: item.order)
    return items


def _badly_answering_plugin(found: Discovery, settings: TrainingSettings) -> str:
    """Which plugin answered badly: each is asked alone (only when one did)."""
    for plugin in plugin_names(found.manager):
        try:
            checked_default_hooks(
                ask_one(found.manager, "monsession_default_hooks", plugin, settings=settings)
            )
        except Exception:
            return plugin
    return "unknown"
