"""`StepCounterHook`: logs and records how many global steps run per second."""

from __future__ import annotations

import os
from typing import Any

from monsession import (
    SessionRunArgs,
    SessionRunContext,
    SessionRunValues,
    TimedHook,
    tf_logging,
)
from monsession.plugins import (
    as_run_context,
    check_directory,
    check_schedule,
    read_global_step,
    require_global_step,
)
from monsession_hooks_summary._sinks import (
    EagerSink,
    GraphSink,
    check_summary_writer,
    open_sink,
)

_NAME = "StepCounterHook"


class StepCounterHook(TimedHook):
    """Logs the global steps per second, and writes them as `<global step name>/sec`.

    Every `every_n_steps` steps (or `every_n_secs` seconds) it logs the rate
    since the last trigger and, when it has a writer, writes it as a scalar
    summary at the current global step (tag ``global_step/sec`` for the usual
    global step). It warns when the global step did not advance over a run.

    The global step comes from the step service (`run_context.global_step`,
    `global_step_after`): the hook fetches nothing, and graph mode reads the
    variable only when the expected step triggers, as TensorFlow does. In
    eager mode the session counts steps on the host, so a step that does not
    advance the global step is noticed (and then warned about by this hook
    too) once some hook makes the session read the device.

    Graph mode writes a `Summary` proto through a `FileWriter`; eager mode
    writes ``tf.summary.scalar`` through a `tf.summary` writer, whatever the
    `SummarySaverHook` schedule is.

    Args:
      every_n_steps: Log every N global steps. Exactly one of `every_n_steps`
        and `every_n_secs` must be given.
      every_n_secs: Log every N seconds.
      output_dir: Directory to write the rate to, through `SummaryWriterCache`,
        when `summary_writer` is `None`. With neither, the hook only logs.
      summary_writer: Graph mode: a `tf.compat.v1.summary.FileWriter`; eager
        mode: a `tf.summary.SummaryWriter`.

    Its state (the last trigger) is saved with each checkpoint and restored
    with it (`monsession.StatefulHook`): after a restart the hook triggers
    at the steps it would have triggered at, and the rate there counts the
    seconds the steps since the previous trigger ran in both processes,
    never the time the job was down. Its directory gets the events
    TensorFlow's hook writes there, and no `SessionLog.START` on a fresh
    start or a restart in a new process (as TensorFlow's). Only a recovery
    in the process (a preemption error that restores an older checkpoint)
    writes one, at the step after the restored one, so TensorBoard drops
    the rates written past it and shows each step once. It is written twice,
    because TensorBoard takes the first START of a directory as the run's
    beginning, not a restart; a second one at the same step changes nothing.

    Raises:
      ValueError: If both or neither of `every_n_steps` and `every_n_secs`
        are given, or the given one is not positive; if `output_dir` is a file.
      TypeError: If `every_n_steps` is not an int or `every_n_secs` not a
        number (a `bool` or a string never is), or `summary_writer` is not a
        summary writer.
      PermissionError: If `output_dir` (used without `summary_writer`) cannot
        be created or written to.
    """

    def __init__(
        self,
        every_n_steps: int | None = 100,
        every_n_secs: float | None = None,
        output_dir: str | os.PathLike[str] | None = None,
        summary_writer: Any = None,
    ) -> None:
        check_schedule(_NAME, "every_n_steps", every_n_steps, "every_n_secs", every_n_secs)
        check_summary_writer(_NAME, summary_writer)
        if summary_writer is None and output_dir:
            check_directory(_NAME, "output_dir", output_dir)
        super().__init__(every_steps=every_n_steps, every_secs=every_n_secs)
        self._summary_writer = summary_writer
        self._output_dir = output_dir
        self._last_global_step: int | None = None
        self._step_before: int | None = None

    def begin(self) -> None:
        step_variable = require_global_step(_NAME)
        self._sink: GraphSink | EagerSink | None = open_sink(
            _NAME, self._summary_writer, self._output_dir
        )
        if self._sink is not None:
            self._summary_writer = self._sink.writer
        self._summary_tag = step_variable.name.split(":")[0] + "/sec"
        self._logged = False
        self._sessions = 0

    def after_create_session(self, session: Any, coord: Any) -> None:
        self._sessions += 1
        if self._sink is not None and self._sessions > 1:
            # A recovery: twice, so one counts as a restart even when it is the
            # directory's first START (TensorBoard takes that as the beginning).
            step = read_global_step(session) + 1
            self._sink.session_start(step)
            self._sink.session_start(step)

    def before_run(self, run_context: SessionRunContext) -> SessionRunArgs | None:
        run_context = as_run_context(run_context)
        # Taken before the run: on the first run the step service then knows
        # the value before the step rather than inferring it afterwards.
        self._step_before = run_context.global_step
        return None

    def _log_and_record(self, elapsed_steps: int, elapsed_time: float, global_step: int) -> None:
        """Logs and writes the rate of `elapsed_steps` steps over `elapsed_time` seconds."""
        self._logged = True
        steps_per_sec = elapsed_steps / elapsed_time
        if self._sink is not None:
            self._sink.scalar(self._summary_tag, steps_per_sec, global_step)
        tf_logging.info("%s: %g", self._summary_tag, steps_per_sec)

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        run_context = as_run_context(run_context)
        global_step = run_context.global_step_after(self._timer.should_trigger_for_step)
        if global_step is not None:
            elapsed_time, elapsed_steps = self._timer.update_last_triggered_step(global_step)
            # A clock that did not move (coarse timers) gives no rate.
            if elapsed_time and elapsed_steps is not None:
                self._log_and_record(elapsed_steps, elapsed_time, global_step)
        # TensorFlow's check: the step before this run against the one before
        # the previous run (not the timer's steps, which skip runs).
        if self._step_before is not None and self._step_before == self._last_global_step:
            # Some optimizers (e.g. SyncReplicasOptimizer on workers) do not
            # advance the global step on every run, hence only the first few.
            tf_logging.log_first_n(
                tf_logging.WARN,
                "StepCounterHook: it seems that the global step (tf.train.get_global_step) "
                "has not been increased. Current value (could be stable): %s vs previous "
                "value: %s. Increase it in the step, e.g. by passing the global step to "
                "Optimizer.minimize / apply_gradients or with global_step.assign_add(1).",
                5,
                self._step_before,
                self._last_global_step,
            )
        self._last_global_step = self._step_before

    def end(self, session: Any = None) -> None:
        if not self._logged and session is not None:
            # A run shorter than the period: its rate, once, at the end.
            global_step = read_global_step(session)
            if global_step != self._timer.last_triggered_step():
                # Off the schedule: a restart from a checkpoint saved after
                # it writes its rates at the uninterrupted run's steps.
                elapsed_time, elapsed_steps = self._timer.elapsed_since_trigger(global_step)
                if elapsed_time and elapsed_steps:
                    self._log_and_record(elapsed_steps, elapsed_time, global_step)
        if self._sink is not None:
            self._sink.flush()

    def on_failure(self, session: Any, error: BaseException) -> None:
        """Flushes the rates written so far: the process may end with the error."""
        if self._sink is not None:
            self._sink.flush()
