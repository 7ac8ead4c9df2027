"""`StepCounterHook`: logs and records how many global steps run per second."""

from __future__ import annotations

import logging
import os
from typing import Any

from monsession import (
    SecondOrStepTimer,
    SessionRunArgs,
    SessionRunContext,
    SessionRunHook,
    SessionRunValues,
)
from monsession_hooks_summary._sinks import EagerSink, GraphSink, open_sink
from monsession_hooks_summary._step import GlobalStep

logger = logging.getLogger("monsession.summary")

_NAME = "StepCounterHook"


def _tf_logging() -> Any:
    """TensorFlow's logging module, looked up at call time (TensorFlow's tests patch it)."""
    from tensorflow.python.platform import tf_logging

    return tf_logging


class StepCounterHook(SessionRunHook):
    """Logs the global steps per second, and writes them as `<global step name>/sec`.

    Every `every_n_steps` steps (or `every_n_secs` seconds) it logs the rate
    since the last trigger and, when it has a writer, writes it as a scalar
    summary at the current global step (tag ``global_step/sec`` for the usual
    global step). It warns when the global step did not advance over a step.

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

    Raises:
      ValueError: If both or neither of `every_n_steps` and `every_n_secs`
        are given.
    """

    def __init__(
        self,
        every_n_steps: int | None = 100,
        every_n_secs: float | None = None,
        output_dir: str | os.PathLike[str] | None = None,
        summary_writer: Any = None,
    ) -> None:
        if (every_n_steps is None) == (every_n_secs is None):
            raise ValueError(
                f"{_NAME}: exactly one of every_n_steps and every_n_secs should be provided; "
                f"got every_n_steps={every_n_steps!r}, every_n_secs={every_n_secs!r}."
            )
        self._timer = SecondOrStepTimer(every_steps=every_n_steps, every_secs=every_n_secs)
        self._summary_writer = summary_writer
        self._output_dir = output_dir
        self._last_global_step: int | None = None
        self._steps_per_run = 1

    def _set_steps_per_run(self, steps_per_run: int) -> None:
        """Sets how many global steps one `run()` advances (TPU-style loops)."""
        self._steps_per_run = steps_per_run

    def begin(self) -> None:
        self._step = GlobalStep(_NAME)
        self._request = SessionRunArgs(self._step.fetch)  # The same every step.
        self._sink: GraphSink | EagerSink | None = open_sink(
            _NAME, self._summary_writer, self._output_dir, self._step.eager
        )
        if self._sink is not None:
            self._summary_writer = self._sink.writer
        self._summary_tag = self._step.name + "/sec"

    def before_run(self, run_context: SessionRunContext) -> SessionRunArgs:
        return self._request

    def _log_and_record(self, elapsed_steps: int, elapsed_time: float, global_step: int) -> None:
        """Logs and writes the rate of `elapsed_steps` steps over `elapsed_time` seconds."""
        steps_per_sec = elapsed_steps / elapsed_time
        if self._sink is not None:
            self._sink.scalar(self._summary_tag, steps_per_sec, global_step)
        logger.info("%s: %g", self._summary_tag, steps_per_sec)

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        fetched = run_values.results
        fetched_step = int(fetched)
        if self._timer.should_trigger_for_step(
            self._step.estimate_after_step(fetched_step, self._steps_per_run)
        ):
            global_step = self._step.after_step(run_context, fetched)
            if self._timer.should_trigger_for_step(global_step):
                elapsed_time, elapsed_steps = self._timer.update_last_triggered_step(global_step)
                # A clock that did not move (coarse timers) gives no rate.
                if elapsed_time and elapsed_steps is not None:
                    self._log_and_record(elapsed_steps, elapsed_time, global_step)
        # Compare the fetched values themselves: the timer may have skipped steps.
        if fetched_step == self._last_global_step:
            # Some optimizers (e.g. SyncReplicasOptimizer on workers) do not
            # advance the global step on every run, hence only the first few.
            _tf_logging().log_first_n(
                _tf_logging().WARN,
                "StepCounterHook: it seems that the global step (tf.train.get_global_step) "
                "has not been increased. Current value (could be stable): %s vs previous "
                "value: %s. Increase it in the step, e.g. by passing the global step to "
                "Optimizer.minimize / apply_gradients or with global_step.assign_add(1).",
                5,
                fetched,
                self._last_global_step,
            )
        self._last_global_step = fetched_step

    def end(self, session: Any = None) -> None:
        if self._sink is not None:
            self._sink.flush()
