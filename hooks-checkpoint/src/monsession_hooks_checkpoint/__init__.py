"""monsession-hooks-checkpoint: checkpoint saving for graph and eager loops.

`import monsession_hooks_checkpoint` does not import TensorFlow: the hook
class is loaded on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from monsession.plugins import lazy_attributes
from monsession_hooks_checkpoint._listener import CheckpointSaverListener

__version__ = "1.0.0"

if TYPE_CHECKING:
    from monsession_hooks_checkpoint._checkpoint_saver import (
        CheckpointSaveError,
        CheckpointSaverHook,
    )


__getattr__, __dir__ = lazy_attributes(
    __name__,
    {
        "CheckpointSaverHook": "monsession_hooks_checkpoint._checkpoint_saver",
        "CheckpointSaveError": "monsession_hooks_checkpoint._checkpoint_saver",
    },
)

__all__ = ["CheckpointSaveError", "CheckpointSaverHook", "CheckpointSaverListener"]
