"""Calling the registered plugins, with one policy for a plugin that fails.

A call-time failure is an exception raised by a plugin's implementation or
an answer of the wrong type. The plugin is reported with its name,
distribution and version (WARNING, once) and left out; in strict mode
`PluginCallError` is raised instead. The same policy applies at load time
(`_plugin_manager`). Nothing here imports TensorFlow.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

import pluggy

from monsession._durability._directory_lock import DirectoryLockedError
from monsession._plugins import _answers
from monsession._plugins._plugin_manager import CORE_PLUGIN_NAME, Discovery
from monsession._plugins._plugin_types import Plugin, PluginCallError, PluginCallFailure

T = TypeVar("T")


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
    found: Discovery, hook_name: str, check: Callable[[Sequence[_answers.Answer]], list[T]]
) -> list[tuple[str, list[T]]]:
    """Each plugin's checked items for a registration hook, core first, then by name.

    A plugin that raises, or whose items `check` rejects, is left out (see
    `report`).
    """
    answers = []
    for plugin in plugin_names(found.manager):
        try:
            answers.append((plugin, check(_answers.ask_one(found.manager, hook_name, plugin))))
        except Exception as error:
            report(found, plugin, hook_name, error)
    return answers


def call_all(found: Discovery, hook_name: str, **kwargs: object) -> list[_answers.Answer]:
    """One pluggy call of `hook_name`; a plugin that raises is left out, then it is retried.

    `ValueError` and `TypeError` are the user's: a plugin raises them for a
    bad argument (e.g. ``save_checkpoint_steps=-1``), and they reach the
    user unchanged, naming the argument. So does `DirectoryLockedError`
    (another live session holds the checkpoint directory a family locks).
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
