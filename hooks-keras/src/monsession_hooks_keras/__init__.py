"""monsession-hooks-keras: Keras 3 callbacks and monsession hooks, both ways.

`KerasCallbacksHook` runs Keras callbacks (TensorBoard, ModelCheckpoint,
EarlyStopping, ...) in a monsession training loop (eager mode);
`HooksCallback` runs monsession hooks (CheckpointSaverHook,
SummarySaverHook, ...) inside `model.fit`. Users reach the hook as
``monsession.hooks.KerasCallbacksHook``. Importing this package imports
neither TensorFlow nor Keras.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from monsession.plugins import lazy_attributes

__version__ = "1.0.0"

# Hook classes, registered with monsession.hooks.
_HOOK_CLASSES = {
    "KerasCallbacksHook": "monsession_hooks_keras._callbacks_hook",
}
_CLASSES = {
    **_HOOK_CLASSES,
    "HooksCallback": "monsession_hooks_keras._hooks_callback",
    "fit_global_step": "monsession_hooks_keras._global_step",
}

if TYPE_CHECKING:
    from monsession_hooks_keras._callbacks_hook import KerasCallbacksHook
    from monsession_hooks_keras._global_step import fit_global_step
    from monsession_hooks_keras._hooks_callback import HooksCallback


__getattr__, __dir__ = lazy_attributes(__name__, _CLASSES)

__all__ = ["HooksCallback", "KerasCallbacksHook", "fit_global_step"]
