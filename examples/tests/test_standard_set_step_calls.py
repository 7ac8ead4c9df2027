"""What one step of the standard hook set costs in Python, counted instead of timed.

The standard set of the benchmarks (`benchmarks/bench_core.py`): StopAtStepHook,
LoggingTensorHook, StepCounterHook and SummarySaverHook every 100 steps,
NanTensorHook, CheckpointSaverHook every 600 s. As `core/tests/test_step_calls.py`
does for single hooks, this counts the calls of monsession's code (core and the
hook families) in each of 300 steps: the counts repeat every 100 steps, the
most is a step where the set is due, the fewest a step where only the
every-step hooks act, and each is within its budget.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

import pytest
import tensorflow as tf

import monsession
import monsession_hooks_checkpoint
import monsession_hooks_debug
import monsession_hooks_logging
import monsession_hooks_summary
from monsession import hooks

_OWN = tuple(
    os.path.dirname(package.__file__)
    for package in (
        monsession,
        monsession_hooks_checkpoint,
        monsession_hooks_debug,
        monsession_hooks_logging,
        monsession_hooks_summary,
    )
)

# Calls of monsession's functions (core and families) in one step (issue 51's step plan;
# graph 158/109, eager 195/152 at b72befc; 138/93, 168/127 at efcbbb8; eager 136/98 at
# 707a0e4, before a step called only the hooks acting on it: NanTensorHook alone on most;
# graph 116/68, eager 118/52 at 734859f, before NanTensorHook's per-step cuts of 207ee12).
BUDGET = {
    ("graph", "due"): 113,
    ("graph", "idle"): 65,
    ("eager", "due"): 114,
    ("eager", "idle"): 48,
}
_STEPS = 300
_NEVER = 10**9


def _own_calls(step: Callable[[], object]) -> int:
    calls = 0

    def profile(frame, event, arg):
        nonlocal calls
        if event == "call" and frame.f_code.co_filename.startswith(_OWN):
            calls += 1

    sys.setprofile(profile)
    try:
        step()
    finally:
        sys.setprofile(None)
    return calls


def _counts(session, fetches) -> list[int]:
    for _ in range(100):  # Traces and caches; the timers' first triggers.
        session.run(fetches)
    return [_own_calls(lambda: session.run(fetches)) for _ in range(_STEPS)]


def _graph_counts(directory: str) -> list[int]:
    with tf.Graph().as_default():
        global_step = tf.compat.v1.train.get_or_create_global_step()
        weight = tf.compat.v1.get_variable("weight", initializer=1.0)
        loss = tf.identity(weight * 2.0, name="loss")
        summary = tf.compat.v1.summary.scalar("loss", loss)
        train = tf.group(weight.assign_add(1.0), global_step.assign_add(1))
        standard = [
            monsession.StopAtStepHook(last_step=_NEVER),
            hooks.LoggingTensorHook({"loss": loss}, every_n_iter=100),
            hooks.NanTensorHook(loss),
            hooks.StepCounterHook(every_n_steps=100, output_dir=directory),
            hooks.SummarySaverHook(save_steps=100, output_dir=directory, summary_op=summary),
            hooks.CheckpointSaverHook(directory, save_secs=600),
        ]
        with monsession.MonitoredSession(hooks=standard) as session:
            return _counts(session, train)


def _eager_counts(directory: str) -> list[int]:
    weight = tf.Variable(1.0)
    global_step = tf.compat.v1.train.get_or_create_global_step()

    @tf.function
    def step():
        weight.assign_add(1.0)
        global_step.assign_add(1)
        loss = weight * 2.0
        tf.summary.scalar("loss", loss)
        return {"loss": loss}

    checkpoint = tf.train.Checkpoint(step=global_step, weight=weight)
    standard = [
        monsession.StopAtStepHook(last_step=_NEVER),
        hooks.LoggingTensorHook({"loss": "loss"}, every_n_iter=100),
        hooks.NanTensorHook("loss"),
        hooks.StepCounterHook(every_n_steps=100, output_dir=directory),
        hooks.SummarySaverHook(save_steps=100, output_dir=directory),
        hooks.CheckpointSaverHook(directory, save_secs=600, saver=checkpoint),
    ]
    with monsession.MonitoredSession(hooks=standard) as session:
        return _counts(session, step)


@pytest.mark.parametrize("mode", ["graph", "eager"])
def test_a_step_of_the_standard_set_runs_no_more_of_our_python_than_its_budget(mode, tmp_path):
    counts = _graph_counts(str(tmp_path)) if mode == "graph" else _eager_counts(str(tmp_path))
    assert counts[:100] == counts[100:200] == counts[200:], "the calls differ between periods"
    measured = {"due": max(counts), "idle": min(counts)}
    over = {kind: calls for kind, calls in measured.items() if calls > BUDGET[(mode, kind)]}
    assert not over, (
        f"{mode}, standard set: one step calls {over} of monsession's functions, over the "
        f"budgets {BUDGET}"
    )
