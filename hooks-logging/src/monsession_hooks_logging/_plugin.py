"""The monsession plugin of monsession-hooks-logging.

It registers `LoggingTensorHook` and `ProgressBarHook` (as lazy references,
so listing plugins never imports TensorFlow) and contributes nothing to
`MonitoredTrainingSession`: TensorFlow's `MonitoredTrainingSession` adds no
logging hook of its own (its step-rate line comes from `StepCounterHook`,
which belongs to monsession-hooks-summary), so this family serves no training
argument and adds no default hook. Pass the hooks in `hooks=` instead.
"""

from __future__ import annotations

from monsession import hookimpl
from monsession_hooks_logging import _CLASSES


@hookimpl
def monsession_hook_classes() -> list[str]:
    """Returns lazy references to this family's hook classes."""
    return [f"{module}:{name}" for name, module in _CLASSES.items()]
