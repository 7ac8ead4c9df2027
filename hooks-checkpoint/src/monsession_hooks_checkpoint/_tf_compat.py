"""Every private TensorFlow symbol this family uses, in one place.

`tests/test_checkpoint_hook_state.py` calls every entry, so a TensorFlow
release that removes one fails there, naming it. Everything else in the
family uses public TensorFlow.

Import this module only where TensorFlow is already needed.
"""

from __future__ import annotations

from typing import Any


class TensorFlowAPIMissingError(AttributeError):
    """A private TensorFlow attribute this family relies on is gone."""


def manager_checkpoint_prefix(manager: Any) -> str:
    """The path prefix of the checkpoints a `tf.train.CheckpointManager` writes.

    Why private: the manager's `checkpoint_name` argument has no public
    getter, and the hook-state file of a checkpoint must be written before
    `CheckpointManager.save()` names the checkpoint in the state file, so
    the name cannot be taken from the path `save()` returns. A manager the
    hook creates itself does not need this (the hook knows the name).

    Raises:
      TensorFlowAPIMissingError: If the manager has no `_checkpoint_prefix`.
    """
    prefix = getattr(manager, "_checkpoint_prefix", None)
    if not isinstance(prefix, str):
        raise TensorFlowAPIMissingError(
            "monsession-hooks-checkpoint needs tf.train.CheckpointManager._checkpoint_prefix "
            "(the prefix of its checkpoints, to save the hooks' state beside them), which this "
            "TensorFlow does not have."
        )
    return prefix
