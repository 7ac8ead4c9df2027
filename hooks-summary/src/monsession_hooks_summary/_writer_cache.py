"""`SummaryWriterCache`: one summary writer per directory, shared by every hook."""

from __future__ import annotations

import os
import threading
from typing import Any

import tensorflow as tf

from monsession_hooks_summary import _tf_compat


def process_suffix() -> str:
    """The event file name suffix of this process: `.<pid>`.

    TensorFlow names a graph-mode event file `events.out.tfevents.<secs>.<host>`;
    two processes on one host starting in the same second would write one
    file. TensorBoard reads every file matching `*tfevents*`.
    """
    return f".{os.getpid()}"


class SummaryWriterCache:
    """One summary writer per log directory, shared by the hooks that write there.

    Graph mode: shares `tf.compat.v1.summary.FileWriterCache`, so a directory
    gets the same `tf.compat.v1.summary.FileWriter` here, in TensorFlow's own
    hooks and in any other code (for example the checkpoint family's
    `CHECKPOINT` session log) that asks TensorFlow's cache: one event file per
    directory per process. When this cache creates the writer, its event file
    name ends with `.<pid>` (`filename_suffix`), so processes never share a
    file; a writer TensorFlow's cache created first is used as it is.

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
        if not tf.executing_eagerly():
            return _tf_compat.file_writer_cache_get_or_add(
                key,
                lambda: tf.compat.v1.summary.FileWriter(
                    key, graph=tf.compat.v1.get_default_graph(), filename_suffix=process_suffix()
                ),
            )
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
