"""Plugin registration for monsession-hooks-debug.

The family registers its classes for `monsession.hooks` and the plugin
listing. It adds no default hooks to `MonitoredTrainingSession` and serves
none of its arguments: debugging is something a user asks for. This module
does not import TensorFlow.
"""

from __future__ import annotations

import monsession
from monsession_hooks_debug import _CLASSES

_NOT_HOOKS = ("NanLossDuringTrainingError",)


@monsession.hookimpl
def monsession_hook_classes() -> list[str]:
    """Returns lazy references to the family's hook classes."""
    return [f"{module}:{name}" for name, module in _CLASSES.items() if name not in _NOT_HOOKS]


@monsession.hookimpl
def monsession_other_classes() -> list[str]:
    """Returns a lazy reference to `NanLossDuringTrainingError` (not a hook)."""
    return [f"{_CLASSES[name]}:{name}" for name in _NOT_HOOKS]
