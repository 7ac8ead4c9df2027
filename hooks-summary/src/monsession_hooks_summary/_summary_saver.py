"""`SummarySaverHook`: writes summaries every N steps or seconds."""

from __future__ import annotations

import os
from typing import Any

from monsession import (
    NextAction,
    SessionRunArgs,
    SessionRunContext,
    SessionRunValues,
    TimedHook,
)
from monsession.plugins import (
    as_run_context,
    check_directory,
    check_schedule,
    read_global_step,
    require_global_step,
)
from monsession_hooks_summary._sinks import (
    EagerRecorder,
    GraphRecorder,
    check_summary_source,
    check_summary_writer,
    open_recorder,
)

_NAME = "SummarySaverHook"


class SummarySaverHook(TimedHook):
    """Saves summaries every N steps or every N seconds.

    Graph mode (TensorFlow's semantics): the summary op is fetched only on
    trigger steps and written at the global step after that step; the first
    step also writes a `SessionLog.START`; `end()` flushes the writer, and so
    does `on_failure()` (monsession only), so an error that ends the process
    loses none of the summaries recorded before it.
    The global step comes from the step service: on a step that records
    nothing `before_run` returns `None` and nothing is read; on a recording
    step graph mode reads the global step after the run, as TensorFlow does.

    Eager mode: the step calls `tf.summary.*` itself, e.g.
    ``tf.summary.scalar("loss", loss, step=global_step)``. From
    `after_create_session()` to `end()` the hook makes its writer the default
    one (with the global step as the default `step`) and lets those calls
    record only on trigger steps, through `tf.summary.record_if` on a boolean
    variable, so the `tf.function` is never retraced; nothing is fetched.
    The `SessionLog.START` is written just before the first step. `scaffold`
    is not needed (and ignored). A
    `tf.function` keeps the writer that was the default when it was first
    traced, so call it first inside the session.

    Its timer is saved with each checkpoint (`monsession.TimedHook`): after a
    restart the next summaries come one period after the saved trigger. The
    first step of the new process still writes its `SessionLog.START` (so
    TensorBoard drops what the previous process wrote past the checkpoint)
    but records summaries only if the schedule says so. A recovery in the
    same process (a preemption error that re-creates the session and
    restores the latest checkpoint) writes a `SessionLog.START` at the step
    after the restored one, in both modes, so TensorBoard drops what was
    written past the restored checkpoint and shows each step once
    (TensorFlow's hook writes its START only in `begin()`, and TensorBoard
    then shows the steps between the checkpoint and the error twice).

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
        given, or the given one is not positive; if both `scaffold` and
        `summary_op` are given, or neither in graph mode; if neither
        `output_dir` nor `summary_writer` is given, or `output_dir` is a file.
      TypeError: If `save_steps` is not an int or `save_secs` not a number
        (a `bool` or a string never is), `summary_writer` is not a summary
        writer, `scaffold` not a `Scaffold`, or `summary_op` not tensors.
      PermissionError: If `output_dir` (used without `summary_writer`) cannot
        be created or written to.
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
        check_schedule(_NAME, "save_steps", save_steps, "save_secs", save_secs)
        if scaffold is not None and summary_op is not None:
            raise ValueError(
                f"{_NAME}: Exactly one of scaffold or summary_op must be provided, got both."
            )
        check_summary_source(_NAME, scaffold, summary_op)
        check_summary_writer(_NAME, summary_writer)
        if summary_writer is None and not output_dir:
            raise ValueError(
                f"{_NAME}: one of output_dir or summary_writer must be provided, so the "
                "summaries have somewhere to go; got neither."
            )
        if summary_writer is None:
            check_directory(_NAME, "output_dir", output_dir)
        super().__init__(every_secs=save_secs, every_steps=save_steps)
        self._output_dir = output_dir
        self._summary_writer = summary_writer
        self._scaffold = scaffold
        self._summary_op = summary_op
        self._recorder: GraphRecorder | EagerRecorder | None = None
        self._check_empty = True  # Not for MonitoredTrainingSession's default hook.

    def begin(self) -> None:
        step_variable = require_global_step(_NAME)
        if self._recorder is not None:  # Left open if the previous session failed.
            self._recorder.close()
        self._recorder = open_recorder(
            _NAME,
            self._summary_writer,
            self._output_dir,
            self._scaffold,
            self._summary_op,
            step_variable,
            self._check_empty,
        )
        self._first = True  # No step seen yet: a SessionLog.START is due.
        self._record = False
        self._sessions = 0

    def after_create_session(self, session: Any, coord: Any) -> None:
        assert self._recorder is not None, "begin() opens the recorder"
        self._recorder.open(session)
        self._sessions += 1
        if self._sessions > 1:
            # A recovery restored an older checkpoint: what this hook wrote
            # past it is superseded, as after a restart.
            self._recorder.session_start(read_global_step(session) + 1)

    def before_run(self, run_context: SessionRunContext) -> SessionRunArgs | None:
        run_context = as_run_context(run_context)
        assert self._recorder is not None, "begin() opens the recorder"
        # A fresh timer triggers at the first step (TensorFlow's behaviour); one
        # restored with a checkpoint goes on with the schedule it had.
        self._record = self._timer.should_trigger_for_step(_expected_step(run_context))
        return self._recorder.before_step(run_context, self._record, self._first)

    def next_action(self, global_step: int) -> NextAction:
        """The run at which summaries are next recorded (for fused steps)."""
        if self._first:
            return NextAction(steps=1)
        return super().next_action(global_step)

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        run_context = as_run_context(run_context)
        if not self._record and not self._first:
            return
        assert self._recorder is not None, "begin() opens the recorder"
        global_step = run_context.global_step_after()
        assert global_step is not None, "begin() requires a global step"
        self._recorder.after_step(run_values.results, global_step, self._first)
        if self._record:
            self._timer.update_last_triggered_step(global_step)
        self._first = False

    def end(self, session: Any = None) -> None:
        recorder, self._recorder = self._recorder, None
        if recorder is not None:
            recorder.close()

    def on_failure(self, session: Any, error: BaseException) -> None:
        """Flushes what was recorded: the process may end with the error."""
        self.end()


def _expected_step(run_context: SessionRunContext) -> int:
    """The global step this run is expected to reach (the step service's, plus one)."""
    before = run_context.global_step
    if before is None:
        raise RuntimeError(
            f"{_NAME}: the session knows no global step; create it with "
            "monsession.get_or_create_global_step() before the session."
        )
    return before + 1


def default_summary_saver(**arguments: Any) -> SummarySaverHook:
    """`MonitoredTrainingSession`'s summary saver: it does not warn about a step that writes
    no summary (the program did not ask for summaries; in graph mode it fetches none then)."""
    hook = SummarySaverHook(**arguments)
    hook._check_empty = False
    return hook
