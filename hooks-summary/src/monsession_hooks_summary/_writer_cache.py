"""`SummaryWriterCache`: one summary writer per directory, shared by every hook."""

from __future__ import annotations

import os
import threading
from typing import Any

import tensorflow as tf

import monsession


class SummaryWriterCache:
    """One summary writer per log directory, shared by the hooks that write there.

    Graph mode: shares `tf.compat.v1.summary.FileWriterCache`, so a directory
    gets the same `tf.compat.v1.summary.FileWriter` here, in TensorFlow's own
    hooks and in any other code (for example the checkpoint family's
    `CHECKPOINT` session log) that asks TensorFlow's cache: one event file per
    directory per process, made by `monsession.plugins.event_file_writer` (its event
    file name ends with `.<pid>`, so processes never share a file).

    Eager mode: keeps one `tf.summary.create_file_writer(logdir)` per
    directory; TensorFlow already names its event file with the process id.
    """

    _lock = threading.RLock()
    _eager_writers: dict[str, Any] = {}

    @staticmethod
    def get(logdir: str | os.PathLike[str]) -> Any:
        """Returns the writer of `logdir`, creating it on first use.

        Args:
          logdir: The directory the event file is written to.

        Returns:
          Graph mode: the `tf.compat.v1.summary.FileWriter` that
          `tf.compat.v1.summary.FileWriterCache.get(logdir)` returns from
          then on (it also records the default graph). Eager mode: a
          `tf.summary.SummaryWriter`.
        """
        key = os.fspath(logdir)
        if not monsession.plugins.in_eager_mode():
            return monsession.plugins.event_file_writer(key)
        with SummaryWriterCache._lock:
            writer = SummaryWriterCache._eager_writers.get(key)
            if writer is None:
                with tf.init_scope():
                    writer = tf.summary.create_file_writer(key)
                SummaryWriterCache._eager_writers[key] = writer
            return writer

    @staticmethod
    def clear() -> None:
        """Closes and forgets every cached writer, in both modes."""
        tf.compat.v1.summary.FileWriterCache.clear()
        with SummaryWriterCache._lock:
            writers = list(SummaryWriterCache._eager_writers.values())
            SummaryWriterCache._eager_writers.clear()
        for writer in writers:
            writer.close()
