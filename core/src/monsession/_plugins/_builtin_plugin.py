"""Core's own plugin: the control hooks that ship with `monsession-core`.

The plugin manager registers this module directly under the name ``"core"``,
so turning off entry-point autoloading never removes these hooks.
"""

from __future__ import annotations

from monsession._plugins._hookspecs import hookimpl

_CONTROL_HOOKS = ("StopAtStepHook", "FeedFnHook", "FinalOpsHook", "GlobalStepWaiterHook")


@hookimpl
def monsession_hook_classes() -> list[str]:
    """Returns lazy references to core's control hooks."""
    return [f"monsession._api._control_hooks:{name}" for name in _CONTROL_HOOKS]
