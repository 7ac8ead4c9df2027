"""Eager mode: saving a `tf.train.Checkpoint` through a `tf.train.CheckpointManager`."""

from __future__ import annotations

import dataclasses
import os
import threading
from typing import Any

import tensorflow as tf

from monsession import tf_logging
from monsession_hooks_checkpoint._background_writer import BackgroundWriter
from monsession_hooks_checkpoint._tf_compat import (
    install_checkpoint_writer,
    manager_checkpoint_prefix,
)


def is_object_checkpoint(saver: Any) -> bool:
    """Whether `saver` is a `tf.train.Checkpoint` or `tf.train.CheckpointManager`."""
    return isinstance(saver, (tf.train.Checkpoint, tf.train.CheckpointManager))


def collection_state() -> Any:
    """The eager default state: the one object checkpoint in the SAVERS collection, or `None`.

    Graph mode falls back to the `Saver` of the default graph's
    ``tf.compat.v1.GraphKeys.SAVERS`` collection; eager mode, to the
    `tf.train.Checkpoint` (or `CheckpointManager`) a driver put there
    (`HooksCallback` does under `model.fit`).

    Raises:
      ValueError: If the collection holds more than one.
    """
    found = [
        item
        for item in tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.SAVERS)
        if is_object_checkpoint(item)
    ]
    if len(found) > 1:
        raise ValueError(
            f"CheckpointSaverHook: the collection {tf.compat.v1.GraphKeys.SAVERS} holds "
            f"{len(found)} tf.train.Checkpoints; pass the one to save as saver=."
        )
    return found[0] if found else None


def check_manager_directory(manager: Any, checkpoint_dir: str) -> None:
    """Raises unless a `CheckpointManager` writes into `checkpoint_dir`.

    Raises:
      ValueError: If the manager's directory is another one.
    """
    if os.path.abspath(manager.directory) != os.path.abspath(checkpoint_dir):
        raise ValueError(
            f"CheckpointSaverHook: the tf.train.CheckpointManager saves into "
            f"{manager.directory!r}, but checkpoint_dir is {checkpoint_dir!r}; the session "
            "restores from checkpoint_dir. Use the same directory for both."
        )


@dataclasses.dataclass
class _Installed:
    """The one `BackgroundWriter` of a checkpoint, while some hook saves with it."""

    checkpoint: Any  # Held, so that its id names it while installed.
    writer: BackgroundWriter
    replaced: Any  # The checkpoint's asynchronous saver before the writer.
    users: int = 0


_installed: dict[int, _Installed] = {}
_installed_lock = threading.Lock()


def acquire_writer(checkpoint: Any) -> BackgroundWriter:
    """The checkpoint's `BackgroundWriter`, installed by the first hook that saves it.

    Hooks saving the same `tf.train.Checkpoint` (a default and a user
    `CheckpointSaverHook`) share one writer: their saves are written one
    after another, each hook waits for all of them, and the checkpoint gets
    its own saver back only when the last hook releases it (`release_writer`).
    """
    with _installed_lock:
        entry = _installed.get(id(checkpoint))
        if entry is None:
            checkpoint.sync()  # An asynchronous save the user started is complete.
            writer = BackgroundWriter(checkpoint)
            replaced = install_checkpoint_writer(checkpoint, writer)
            entry = _installed[id(checkpoint)] = _Installed(checkpoint, writer, replaced)
        entry.users += 1
        return entry.writer


def release_writer(checkpoint: Any) -> None:
    """Undoes one `acquire_writer`; the last gives the checkpoint its saver back."""
    with _installed_lock:
        entry = _installed[id(checkpoint)]
        entry.users -= 1
        if entry.users == 0:
            del _installed[id(checkpoint)]
            install_checkpoint_writer(checkpoint, entry.replaced)


_BACKGROUND = tf.train.CheckpointOptions()
# The attribute TensorFlow's saving reads; the argument of that name warns from TF 2.21.
_BACKGROUND.experimental_enable_async_checkpoint = True


class EagerSaving:
    """Writes the user's `tf.train.Checkpoint` in eager mode.

    Checkpoints are numbered by the global step, so the files are
    ``<checkpoint_dir>/<basename>-<step>.{index,data-*}`` and the
    ``checkpoint`` state file lets `tf.train.latest_checkpoint` find them.
    The state file is updated only once a checkpoint is complete, so a crash
    during a save leaves the previous one as the latest.

    With `async_save`, a `BackgroundWriter` is the checkpoint's asynchronous
    saver from `after_create_session` to `end` (one per checkpoint, shared by
    the hooks that save it: `acquire_writer`): `save` reads the values and
    returns, the files are written in a thread.

    Args:
      state: A `tf.train.Checkpoint`, or a `tf.train.CheckpointManager` used as
        it is (its directory, name and `max_to_keep`).
      checkpoint_dir: The directory to save into.
      checkpoint_basename: The file prefix of the checkpoints.
      max_to_keep: How many checkpoints to keep; `None` or 0 keeps all.
      async_save: Whether to write checkpoints in a background thread.

    Raises:
      TypeError: If `state` is neither a `Checkpoint` nor a `CheckpointManager`.
      ValueError: If a given `CheckpointManager` saves into another directory.
    """

    def __init__(
        self,
        state: Any,
        checkpoint_dir: str,
        checkpoint_basename: str,
        max_to_keep: int | None,
        async_save: bool,
    ) -> None:
        if not is_object_checkpoint(state):
            raise TypeError(
                "CheckpointSaverHook: in eager mode there is no graph to save; pass the state as "
                "saver=tf.train.Checkpoint(...) or "
                "scaffold=Scaffold(saver=tf.train.Checkpoint(model=..., optimizer=..., "
                f"step=global_step)), or add it to the collection "
                f"{tf.compat.v1.GraphKeys.SAVERS} (under model.fit, HooksCallback does). "
                f"Got saver {state!r}."
            )
        self._directory = checkpoint_dir
        self._manager: Any = None
        self._own_manager = not isinstance(state, tf.train.CheckpointManager)
        if isinstance(state, tf.train.CheckpointManager):
            check_manager_directory(state, checkpoint_dir)
            self._manager = state
        self._state = state
        self._checkpoint_basename = checkpoint_basename
        self._max_to_keep = max_to_keep
        self._async_save = async_save
        self._writer: BackgroundWriter | None = None

    def after_create_session(self, session: Any) -> None:
        """Creates the `CheckpointManager`, once the session has restored.

        The manager reads the directory's state file, which the session may
        just have repaired after skipping a damaged checkpoint.
        """
        if self._manager is None:
            self._manager = tf.train.CheckpointManager(
                self._state,
                directory=self._directory,
                max_to_keep=self._max_to_keep or None,
                checkpoint_name=self._checkpoint_basename,
            )
        if self._async_save and self._writer is None:
            self._install_writer(self._manager.checkpoint)

    def _install_writer(self, checkpoint: Any) -> None:
        if not isinstance(checkpoint, tf.train.Checkpoint):
            tf_logging.warning(
                "CheckpointSaverHook: the CheckpointManager's checkpoint is a %s, not a "
                "tf.train.Checkpoint; saving synchronously.",
                type(checkpoint).__name__,
            )
            self._async_save = False
            return
        self._writer = acquire_writer(checkpoint)

    def prefix(self, step: int) -> str:
        """The prefix the manager gives the checkpoint numbered `step`."""
        if self._own_manager:
            return os.path.join(self._directory, f"{self._checkpoint_basename}-{step}")
        return f"{manager_checkpoint_prefix(self._manager)}-{step}"

    def holds(self, step: int) -> bool:
        """Whether the directory's latest complete checkpoint is numbered `step`.

        A `CheckpointManager` numbers its files ``<name>-<number>``; only the
        number is compared, so a given manager's own `checkpoint_name` is
        respected without reading its private state.
        """
        latest = tf.train.latest_checkpoint(self._directory)
        return latest is not None and latest.rsplit("-", 1)[-1] == str(step)

    def save(self, session: Any, step: int) -> str:
        """Saves a checkpoint for `step`; with `async_save` its files are written in a thread."""
        self.finish()
        options = _BACKGROUND if self._writer is not None else None
        return str(self._manager.save(checkpoint_number=step, options=options))

    @property
    def background(self) -> bool:
        """Whether a `BackgroundWriter` writes the files (`async_save`)."""
        return self._writer is not None

    def finish(self) -> None:
        """Waits for the background write, if any; raises its error (once)."""
        if self._writer is not None:
            self._writer.sync()

    def end(self) -> None:
        """Waits for the last save and releases the writer (`release_writer`)."""
        writer, self._writer = self._writer, None
        if writer is None:
            return
        try:
            writer.sync()
        except Exception as error:  # Only after another error: the hook waits first.
            tf_logging.error("CheckpointSaverHook: the last checkpoint failed: %s", error)
        finally:
            release_writer(self._manager.checkpoint)
