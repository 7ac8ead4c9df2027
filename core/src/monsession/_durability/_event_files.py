"""The graph-mode event writer of a directory, shared by every hook that writes there."""

from __future__ import annotations

import os

import tensorflow as tf

from monsession import _tf_compat


def event_file_writer(logdir: str | os.PathLike[str]) -> tf.compat.v1.summary.FileWriter:
    """Returns this process's `tf.compat.v1.summary.FileWriter` for `logdir` (graph mode).

    One writer, and one event file, per directory per process, shared with
    TensorFlow's own hooks through `tf.compat.v1.summary.FileWriterCache`
    (which returns the same writer from then on). A writer created here
    names its event file ``events.out.tfevents.<secs>.<host>.<pid>``, so two
    processes writing into one directory never share a file (TensorFlow's
    own name has no process id). Hook families call this instead of
    `FileWriterCache.get` for the same reason.

    Args:
      logdir: The directory of the event file.

    Returns:
      The cached writer (it records the default graph when created). When
      the `FileWriter` of TensorFlow's writer-cache module is replaced (as
      TensorFlow's hook tests do with a fake writer), the writer is made by
      the replacement, with the arguments TensorFlow's cache gives it.
    """
    key = os.fspath(logdir)
    return _tf_compat.file_writer_cache_get_or_add(key, lambda: _new_writer(key))


def _new_writer(logdir: str) -> tf.compat.v1.summary.FileWriter:
    """A writer of the class TensorFlow's cache uses now; ours names its file with the pid."""
    writer_class = _tf_compat.file_writer_class()
    graph = tf.compat.v1.get_default_graph()
    if writer_class is not tf.compat.v1.summary.FileWriter:
        # Replaced (TensorFlow's hook tests install a fake writer): built as the cache builds it.
        return writer_class(logdir, graph=graph)
    return writer_class(logdir, graph=graph, filename_suffix=f".{os.getpid()}")
