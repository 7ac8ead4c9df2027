"""The public helpers hook families use: fetch resolution, scalar checks, the harness."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import monsession
import monsession.testing


@pytest.fixture(autouse=True)
def fresh_default_graph():
    tf.compat.v1.reset_default_graph()
    yield
    tf.compat.v1.reset_default_graph()


def test_graph_names_resolve_to_tensors_of_the_default_graph():
    with tf.Graph().as_default():
        loss = tf.constant(1.0, name="loss")
        pair = tf.unstack(tf.constant([1.0, 2.0]), name="pair")
        assert monsession.plugins.resolve_fetch("Hook", "tensor", "loss") is loss
        assert monsession.plugins.resolve_fetch("Hook", "tensor", "loss:0") is loss
        assert monsession.plugins.resolve_fetch("Hook", "tensor", loss) is loss
        with pytest.raises(
            monsession.plugins.TensorNotFoundError, match="Hook: tensor 'los' names no"
        ):
            monsession.plugins.resolve_fetch("Hook", "tensor", "los")
        with pytest.raises(ValueError, match="ambiguous"):
            monsession.plugins.resolve_fetch("Hook", "tensor", pair[0].op.name)
        with pytest.raises(TypeError, match="only works in eager mode"):
            monsession.plugins.resolve_fetch("Hook", "tensor", lambda: loss)
    with tf.Graph().as_default():
        with pytest.raises(ValueError, match="another graph"):
            monsession.plugins.resolve_fetch("Hook", "tensor", loss)


def test_a_missing_name_is_a_key_error_and_a_value_error():
    with tf.Graph().as_default():
        for kind in (KeyError, ValueError):
            with pytest.raises(kind):
                monsession.plugins.resolve_fetch("Hook", "tensor", "missing")


def test_eager_keeps_names_variables_tensors_and_callables():
    variable = tf.Variable(1.0)
    for target in ("loss", variable, tf.constant(1.0), lambda: variable):
        assert monsession.plugins.resolve_fetch("Hook", "tensor", target) is target
    with pytest.raises(TypeError, match="Hook: in eager mode tensor must be"):
        monsession.plugins.resolve_fetch("Hook", "tensor", 3)


def test_check_scalar():
    monsession.plugins.check_scalar("Hook", "loss", "x", tf.float32, [])
    monsession.plugins.check_scalar("Hook", "loss", "x", np.float64, [1, 1])
    monsession.plugins.check_scalar("Hook", "loss", "x", tf.int32, None, floating=False)
    with pytest.raises(
        TypeError, match="Hook: loss must be a scalar float tensor; x has dtype int32"
    ):
        monsession.plugins.check_scalar("Hook", "loss", "x", tf.int32, [])
    with pytest.raises(TypeError, match="numeric"):
        monsession.plugins.check_scalar("Hook", "loss", "x", tf.bool, [], floating=False)
    with pytest.raises(ValueError, match=r"x has shape \[2\]"):
        monsession.plugins.check_scalar("Hook", "loss", "x", tf.float32, [2])


class Recorder(monsession.SessionRunHook):
    def __init__(self, fetch):
        self.fetch = fetch
        self.seen = []

    def before_run(self, run_context):
        return monsession.SessionRunArgs(self.fetch)

    def after_run(self, run_context, run_values):
        self.seen.append((run_values.results, run_context.global_step_after()))
        if len(self.seen) == 2:
            run_context.request_stop()


def test_hooked_session_runs_hooks_with_the_step_service_in_graph_mode():
    with tf.Graph().as_default():
        step = monsession.get_or_create_global_step()
        train = tf.compat.v1.assign_add(step, 1)
        value = tf.constant(5)
        hook = Recorder(value)
        with tf.compat.v1.Session() as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            hooked = monsession.testing.hooked_session(sess, [hook])
            hooked.run(train)
            assert not hooked.should_stop()
            hooked.run(train)
            assert hooked.should_stop()
    assert hook.seen == [(5, 1), (5, 2)]


def test_hooked_session_in_eager_mode():
    step = monsession.get_or_create_global_step()
    hook = Recorder("loss")
    hooked = monsession.testing.hooked_session(monsession.EagerSession(), [hook])
    for _ in range(2):
        hooked.run(lambda: {"loss": tf.constant(2.0), "step": step.assign_add(1)})
    assert hook.seen == [(2.0, 1), (2.0, 2)]


def test_steps_called_sees_the_step_of_a_call():
    """`monsession.plugins.steps_called`: how a hook that wraps the step finds it in a run."""
    step_variable = monsession.get_or_create_global_step()

    @tf.function
    def train():
        step_variable.assign_add(1)

    class Seen(monsession.SessionRunHook):
        def __init__(self):
            self.steps = []

        def before_run(self, run_context):
            self.steps.append(monsession.plugins.steps_called(run_context.original_args.fetches))

    seen = Seen()
    with monsession.MonitoredSession(hooks=[seen]) as sess:
        sess.run(train)
        sess.call(train)
        sess.run({"train": train, "step": step_variable})
    assert [[step is train for step in steps] for steps in seen.steps] == [[True]] * 3
