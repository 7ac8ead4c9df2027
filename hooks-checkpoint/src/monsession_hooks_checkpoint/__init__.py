"""monsession-hooks-checkpoint: checkpoint saving for graph and eager loops.

`import monsession_hooks_checkpoint` does not import TensorFlow: the hook
class is loaded on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from monsession_hooks_checkpoint._listener import CheckpointSaverListener

__version__ = "0.1.0"

if TYPE_CHECKING:
    from monsession_hooks_checkpoint._checkpoint_saver import CheckpointSaverHook


def __getattr__(name: str) -> Any:
    if name == "CheckpointSaverHook":
        module = importlib.import_module("monsession_hooks_checkpoint._checkpoint_saver")
        value = module.CheckpointSaverHook
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["CheckpointSaverHook", "CheckpointSaverListener"]
