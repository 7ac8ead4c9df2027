"""Where the summary hooks write, and how `SummarySaverHook` gets its summaries.

Graph and eager mode differ by nature here, and only here:

* a *sink* writes scalars and session logs: graph mode as protos through a
  `tf.compat.v1.summary.FileWriter`, eager mode through a `tf.summary`
  writer;
* a *recorder* gives `SummarySaverHook` the summaries of its recording
  steps: graph mode fetches the summary op on those steps and writes what
  it returns; eager mode lets the step's own `tf.summary` calls record on
  those steps only (a `Recording`), and fetches nothing.

The hooks choose both once, in `begin()`, with `open_sink` and
`open_recorder`, and never ask which mode they run in.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from typing import Any, Protocol

import tensorflow as tf

from monsession import SessionRunArgs, SessionRunContext
from monsession.plugins import error_cause, in_eager_mode
from monsession_hooks_summary import _tf_compat
from monsession_hooks_summary._empty_recording import EmptyRecordingCheck
from monsession_hooks_summary._recording import Recording
from monsession_hooks_summary._writer_cache import SummaryWriterCache

_START = tf.compat.v1.SessionLog.START
_SCALARS_PLUGIN = "scalars"  # TensorBoard's plugin for `tf.summary.scalar` data.
_FLOAT = tf.float32.as_datatype_enum

# What a failing write raises: TensorFlow's errors (eager), and the builtins
# its C++ bindings map statuses to (graph mode's event writer: `IndexError`
# for OUT_OF_RANGE such as "File too large", `RuntimeError` for most others).
_WRITE_ERRORS = (tf.errors.OpError, OSError, IndexError, RuntimeError)


class SummaryWriteError(OSError):
    """Writing or flushing summaries failed (disk full, file too large, permission lost...).

    Raised instead of TensorFlow's error, which for a file-size limit is an
    `OutOfRangeError` (eager) or an `IndexError` (graph): a session would take
    the former for the end of the data. The message names the hook and the
    log directory (or the user's writer when its directory is not known).
    """


@contextlib.contextmanager
def _writing(hook_name: str, location: str) -> Iterator[None]:
    """Turns a failed summary write into a `SummaryWriteError` naming `location`."""
    try:
        yield
    except _WRITE_ERRORS as error:
        raise SummaryWriteError(
            f"{hook_name}: writing summaries to {location} failed: "
            f"{type(error).__name__}: {error_cause(error)}",
        ) from error


def _location_of(writer: Any, logdir: str | os.PathLike[str] | None) -> str:
    """The directory a writer writes to, for error messages."""
    get_logdir = getattr(writer, "get_logdir", None)
    if callable(get_logdir):
        return os.fspath(get_logdir())
    if logdir:
        return os.fspath(logdir)
    return f"the event file of summary_writer {writer!r}"


class Sink(Protocol):
    """Writes scalars and session logs for a hook."""

    writer: Any

    def scalar(self, tag: str, value: float, step: int) -> None: ...

    def session_start(self, step: int) -> None: ...

    def flush(self) -> None: ...


class _WriterSink:
    """A writer and what its errors name: every write and flush raises
    `SummaryWriteError` naming `location` when the writer fails.

    Args:
      writer: The writer.
      hook_name: The hook's class name, for error messages.
      location: The writer's directory, for error messages.
    """

    def __init__(self, writer: Any, hook_name: str, location: str) -> None:
        self.writer = writer
        self._hook_name = hook_name
        self.location = location


class GraphSink(_WriterSink):
    """Writes protos through anything with TensorFlow's `FileWriter` methods."""

    def scalar(self, tag: str, value: float, step: int) -> None:
        value_proto = tf.compat.v1.Summary.Value(tag=tag, simple_value=value)
        self.add_summary(tf.compat.v1.Summary(value=[value_proto]), step)

    def add_summary(self, summary: Any, step: int) -> None:
        """Writes a `Summary` proto (or its serialization) at `step`."""
        with _writing(self._hook_name, self.location):
            self.writer.add_summary(summary, step)

    def session_start(self, step: int) -> None:
        with _writing(self._hook_name, self.location):
            self.writer.add_session_log(tf.compat.v1.SessionLog(status=_START), step)

    def flush(self) -> None:
        with _writing(self._hook_name, self.location):
            self.writer.flush()


class EagerSink(_WriterSink):
    """Writes through a `tf.summary.SummaryWriter`, whatever records are on.

    Scalars and session logs go in as whole events, one op each (a
    `tf.summary.scalar` call costs several eager ops); a scalar is written
    as `tf.summary.scalar` writes it. A no-op writer writes nothing.
    """

    def __init__(self, writer: Any, hook_name: str, location: str) -> None:
        super().__init__(writer, hook_name, location)
        self._noop = _tf_compat.is_noop_writer(writer)

    def scalar(self, tag: str, value: float, step: int) -> None:
        event = tf.compat.v1.Event(wall_time=time.time(), step=step)
        entry = event.summary.value.add(tag=tag)
        entry.metadata.plugin_data.plugin_name = _SCALARS_PLUGIN
        entry.tensor.dtype = _FLOAT
        entry.tensor.tensor_shape.SetInParent()
        entry.tensor.float_val.append(value)
        self._write(event)

    def session_start(self, step: int) -> None:
        self._write(
            tf.compat.v1.Event(
                wall_time=time.time(), step=step, session_log=tf.compat.v1.SessionLog(status=_START)
            )
        )

    def _write(self, event: Any) -> None:
        if self._noop:
            return
        with _writing(self._hook_name, self.location), self.writer.as_default():
            _tf_compat.import_event(tf.constant(event.SerializeToString()))

    def flush(self) -> None:
        with _writing(self._hook_name, self.location):
            self.writer.flush()


def open_sink(
    hook_name: str, summary_writer: Any, output_dir: str | os.PathLike[str] | None
) -> GraphSink | EagerSink | None:
    """The sink of a hook: its `summary_writer`, else the cached writer of `output_dir`.

    Args:
      hook_name: The hook's class name, for error messages.
      summary_writer: The writer the user gave, or `None`.
      check_empty: Eager mode: whether to warn when the first recording step
        writes no summary.
      output_dir: The directory whose `SummaryWriterCache` writer to use
        when `summary_writer` is `None`.

    Returns:
      A `GraphSink` or an `EagerSink`; `None` when there is no writer.

    Raises:
      TypeError: If `summary_writer` is not a writer of the current mode.
    """
    logdir = None
    if summary_writer is None:
        if not output_dir:
            return None
        logdir = output_dir
        summary_writer = SummaryWriterCache.get(output_dir)
    location = _location_of(summary_writer, logdir)
    if in_eager_mode():
        if not isinstance(summary_writer, tf.summary.SummaryWriter):
            raise TypeError(
                f"{hook_name}: in eager mode summary_writer must be a tf.summary.SummaryWriter "
                f"(e.g. tf.summary.create_file_writer(logdir)), got {summary_writer!r}."
            )
        return EagerSink(summary_writer, hook_name, location)
    if not hasattr(summary_writer, "add_summary"):
        raise TypeError(
            f"{hook_name}: in graph mode summary_writer must be a tf.compat.v1.summary."
            f"FileWriter (or have its add_summary/add_session_log/flush methods), got "
            f"{summary_writer!r}."
        )
    return GraphSink(summary_writer, hook_name, location)


class SummaryRecorder(Protocol):
    """How `SummarySaverHook` gets the summaries of its recording steps."""

    def open(self, session: Any) -> None:
        """Called by `after_create_session` with the new session."""

    def before_step(
        self, run_context: SessionRunContext, record: bool, first: bool
    ) -> SessionRunArgs | None:
        """Prepares a step; returns what to fetch (`None`: nothing).

        Args:
          run_context: The step's run context.
          record: Whether this step's summaries are recorded.
          first: Whether this is the hook's first step (a `SessionLog.START`
            is due).
        """

    def after_step(self, results: Any, step: int, first: bool) -> None:
        """Writes what a recording step gave, at `step` (the global step after it)."""

    def close(self) -> None:
        """Stops recording and flushes the writer (`end()`)."""


class GraphRecorder:
    """Fetches the summary op on recording steps and writes its `Summary` protos.

    The `SessionLog.START` is written after the first step, at the global
    step that step reached, before that step's summaries (TensorFlow's order).

    Args:
      sink: Where to write.
      scaffold: Gives `summary_op` when `summary_op` is `None` (read at the
        step: the scaffold fills it in when the graph is finalized).
      summary_op: A string tensor of a serialized `Summary`, or a list.
    """

    def __init__(self, sink: GraphSink, scaffold: Any, summary_op: Any) -> None:
        self._sink = sink
        self._scaffold = scaffold
        self._summary_op = summary_op

    def open(self, session: Any) -> None:
        """Nothing to open in graph mode."""

    def _summary_ops(self) -> list[Any] | None:
        summary_op = self._summary_op
        if summary_op is None:
            summary_op = self._scaffold.summary_op
        if summary_op is None:
            return None
        return summary_op if isinstance(summary_op, list) else [summary_op]

    def session_start(self, step: int) -> None:
        """Writes a `SessionLog.START` at `step`: TensorBoard drops what came from `step` on."""
        self._sink.session_start(step)

    def before_step(
        self, run_context: SessionRunContext, record: bool, first: bool
    ) -> SessionRunArgs | None:
        summary_ops = self._summary_ops() if record else None
        return None if summary_ops is None else SessionRunArgs(summary_ops)

    def after_step(self, results: Any, step: int, first: bool) -> None:
        if first:
            self._sink.session_start(step)
        for summary in results or ():
            self._sink.add_summary(summary, step)

    def close(self) -> None:
        self._sink.flush()


class EagerRecorder:
    """Lets the step's own `tf.summary` calls record on recording steps only.

    The `SessionLog.START` is written before the first step, at the global
    step that step will reach: the step writes its summaries while it runs,
    and TensorBoard drops data read before a START at or below its step.

    Args:
      sink: Where to write (its writer becomes the default one).
      step_variable: The global step variable, the default `step` of
        summaries written without one.
      hook_name: The hook, for the warning about a step that writes no
        summary (`EmptyRecordingCheck`).
      check_empty: Whether to check for that.
    """

    def __init__(
        self, sink: EagerSink, step_variable: Any, hook_name: str, check_empty: bool
    ) -> None:
        self._sink = sink
        self._recording = Recording(sink.writer, step_variable, sink.location)
        directory = sink.location if check_empty else None
        self._empty = EmptyRecordingCheck(hook_name, directory, sink.flush)

    def open(self, session: Any) -> None:
        # Opened once the session exists, so a failed session creation
        # leaves no summary state behind.
        if not self._recording.is_open:
            self._recording.open()
        self._recording.attach(session)

    def session_start(self, step: int) -> None:
        """Writes a `SessionLog.START` at `step`: TensorBoard drops what came from `step` on."""
        self._sink.session_start(step)

    def before_step(
        self, run_context: SessionRunContext, record: bool, first: bool
    ) -> SessionRunArgs | None:
        if not self._recording.is_open:  # Used without after_create_session.
            self._recording.open()
        if first:
            self._recording.check_traced_inside(run_context.original_args.fetches)
            before = run_context.global_step
            if before is not None:
                self._sink.session_start(before + 1)
        if record:
            self._empty.before_recording()
        self._recording.record(record)
        return None

    def after_step(self, results: Any, step: int, first: bool) -> None:
        """Turns recording off: the step's own `tf.summary` calls wrote the summaries.

        The steps that run silently (fused, no hook called) must not record.
        """
        self._recording.record(False)
        self._empty.after_step(step)
        if first:
            self._recording.note_first_step()

    def close(self) -> None:
        try:
            self._recording.close()
        finally:
            self._sink.flush()


def check_summary_writer(hook_name: str, summary_writer: Any) -> None:
    """Checks, in either mode, that `summary_writer` is `None` or a summary writer.

    `begin()` checks later that it is the writer of the mode it runs in.

    Raises:
      TypeError: If it is neither a `tf.summary.SummaryWriter` nor has
        `add_summary` (a `tf.compat.v1.summary.FileWriter`).
    """
    if summary_writer is None or isinstance(summary_writer, tf.summary.SummaryWriter):
        return
    if isinstance(summary_writer, type) or not callable(
        getattr(summary_writer, "add_summary", None)
    ):
        raise TypeError(
            f"{hook_name}: summary_writer must be a tf.compat.v1.summary.FileWriter (graph "
            "mode) or a tf.summary.SummaryWriter (eager mode), or None; got "
            f"{summary_writer!r} of type {type(summary_writer).__name__}."
        )


def check_summary_source(hook_name: str, scaffold: Any, summary_op: Any) -> None:
    """Checks where `SummarySaverHook`'s summaries come from, for the current mode.

    Raises:
      ValueError: In graph mode if neither `scaffold` nor `summary_op` is
        given.
      TypeError: If `scaffold` has no `summary_op`, or `summary_op` holds
        something that is not a tensor (or a tensor's name).
    """
    if scaffold is not None and (isinstance(scaffold, type) or not hasattr(scaffold, "summary_op")):
        raise TypeError(
            f"{hook_name}: scaffold must be a monsession.Scaffold (or None), got {scaffold!r} "
            f"of type {type(scaffold).__name__}."
        )
    if summary_op is not None:
        for leaf in tf.nest.flatten(summary_op):
            if isinstance(leaf, str) or hasattr(leaf, "dtype"):
                continue
            raise TypeError(
                f"{hook_name}: summary_op must be a string Tensor of serialized summaries (e.g. "
                "from tf.compat.v1.summary.merge_all()) or a list of them; it holds "
                f"{leaf!r} of type {type(leaf).__name__}."
            )
    if not in_eager_mode() and scaffold is None and summary_op is None:
        raise ValueError(
            f"{hook_name}: Exactly one of scaffold or summary_op must be provided in graph "
            "mode, got neither (in eager mode the step's tf.summary calls are the "
            "summaries and neither is needed)."
        )


def open_recorder(
    hook_name: str,
    summary_writer: Any,
    output_dir: str | os.PathLike[str] | None,
    scaffold: Any,
    summary_op: Any,
    step_variable: Any,
    check_empty: bool,
) -> GraphRecorder | EagerRecorder:
    """The recorder of a `SummarySaverHook`, for the current mode.

    Args:
      hook_name: The hook's class name, for error messages.
      summary_writer: The writer the user gave, or `None`.
      output_dir: The directory whose cached writer to use otherwise.
      scaffold: Graph mode: gives the summary op when `summary_op` is `None`.
      summary_op: Graph mode: the summary op(s) to fetch.
      step_variable: The global step variable.

    Raises:
      ValueError: If the summaries' source does not fit the mode (graph mode:
        neither `scaffold` nor `summary_op`; eager mode: a `summary_op`), or
        there is no writer.
      TypeError: If `summary_writer` is not a writer of the current mode.
    """
    if in_eager_mode() and summary_op is not None:
        raise ValueError(
            f"{hook_name}: summary_op is a graph-mode argument; in eager mode call "
            "tf.summary.* in the step (e.g. tf.summary.scalar('loss', loss, "
            "step=global_step)) and the hook records them on trigger steps."
        )
    check_summary_source(hook_name, scaffold, summary_op)
    sink = open_sink(hook_name, summary_writer, output_dir)
    if sink is None:
        raise ValueError(f"{hook_name}: one of output_dir or summary_writer must be provided.")
    if isinstance(sink, GraphSink):
        return GraphRecorder(sink, scaffold, summary_op)
    return EagerRecorder(sink, step_variable, hook_name, check_empty)
