"""The monsession plugin of monsession-hooks-keras.

It registers `KerasCallbacksHook` (as a lazy reference, so listing plugins
imports neither TensorFlow nor Keras) and contributes nothing to
`MonitoredTrainingSession`: Keras callbacks are passed in `hooks=` inside a
`KerasCallbacksHook`. `HooksCallback` is a Keras callback, not a hook, so it
is not registered.
"""

from __future__ import annotations

from monsession import hookimpl
from monsession_hooks_keras import _HOOK_CLASSES


@hookimpl
def monsession_hook_classes() -> list[str]:
    """Returns lazy references to this family's hook classes."""
    return [f"{module}:{name}" for name, module in _HOOK_CLASSES.items()]
