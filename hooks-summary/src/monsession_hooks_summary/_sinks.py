"""Where the hooks write: a graph-mode `FileWriter` or an eager `tf.summary` writer.

A sink hides the difference so the hooks' logic is written once.
"""

from __future__ import annotations

import os
import time
from typing import Any

import tensorflow as tf
from tensorflow.core.util import event_pb2

from monsession_hooks_summary._writer_cache import SummaryWriterCache


class GraphSink:
    """Writes through anything with TensorFlow's `FileWriter` methods."""

    def __init__(self, writer: Any) -> None:
        self.writer = writer

    def scalar(self, tag: str, value: float, step: int) -> None:
        value_proto = tf.compat.v1.Summary.Value(tag=tag, simple_value=value)
        summary = tf.compat.v1.Summary(value=[value_proto])
        self.writer.add_summary(summary, step)

    def summaries(self, serialized: Any, step: int) -> None:
        for summary in serialized:
            self.writer.add_summary(summary, step)

    def session_start(self, step: int) -> None:
        log = event_pb2.SessionLog(status=event_pb2.SessionLog.START)
        self.writer.add_session_log(log, step)

    def flush(self) -> None:
        self.writer.flush()


class EagerSink:
    """Writes through a `tf.summary.SummaryWriter`, whatever records are on."""

    def __init__(self, writer: Any) -> None:
        self.writer = writer

    def scalar(self, tag: str, value: float, step: int) -> None:
        with self.writer.as_default(), tf.summary.record_if(True):
            tf.summary.scalar(tag, value, step=step)

    def summaries(self, serialized: Any, step: int) -> None:
        """Nothing to do: in eager mode the step's own `tf.summary` calls wrote them."""

    def session_start(self, step: int) -> None:
        from tensorflow.python.ops import summary_ops_v2

        event = event_pb2.Event(
            wall_time=time.time(),
            step=step,
            session_log=event_pb2.SessionLog(status=event_pb2.SessionLog.START),
        )
        with self.writer.as_default():
            summary_ops_v2.import_event(tf.constant(event.SerializeToString()))

    def flush(self) -> None:
        self.writer.flush()


def open_sink(
    hook_name: str,
    summary_writer: Any,
    output_dir: str | os.PathLike[str] | None,
    eager: bool,
) -> GraphSink | EagerSink | None:
    """The sink of a hook: its `summary_writer`, else the cached writer of `output_dir`.

    Returns:
      `None` when there is neither.

    Raises:
      TypeError: If `summary_writer` is not a writer of the current mode.
    """
    if summary_writer is None:
        if not output_dir:
            return None
        summary_writer = SummaryWriterCache.get(output_dir)
    if eager:
        if not isinstance(summary_writer, tf.summary.SummaryWriter):
            raise TypeError(
                f"{hook_name}: in eager mode summary_writer must be a tf.summary.SummaryWriter "
                f"(e.g. tf.summary.create_file_writer(logdir)), got {summary_writer!r}."
            )
        return EagerSink(summary_writer)
    if not hasattr(summary_writer, "add_summary"):
        raise TypeError(
            f"{hook_name}: in graph mode summary_writer must be a tf.compat.v1.summary."
            f"FileWriter (or have its add_summary/add_session_log/flush methods), got "
            f"{summary_writer!r}."
        )
    return GraphSink(summary_writer)
