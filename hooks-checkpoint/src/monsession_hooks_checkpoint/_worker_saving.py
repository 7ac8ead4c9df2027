"""The chief's saves, mirrored on the other workers of a collective strategy.

Under `tf.distribute.MultiWorkerMirroredStrategy` saving a checkpoint may run
collective ops (reading a `SyncOnRead` variable sums it over every worker), so
TensorFlow's guidance is that every worker saves, on the same steps, and that
the workers other than the chief save into a temporary directory and delete
it. `WorkerCheckpointSaverHook` is that: the chief's `CheckpointSaverHook`,
saving into a fresh temporary directory that is removed at `end()` (or when
the process exits after an error).
"""

from __future__ import annotations

import shutil
import tempfile
import weakref
from typing import Any

import tensorflow as tf

from monsession import tf_logging
from monsession_hooks_checkpoint._checkpoint_saver import CheckpointSaverHook


def _remove(directory: str) -> None:
    shutil.rmtree(directory, ignore_errors=True)


class WorkerCheckpointSaverHook(CheckpointSaverHook):
    """Saves on the chief's steps, into a temporary directory that is removed.

    The schedule must be in steps, so that every worker saves on the same
    global steps. The decision to skip the save when the session is created
    (the chief does not rewrite the checkpoint it just restored) is taken from
    the chief's directory as it was in `begin()`, before any worker could
    save: every worker restores that same checkpoint.

    Args:
      chief_checkpoint_dir: The chief's checkpoint directory (only read).
      save_steps: Save every this many global steps, as the chief does.
      scaffold: The `Scaffold` whose `saver` is saved: a `tf.train.Checkpoint`,
        or a `tf.train.CheckpointManager` whose `checkpoint` this worker saves
        into its temporary directory (the manager itself saves the chief's).
      checkpoint_basename: The chief's file prefix.
    """

    _locks_checkpoint_dir = False
    # The key of the chief's saver in the chief's hook-state files: a restarted
    # worker takes the chief's timer with the checkpoint, so both go on with
    # the same schedule (a save off it, e.g. at a SIGTERM, moves neither).
    state_key = "CheckpointSaverHook[0]"

    def __init__(
        self,
        chief_checkpoint_dir: str,
        save_steps: int,
        scaffold: Any,
        checkpoint_basename: str = "model.ckpt",
    ) -> None:
        manager = getattr(scaffold, "saver", None)
        saver = None
        if isinstance(manager, tf.train.CheckpointManager):
            # The chief's manager saves into the chief's directory: this
            # worker saves the same tf.train.Checkpoint into its own.
            saver, scaffold = manager.checkpoint, None
        self._temp_dir = tempfile.mkdtemp(prefix="monsession-worker-checkpoint-")
        self._cleanup = weakref.finalize(self, _remove, self._temp_dir)
        super().__init__(
            self._temp_dir,
            save_steps=save_steps,
            saver=saver,
            scaffold=scaffold,
            checkpoint_basename=checkpoint_basename,
            max_to_keep=1,
            async_save=False,  # Nothing to gain: the files are removed unread.
        )
        self._chief_dir = chief_checkpoint_dir
        self._chief_latest: str | None = None

    @property
    def temporary_directory(self) -> str:
        """Where this worker's saves go until `end()` removes them."""
        return self._temp_dir

    def begin(self) -> None:
        super().begin()
        self._chief_latest = tf.train.latest_checkpoint(self._chief_dir)

    def _already_saved(self, global_step: int) -> bool:
        # Only the number is compared: a chief's CheckpointManager names its
        # files after its own checkpoint_name.
        latest = self._chief_latest
        return latest is not None and latest.rsplit("-", 1)[-1] == str(global_step)

    def end(self, session: Any) -> None:
        try:
            super().end(session)
        finally:
            self._cleanup()
            tf_logging.info("Removed this worker's temporary checkpoints %s.", self._temp_dir)
