"""Eager steps called straight through their trace: what a `tf.function` call would do."""

from __future__ import annotations

import pytest
import tensorflow as tf

import monsession


@pytest.fixture(autouse=True)
def fresh_global_step():
    tf.compat.v1.reset_default_graph()
    yield
    tf.compat.v1.reset_default_graph()
    tf.config.run_functions_eagerly(False)


def _counting_step(owned: bool = False):
    """A step and the list its Python appends to; `owned`: the session advances the step."""
    global_step = None if owned else monsession.get_or_create_global_step()
    pythons = []

    @tf.function
    def step():
        pythons.append(1)  # Python: runs when traced, or every call when run eagerly.
        if global_step is None:
            return {"step": tf.constant(0, tf.int64)}
        return {"step": global_step.assign_add(1)}

    return step, pythons


@pytest.mark.parametrize("steps_per_execution", [1, "auto"])
def test_steps_run_the_trace_once_traced(steps_per_execution):
    step, pythons = _counting_step()
    with monsession.MonitoredSession(
        hooks=[monsession.StopAtStepHook(last_step=6)], steps_per_execution=steps_per_execution
    ) as session:
        outputs = []
        while not session.should_stop():
            outputs.append(int(session.run(step)["step"]))
    # Each call returns the outputs of its last step (fused: the sixth).
    assert outputs == ([1, 2, 3, 4, 5, 6] if steps_per_execution == 1 else [6])
    assert int(tf.compat.v1.train.get_global_step().numpy()) == 6
    assert step.experimental_get_tracing_count() == len(pythons) == 1


@pytest.mark.parametrize("owned", [False, True])
def test_run_functions_eagerly_runs_the_python_of_every_step(owned):
    step, pythons = _counting_step(owned)
    with monsession.MonitoredSession() as session:
        session.run(step)  # Traced: later calls could go straight to the trace.
        tf.config.run_functions_eagerly(True)
        for _ in range(3):
            session.run(step)
    assert len(pythons) == 1 + 3
    assert int(tf.compat.v1.train.get_global_step().numpy()) == 4
