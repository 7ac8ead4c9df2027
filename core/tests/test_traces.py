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


@pytest.mark.parametrize("owned", [False, True])
def test_a_step_called_with_tensors_runs_the_trace_of_their_signature(owned):
    global_step = None if owned else monsession.get_or_create_global_step()
    pythons = []

    @tf.function
    def step(x, y):
        pythons.append(x.shape[0])  # Python: runs when traced.
        if global_step is not None:
            global_step.assign_add(1)
        return {"sum": tf.reduce_sum(x) + tf.reduce_sum(y)}

    batch = (tf.ones([4]), tf.ones([4]))
    last = (tf.ones([3]), tf.ones([3]))  # A last, smaller batch: a signature of its own.
    with monsession.MonitoredSession() as session:
        sums = [float(session.call(step, *batch)["sum"]) for _ in range(3)]
        sums.append(float(session.call(step, *last)["sum"]))
        sums += [float(session.call(step, *batch)["sum"]) for _ in range(2)]
        sums.append(float(session.call(step, *last)["sum"]))
        traces = session._tf_sess().traces
        held = traces._by_signature[step if not owned else traces_key(step)][1]
    assert sums == [8.0, 8.0, 8.0, 6.0, 8.0, 8.0, 6.0]
    assert pythons == [4, 3]  # Traced once per signature; every other call ran a trace.
    assert sorted(shape for ((_, shape), _) in held) == [(3,), (4,)]
    assert int(tf.compat.v1.train.get_global_step().numpy()) == 7


def traces_key(step):
    """The function the session calls for `step` when it advances its own global step."""
    from monsession._backends._eager import owned_global_step
    from monsession._backends._eager_calls import advancing

    return advancing(step, owned_global_step())


def test_a_step_whose_parameter_is_left_to_its_default_goes_through_the_function():
    monsession.get_or_create_global_step()

    two = tf.constant(2.0)

    @tf.function
    def step(x, scale=two):
        return {"out": tf.reduce_sum(x) * scale}

    with monsession.MonitoredSession() as session:
        outs = [float(session.call(step, tf.ones([2]))["out"]) for _ in range(3)]
        assert step not in session._tf_sess().traces._by_signature
    assert outs == [4.0, 4.0, 4.0]


def test_a_graph_program_that_never_ran_eagerly_closes_its_session(tmp_path):
    """The eager modules load lazily; loading them under a finalized graph must build nothing."""
    import subprocess
    import sys

    program = tmp_path / "graph_program.py"
    program.write_text(
        "import tensorflow as tf\n"
        "import monsession\n"
        "tf.compat.v1.disable_eager_execution()\n"
        "step = monsession.get_or_create_global_step()\n"
        "train = step.assign_add(1)\n"
        "hooks = [monsession.StopAtStepHook(last_step=3)]\n"
        "with monsession.MonitoredSession(hooks=hooks) as session:\n"
        "    while not session.should_stop():\n"
        "        session.run(train)\n"
        "print('closed')\n",
        encoding="utf-8",
    )
    done = subprocess.run(
        [sys.executable, str(program)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["closed"]
