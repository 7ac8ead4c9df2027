"""An error that ends the session loses none of the summaries and rates written before it.

TensorFlow's writers flush every 120 s (or every 10 events); the hooks
flush in `on_failure()`, so what they recorded is on disk when the error
leaves the `with` block, before the process (maybe) ends with it.
"""

from __future__ import annotations

import contextlib

import pytest
import tensorflow as tf
from summary_testing import eager_program, graph_program, tag_steps

import monsession
from monsession_hooks_summary import StepCounterHook, SummarySaverHook


class FailsAt(monsession.SessionRunHook):
    """Raises a plain error after the run that reaches `step`."""

    def __init__(self, step: int) -> None:
        self._step = step

    def after_run(self, run_context, run_values):
        if run_context.global_step_after() >= self._step:
            raise RuntimeError(f"failed at step {self._step}")


@pytest.mark.parametrize("mode", ["graph", "eager"])
def test_summaries_and_rates_are_on_disk_when_the_error_leaves_the_session(tmp_path, mode):
    summaries_dir, rates_dir = tmp_path / "summary", tmp_path / "steps"
    with tf.Graph().as_default() if mode == "graph" else contextlib.nullcontext():
        program = graph_program() if mode == "graph" else eager_program()
        step = program.train_op if mode == "graph" else program.step
        summary_op = {"summary_op": program.summary_op} if mode == "graph" else {}
        hooks = [
            SummarySaverHook(save_steps=1, output_dir=str(summaries_dir), **summary_op),
            StepCounterHook(every_n_steps=1, output_dir=str(rates_dir)),
            FailsAt(4),
        ]
        with pytest.raises(RuntimeError, match="failed at step 4"):
            with monsession.MonitoredSession(hooks=hooks) as session:
                while True:
                    session.run(step)
        # Read before anything else could flush the writers.
        assert tag_steps(summaries_dir)["loss"] == [1, 2, 3, 4]
        assert tag_steps(rates_dir)["global_step/sec"] == [2, 3, 4]
