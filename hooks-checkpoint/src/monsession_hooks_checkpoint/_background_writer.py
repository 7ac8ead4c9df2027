"""Eager checkpoints written in a background thread, from values read at the step boundary.

TensorFlow's own asynchronous saving (`CheckpointOptions(
experimental_enable_async_checkpoint=True)`) copies every object into a
host copy inside a `tf.function`, which Keras 3 variables cannot take part
in after the first save. `BackgroundWriter` takes its place for one
`tf.train.Checkpoint`: the save reads the values (no copy: a read shares
the variable's buffer, and the next update of the variable writes a new
one) and one thread writes them in TensorFlow's format (the same keys, the
object graph and the save counter included) and then runs the save's
callbacks, with which a `tf.train.CheckpointManager` updates the state file.
So the state file names a checkpoint only once its files are complete.
"""

from __future__ import annotations

import contextlib
import copy
import os
import sys
import threading
from typing import Any

import tensorflow as tf

from monsession import tf_logging
from monsession.plugins import register_writer
from monsession_hooks_checkpoint._tf_compat import (
    forget_async_request,
    snapshot_checkpoint,
    write_snapshot,
)

_NICENESS = 10  # Added to the writer thread's: its CPU goes to training first.


def _without_async(options: Any) -> Any:
    """A copy of `options` (or default options) asking for a synchronous write."""
    options = copy.copy(options) if options is not None else tf.train.CheckpointOptions()
    options.experimental_enable_async_checkpoint = False
    return options


def _yield_to_training() -> None:
    """Lowers this thread's CPU priority (Linux: per thread), so training runs first."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), _NICENESS)


class BackgroundWriter:
    """Writes the asynchronous saves of one `tf.train.Checkpoint` in a thread.

    Installed as the checkpoint's asynchronous saver
    (`_tf_compat.install_checkpoint_writer`), it receives the writes that
    `CheckpointManager.save(..., options=CheckpointOptions(
    experimental_enable_async_checkpoint=True))` makes, and `sync()` from
    `Checkpoint.sync()` / `CheckpointManager.sync()`.

    Args:
      checkpoint: The `tf.train.Checkpoint` whose saves it writes.
    """

    def __init__(self, checkpoint: Any) -> None:
        self._checkpoint = checkpoint
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def wait(self) -> None:
        """Waits for the running write; its error, if any, is kept for `sync()`.

        Every restore from the checkpoint's directory calls this first
        (`monsession.plugins.wait_for_writes`).
        """
        thread = self._thread
        if thread is not None:
            thread.join()

    def sync(self) -> None:
        """Waits for the running write; raises its error, once, if it failed."""
        self.wait()
        self._thread = None
        error, self._error = self._error, None
        if error is not None:
            raise error

    def _write(self, file_prefix: Any, options: Any = None) -> str:
        """Reads the values now and writes them as `file_prefix` in a thread.

        The callbacks of `options` (`experimental_write_callbacks`) run in
        that thread once the files are complete, with the checkpoint's path.
        """
        forget_async_request(self._checkpoint)  # Its restore() stays its own.
        self.sync()
        prefix = os.fspath(file_prefix)
        options = _without_async(options)
        try:
            snapshot = snapshot_checkpoint(self._checkpoint)
        except NotImplementedError as reason:
            tf_logging.warning("Saving %s synchronously: %s.", prefix, reason)
            return str(self._checkpoint.write(prefix, options=options))
        callbacks = list(options.experimental_write_callbacks or ())
        options.experimental_write_callbacks = None
        directory = os.path.dirname(prefix) or "."
        tf.io.gfile.makedirs(directory)
        register_writer(directory, self)
        self._thread = threading.Thread(
            target=self._run,
            args=(snapshot, prefix, options, callbacks),
            name=f"monsession checkpoint writer {os.path.basename(prefix)}",
            daemon=True,
        )
        self._thread.start()
        return prefix

    def _run(self, snapshot: Any, prefix: str, options: Any, callbacks: list[Any]) -> None:
        _yield_to_training()
        try:
            write_snapshot(snapshot, prefix, options)
            for callback in callbacks:
                callback(prefix)
        except BaseException as error:  # Raised by sync(), in the training thread.
            self._error = error

    def write(self, file_prefix: Any, options: Any = None) -> str:
        """As `tf.train.Checkpoint.write`, in the background."""
        return self._write(file_prefix, options)

    def save(self, file_prefix: Any, options: Any = None) -> str:
        """`tf.train.Checkpoint.save` with asynchronous options: saved synchronously."""
        forget_async_request(self._checkpoint)
        self.sync()
        return str(self._checkpoint.save(file_prefix, options=_without_async(options)))

    def read(self, save_path: Any, options: Any = None) -> Any:
        """`tf.train.Checkpoint.read`, once the pending write is complete."""
        forget_async_request(self._checkpoint)
        self.sync()
        return self._checkpoint.read(save_path, options=_without_async(options))

    def restore(self, save_path: Any, options: Any = None) -> Any:
        """`tf.train.Checkpoint.restore`, once the pending write is complete."""
        forget_async_request(self._checkpoint)
        self.sync()
        return self._checkpoint.restore(save_path, options=_without_async(options))
