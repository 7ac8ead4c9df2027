"""Eager mode's session creation: each process restores its own copy of the state."""

from __future__ import annotations

import logging
from collections.abc import Callable

import tensorflow as tf

from monsession._backends._eager import EagerSession
from monsession._backends._mode import CreatedSession
from monsession._backends._owned_step import add_to_checkpoint
from monsession._durability._checkpoint_files import read_back, report_and_repair, restore_newest

logger = logging.getLogger("monsession")


def create_eager_session(
    saver: tf.train.Checkpoint | tf.train.CheckpointManager | None,
    init_fn: Callable[[EagerSession], None] | None,
    checkpoint_dir: str | None,
    checkpoint_path: str | None = None,
    repair_state_file: bool = False,
) -> CreatedSession:
    """An `EagerSession` whose state is restored, or initialized by `init_fn`.

    `repair_state_file`: see `restore_eager_checkpoint` (the chief only).
    Every worker of an eager job restores the chief's checkpoint, and with
    it the hooks' state saved beside it (the same keys, the same schedule).
    """
    session = EagerSession()
    restored = restore_eager_checkpoint(
        saver, checkpoint_dir, checkpoint_path, repair_state_file=repair_state_file
    )
    if restored is None and init_fn is not None:
        init_fn(session)
    return CreatedSession(session, restored)


def restore_eager_checkpoint(
    saver: tf.train.Checkpoint | tf.train.CheckpointManager | None,
    checkpoint_dir: str | None,
    checkpoint_path: str | None = None,
    repair_state_file: bool = False,
) -> str | None:
    """Restores the newest readable eager checkpoint into `saver`; returns its prefix.

    Args:
      saver: A `tf.train.Checkpoint`, a `tf.train.CheckpointManager` or `None`.
      checkpoint_dir: Directory to take the latest checkpoint from. Defaults
        to the manager's directory for a `CheckpointManager`.
      checkpoint_path: A checkpoint prefix to restore instead.
      repair_state_file: Whether to rewrite the directory's state file when
        its latest checkpoint was damaged (the chief, which owns it).

    Returns:
      The prefix of the checkpoint restored, or `None` when there was none.

    Raises:
      ValueError: If there is a checkpoint to restore but no `tf.train.Checkpoint`
        to restore it into.
      DamagedCheckpointError: If `checkpoint_dir` holds checkpoint files but
        none can be read.
    """
    checkpoint = saver
    if isinstance(saver, tf.train.CheckpointManager):
        checkpoint = saver.checkpoint
        checkpoint_dir = checkpoint_dir or saver.directory
    add_to_checkpoint(checkpoint)

    def restore(prefix: str, whole: bool = True) -> None:
        if not isinstance(checkpoint, tf.train.Checkpoint):
            raise ValueError(
                f"Found checkpoint {prefix!r} to restore, but in eager mode there is nothing to "
                f"restore it into: Scaffold.saver is {saver!r}. Pass the state as "
                "Scaffold(saver=tf.train.Checkpoint(model=..., optimizer=..., step=global_step))."
            )
        # Every existing object must match: a restore re-run after damaged
        # data was found leaves no value of the damaged checkpoint behind.
        status = checkpoint.restore(prefix)
        status.assert_existing_objects_matched()
        if whole:
            try:
                status.assert_consumed()
            except AssertionError:
                # Values for objects not created yet (e.g. an optimizer's
                # slots) are read when they are, too late to fall back.
                read_back(prefix)

    path = checkpoint_path
    if path:
        restore(path, whole=False)
    elif checkpoint_dir:
        choice, _ = restore_newest(checkpoint_dir, restore)
        report_and_repair(choice, repair=repair_state_file)
        path = choice.path
    if not path:
        return None
    logger.info("Restored checkpoint %s.", path)
    return path
