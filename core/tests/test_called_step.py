"""Eager mode: `sess.run(train_step())`, a step's outputs instead of the step.

An error where the run can only be a mistake (the session owns the global
step, or the program's global step moved outside the session), a WARNING
otherwise, and nothing for valid programs: a step, tensors fetched beside
it, variables read.
"""

from __future__ import annotations

import logging

import pytest
import tensorflow as tf

import monsession

FIX = "pass the step itself: sess.run(train_step), not sess.run(train_step())"
WARNED = "values already computed, instead of a step to run"


@pytest.fixture(autouse=True)
def fresh_eager_state():
    tf.compat.v1.reset_default_graph()  # A fresh global step.
    yield
    tf.compat.v1.reset_default_graph()


def make_step(global_step=None):
    """A `tf.function` step that trains a weight (and advances `global_step`, if given)."""
    weight = tf.Variable(1.0)

    @tf.function
    def train_step():
        weight.assign(weight * 0.5)
        if global_step is not None:
            global_step.assign_add(1)
        return {"loss": weight.read_value()}

    return train_step


def warnings_of(caplog):
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "monsession" and r.levelno >= logging.WARNING
    ]


def test_called_step_with_an_owned_global_step_is_an_error(caplog):
    train_step = make_step()  # The program makes no global step: the session owns one.
    hooks = [monsession.StopAtStepHook(last_step=5)]
    with pytest.raises(TypeError) as raised, monsession.MonitoredSession(hooks=hooks) as sess:
        sess.run(train_step())
    assert str(raised.value) == (
        "MonitoredSession.run() was given a dict of 1 tensor, values already computed, instead "
        f"of a step to run: in eager mode run() calls the step; {FIX}. This run calls nothing, "
        "and the global step, which the session advances for each step it calls, would stay at "
        "0: StopAtStepHook and every step-based hook would never act."
    )
    assert warnings_of(caplog) == []


def test_called_step_that_advances_the_programs_global_step_is_an_error():
    global_step = monsession.get_or_create_global_step()
    train_step = make_step(global_step)
    with pytest.raises(TypeError) as raised, monsession.MonitoredSession() as sess:
        sess.run(train_step()["loss"])
    assert str(raised.value) == (
        "MonitoredSession.run() was given a tensor, values already computed, instead of a step "
        f"to run: in eager mode run() calls the step; {FIX}. The global step moved from 0 to 1 "
        "outside the session, so a step ran outside it: its hooks would see the wrong steps."
    )


def test_values_alone_otherwise_warn_once_and_are_returned(caplog):
    global_step = monsession.get_or_create_global_step()
    train_step = make_step()  # Does not advance the program's global step.
    with monsession.MonitoredSession() as sess:
        first = sess.run([train_step()["loss"], tf.constant(2.0)])
        sess.run(train_step())
    assert [float(value) for value in first] == [0.5, 2.0]
    [warning] = warnings_of(caplog)
    assert warning == (
        "MonitoredSession.run() was given a list of 2 tensors, values already computed, instead "
        "of a step to run: in eager mode run() calls the step, so this run calls nothing and "
        f"advances no step. If you wrote sess.run(train_step()), {FIX}. (Logged once per "
        "session.)"
    )
    assert int(global_step.numpy()) == 0


def test_values_alone_without_a_global_step_warn(caplog):
    session = monsession.EagerSession()
    hooked = monsession.testing.hooked_session(session, [monsession.SessionRunHook()])
    value = hooked.run(tf.constant(3.0))
    assert float(value) == 3.0
    assert monsession.get_global_step() is None
    [warning] = warnings_of(caplog)
    assert warning.startswith("MonitoredSession.run() was given a tensor, values already")


@pytest.mark.parametrize("owned", [True, False])
def test_valid_runs_get_neither(owned, caplog):
    global_step = None if owned else monsession.get_or_create_global_step()
    train_step = make_step(global_step)
    learning_rate = tf.constant(0.1)
    hooks = [monsession.StopAtStepHook(last_step=5)]
    with monsession.MonitoredSession(hooks=hooks) as sess:
        step = monsession.get_global_step()
        outputs = sess.run({"step": train_step, "lr": learning_rate})  # A tensor beside it.
        assert float(outputs["lr"]) == pytest.approx(0.1)
        assert int(sess.run(step)) == 1  # A variable read alone.
        sess.run([step, learning_rate])  # A read with a tensor beside it.
        while not sess.should_stop():
            sess.run(train_step)
    assert int(step.numpy()) == 5
    assert warnings_of(caplog) == []


@pytest.mark.parametrize(
    "returned", [None, 0.25], ids=["a step returning None", "a step returning a float"]
)
def test_called_step_returning_no_tensor_is_an_error_naming_the_fix(returned):
    with monsession.MonitoredSession() as sess, pytest.raises(TypeError) as raised:
        sess.run(returned)
    assert "in eager mode takes a step: a callable" in str(raised.value)
    assert str(raised.value).endswith(
        "If it is what a step returned, pass the step itself: sess.run(train_step), not "
        "sess.run(train_step())."
    )


@pytest.mark.parametrize("kind", ["operation", "variable", "tensor", "list of operations"])
def test_graph_ops_given_to_a_session_created_outside_the_graph_name_where_to_create_it(kind):
    """The fix is where the session is created, not `sess.run(train_step)`."""
    graph = tf.Graph()
    with graph.as_default():
        increment = tf.compat.v1.train.get_or_create_global_step().assign_add(1)
        fetches = {
            "operation": increment.op,
            "variable": increment,
            "tensor": tf.square(tf.constant(2.0)),
            "list of operations": [increment.op],
        }
    with monsession.MonitoredSession() as sess, pytest.raises(TypeError) as raised:
        sess.run(fetches[kind])
    message = str(raised.value)
    assert "created in eager mode, outside `with graph.as_default():`" in message
    assert "Create the session inside the graph's block" in message
    assert "train_step()" not in message
