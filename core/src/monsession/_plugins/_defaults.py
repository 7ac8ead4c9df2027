"""What `MonitoredTrainingSession` gets from the plugins: argument owners and default hooks.

Nothing here imports TensorFlow; the plugins' hooks may.
"""

from __future__ import annotations

from typing import Any

from monsession._plugins._hookspecs import (
    DefaultHook,
    TrainingSettings,
    argument_names,
    as_sequence,
    ask_one,
    checked_default_hooks,
)
from monsession._plugins._plugin_manager import (
    Discovery,
    answers_by_plugin,
    call_all,
    discovery,
    plugin_names,
    report,
)


def training_argument_owners() -> dict[str, str]:
    """Returns which plugin serves each `MonitoredTrainingSession` argument.

    Returns:
      A dict from argument name to plugin name; on a collision core's plugin
      wins, then the plugin whose name sorts first.
    """
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
