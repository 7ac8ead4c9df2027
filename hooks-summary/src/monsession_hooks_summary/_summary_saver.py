"""`SummarySaverHook`: writes summaries every N steps or seconds."""

from __future__ import annotations

import os
from typing import Any

import tensorflow as tf

from monsession import (
    SecondOrStepTimer,
    SessionRunArgs,
    SessionRunContext,
    SessionRunHook,
    SessionRunValues,
)
from monsession_hooks_summary._recording import Recording
from monsession_hooks_summary._sinks import EagerSink, GraphSink, open_sink
from monsession_hooks_summary._step import GlobalStep

_NAME = "SummarySaverHook"


class SummarySaverHook(SessionRunHook):
    """Saves summaries every N steps or every N seconds.

    Graph mode (TensorFlow's semantics): the summary op is fetched only on
    trigger steps and written at the global step after that step; the first
    step also writes a `SessionLog.START`; `end()` flushes the writer.

    Eager mode: the step calls `tf.summary.*` itself, e.g.
    ``tf.summary.scalar("loss", loss, step=global_step)``. From
    `after_create_session()` to `end()` the hook makes its writer the default
    one (with the global step as the default `step`) and lets those calls
    record only on trigger steps,
    through `tf.summary.record_if` on a boolean variable, so the
    `tf.function` is never retraced. The `SessionLog.START` is written just
    before the first step. `scaffold` is not needed (and ignored). A
    `tf.function` keeps the writer that was the default when it was first
    traced, so call it first inside the session.

    Args:
      save_steps: Save summaries every N steps. Exactly one of `save_steps`
        and `save_secs` must be given.
      save_secs: Save summaries every N seconds.
      output_dir: Directory to write the event file to; used when
        `summary_writer` is `None` (the writer comes from
        `SummaryWriterCache`).
      summary_writer: Graph mode: a `tf.compat.v1.summary.FileWriter`; eager
        mode: a `tf.summary.SummaryWriter`.
      scaffold: Graph mode: a `Scaffold` whose `summary_op` is fetched when
        `summary_op` is not given.
      summary_op: Graph mode: a string `Tensor` holding a serialized
        `Summary`, or a list of them (e.g. from `tf.compat.v1.summary.scalar`
        or `merge_all`).

    Raises:
      ValueError: If both or neither of `save_steps` and `save_secs` are
        given; if both `scaffold` and `summary_op` are given, or neither in
        graph mode; if neither `output_dir` nor `summary_writer` is given.
    """

    def __init__(
        self,
        save_steps: int | None = None,
        save_secs: float | None = None,
        output_dir: str | os.PathLike[str] | None = None,
        summary_writer: Any = None,
        scaffold: Any = None,
        summary_op: Any = None,
    ) -> None:
        if (save_steps is None) == (save_secs is None):
            raise ValueError(
                f"{_NAME}: exactly one of save_steps and save_secs must be provided; got "
                f"save_steps={save_steps!r}, save_secs={save_secs!r}."
            )
        if scaffold is not None and summary_op is not None:
            raise ValueError(
                f"{_NAME}: Exactly one of scaffold or summary_op must be provided, got both."
            )
        if not tf.executing_eagerly():
            self._check_summary_source(scaffold, summary_op)
        if summary_writer is None and not output_dir:
            raise ValueError(
                f"{_NAME}: one of output_dir or summary_writer must be provided, so the "
                "summaries have somewhere to go; got neither."
            )
        self._timer = SecondOrStepTimer(every_secs=save_secs, every_steps=save_steps)
        self._output_dir = output_dir
        self._summary_writer = summary_writer
        self._scaffold = scaffold
        self._summary_op = summary_op
        self._recording: Recording | None = None

    @staticmethod
    def _check_summary_source(scaffold: Any, summary_op: Any) -> None:
        if scaffold is None and summary_op is None:
            raise ValueError(
                f"{_NAME}: Exactly one of scaffold or summary_op must be provided in graph "
                "mode, got neither (in eager mode the step's tf.summary calls are the "
                "summaries and neither is needed)."
            )

    def begin(self) -> None:
        self._step = GlobalStep(_NAME)
        self._close_recording()  # Left open if the previous session ended in an error.
        if not self._step.eager:
            self._check_summary_source(self._scaffold, self._summary_op)
        elif self._summary_op is not None:
            raise ValueError(
                f"{_NAME}: summary_op is a graph-mode argument; in eager mode call "
                "tf.summary.* in the step (e.g. tf.summary.scalar('loss', loss, "
                "step=global_step)) and the hook records them on trigger steps."
            )
        sink = open_sink(_NAME, self._summary_writer, self._output_dir, self._step.eager)
        assert sink is not None, "the constructor requires output_dir or summary_writer"
        self._sink: GraphSink | EagerSink = sink
        if self._step.eager:
            # Opened once the session exists, so a failed session creation
            # leaves no summary state behind.
            self._recording = Recording(self._sink.writer, self._step.variable)
        self._next_step: int | None = None
        self._request_summary = False
        # The request of every step that writes no graph summary (never changed).
        self._global_step_request = SessionRunArgs({"global_step": self._step.fetch})

    def after_create_session(self, session: Any, coord: Any) -> None:
        if self._recording is not None:
            if not self._recording.is_open:
                self._recording.open()
            self._recording.attach(session)

    def before_run(self, run_context: SessionRunContext) -> SessionRunArgs:
        self._request_summary = self._next_step is None or self._timer.should_trigger_for_step(
            self._next_step
        )
        if self._recording is not None:
            if not self._recording.is_open:  # Used without after_create_session.
                self._recording.open()
            if self._next_step is None:
                self._write_eager_session_start(run_context)
            self._recording.record(self._request_summary)
        elif self._request_summary:
            summary_ops = self._get_summary_op()
            if summary_ops is not None:
                return SessionRunArgs({"global_step": self._step.fetch, "summary": summary_ops})
        return self._global_step_request

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        fetched = run_values.results["global_step"]
        if self._next_step is None or self._request_summary:
            global_step = self._step.after_step(run_context, fetched)
        else:
            global_step = self._step.estimate_after_step(fetched, 1)
        if self._next_step is None and not self._step.eager:  # Eager wrote it in before_run.
            self._sink.session_start(global_step)
        if self._request_summary:
            self._timer.update_last_triggered_step(global_step)
            if "summary" in run_values.results:
                self._sink.summaries(run_values.results["summary"], global_step)
        self._next_step = global_step + 1

    def _write_eager_session_start(self, run_context: SessionRunContext) -> None:
        """Writes `SessionLog.START` before the first step, at the step it will reach.

        In eager mode the step writes its own summaries while it runs, so the
        START marker goes first: TensorBoard drops data seen before a START at
        or after its step.
        """
        before = int(run_context.session.run(self._step.variable))
        self._sink.session_start(before + 1)

    def end(self, session: Any = None) -> None:
        try:
            self._close_recording()
        finally:
            self._sink.flush()

    def _close_recording(self) -> None:
        recording, self._recording = self._recording, None
        if recording is not None:
            recording.close()

    def _get_summary_op(self) -> list[Any] | None:
        """The summary tensors to fetch: `summary_op`, else the scaffold's, as a list."""
        summary_op = self._summary_op
        if summary_op is None:
            summary_op = self._scaffold.summary_op
        if summary_op is None:
            return None
        return summary_op if isinstance(summary_op, list) else [summary_op]
