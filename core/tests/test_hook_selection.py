"""`run(..., hooks=...)`: one call with some of the session's hooks, or none."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import tensorflow as tf

import monsession


class Recorder(monsession.SessionRunHook):
    """Records the calls it sees and the global steps the session gives it."""

    def __init__(self, name, calls):
        self.name = name
        self.calls = calls
        self.created = 0
        self.steps = []  # (before, after) per run seen.

    def after_create_session(self, session, coord):
        self.created += 1

    def before_run(self, run_context):
        self.calls.append(f"{self.name}.before")
        self._before = run_context.global_step

    def after_run(self, run_context, run_values):
        self.calls.append(f"{self.name}.after")
        self.steps.append((self._before, run_context.global_step_after()))


def _evaluation(program):
    """A fetch that reads the loss and does not advance the global step."""
    if program.mode == "graph":
        return program.loss
    weight = program.weight
    return tf.function(lambda: tf.square(weight))


def test_hooks_argument_runs_the_chosen_hooks_in_session_order(program):
    calls = []
    first, second = Recorder("first", calls), Recorder("second", calls)
    with monsession.MonitoredSession(
        monsession.ChiefSessionCreator(program.scaffold()), hooks=[first, second]
    ) as sess:
        sess.run(program.step)
        assert calls == ["first.before", "second.before", "first.after", "second.after"]
        calls.clear()
        sess.run(program.step, hooks=[second, first])
        assert calls == ["first.before", "second.before", "first.after", "second.after"]
        calls.clear()
        sess.run(program.step, hooks=[second])
        assert calls == ["second.before", "second.after"]
        calls.clear()
        loss = sess.run(_evaluation(program), hooks=[])
        assert calls == []
        sess.run(program.step)
        assert calls == ["first.before", "second.before", "first.after", "second.after"]
    assert float(loss) > 0


def test_evaluations_without_hooks_do_not_shift_step_based_hooks(program, caplog):
    calls = []
    recorder = Recorder("recorder", calls)
    stop = monsession.StopAtStepHook(last_step=5)
    evaluation = _evaluation(program)
    runs = 0
    with caplog.at_level(logging.WARNING, logger="monsession"):
        with monsession.MonitoredSession(
            monsession.ChiefSessionCreator(program.scaffold()), hooks=[stop, recorder]
        ) as sess:
            while not sess.should_stop():
                sess.run(evaluation, hooks=[])
                sess.run(evaluation, hooks=[])
                sess.run(program.step)
                runs += 1
    # Every training run, and only those, advanced the step by one, and the
    # hooks saw exactly that; StopAtStepHook stopped at step 5.
    assert runs == 5
    assert recorder.steps == [(step, step + 1) for step in range(5)]
    assert not [r for r in caplog.records if "global step" in r.getMessage()]


def test_a_chosen_hook_sees_the_exact_step_of_a_call_that_does_not_advance_it(program):
    calls = []
    recorder = Recorder("recorder", calls)
    evaluation = _evaluation(program)
    with monsession.MonitoredSession(
        monsession.ChiefSessionCreator(program.scaffold()), hooks=[recorder]
    ) as sess:
        sess.run(program.step)
        sess.run(evaluation, hooks=[recorder])
        sess.run(program.step, hooks=[recorder])
        sess.run(program.step)
    assert recorder.steps == [(0, 1), (1, 1), (1, 2), (2, 3)]


class AbortOnce:
    """A feed value whose conversion by TensorFlow raises AbortedError, the first time only.

    No TensorFlow kernel on one machine reports a preemption (tf.py_function
    turns a Python AbortedError into UnknownError), so the error is raised
    where TensorFlow converts the fed value: inside `Session.run` in graph
    mode, inside `tf.convert_to_tensor` in the eager step.
    """

    def __init__(self):
        self.raised = 0

    def __array__(self, dtype=None, copy=None):
        if not self.raised:
            self.raised += 1
            raise tf.errors.AbortedError(None, None, "injected preemption")
        return np.array(0.5, dtype=np.float32)


def _evaluation_fed(program):
    """An evaluation that takes a fed `lr` and does not advance the global step."""
    if program.mode == "graph":
        return program.loss * program.lr, program.lr
    weight = program.weight

    def evaluate(lr):
        return tf.square(weight) * tf.convert_to_tensor(lr, tf.float32)

    return evaluate, "lr"


def test_a_call_without_hooks_recovers_from_a_preemption(program, caplog):
    calls = []
    recorder = Recorder("recorder", calls)
    fetch, feed_key = _evaluation_fed(program)
    abort = AbortOnce()
    with caplog.at_level(logging.INFO, logger="monsession"):
        with monsession.MonitoredSession(
            monsession.ChiefSessionCreator(program.scaffold()), hooks=[recorder]
        ) as sess:
            sess.run(program.step)
            value = sess.run(fetch, feed_dict={feed_key: abort}, hooks=[])
            assert abort.raised == 1
            assert recorder.created == 2  # The session was re-created.
            assert calls == ["recorder.before", "recorder.after"]  # Not called for the retry.
            sess.run(program.step)
    assert float(value) > 0
    assert any("injected preemption" in r.getMessage() for r in caplog.records)


def test_a_chosen_hook_can_stop_the_session(program):
    stop = monsession.StopAtStepHook(num_steps=1)
    calls = []
    other = Recorder("other", calls)
    with monsession.MonitoredSession(
        monsession.ChiefSessionCreator(program.scaffold()), hooks=[stop, other]
    ) as sess:
        sess.run(program.step, hooks=[stop])
        assert sess.should_stop()
        with pytest.raises(RuntimeError, match="should_stop"):
            sess.run(program.step, hooks=[])
    assert calls == []


def test_hooks_argument_must_name_the_sessions_own_hooks(graph):
    global_step = monsession.get_or_create_global_step()
    own = Recorder("own", [])
    with monsession.MonitoredSession(hooks=[own]) as sess:
        with pytest.raises(ValueError, match=r"hooks\[1\] is .*Recorder.*not one of the hooks"):
            sess.run(global_step, hooks=[own, Recorder("foreign", [])])
        with pytest.raises(TypeError, match="hooks must be an iterable"):
            sess.run(global_step, hooks=own)
        assert sess.run(global_step, hooks=[own]) == 0


@pytest.fixture
def owned_step():
    """Eager mode without a global step: the session creates and owns one."""
    tf.compat.v1.reset_default_graph()
    yield
    tf.compat.v1.reset_default_graph()


def test_a_gan_loop_with_chosen_hooks_stops_on_the_session_owned_step(owned_step):
    generated, critic = tf.Variable(0.0), tf.Variable(1.0)

    @tf.function
    def discriminator_step():
        critic.assign_sub(0.2 * (critic - generated))
        return {"d_loss": tf.square(critic - generated)}

    @tf.function
    def generator_step():
        generated.assign_sub(0.2 * (generated - 3.0))
        return {"g_loss": tf.square(generated - 3.0)}

    @tf.function
    def evaluate():
        return tf.abs(generated - 3.0)

    calls = []
    d_log, g_log = Recorder("d", calls), Recorder("g", calls)
    stop = monsession.StopAtStepHook(last_step=4)
    rounds = 0
    with monsession.MonitoredSession(hooks=[stop, d_log, g_log]) as sess:
        while not sess.should_stop() and rounds < 20:
            sess.run(discriminator_step, hooks=[d_log])  # Not a training step (the default).
            sess.run(generator_step, hooks=[stop, g_log], training=True)
            if not sess.should_stop():
                sess.run(evaluate, hooks=[])
            rounds += 1
        global_step = monsession.get_global_step()
    assert rounds == 4 and int(global_step.numpy()) == 4
    assert d_log.steps == [(0, 0), (1, 1), (2, 2), (3, 3)]
    assert g_log.steps == [(0, 1), (1, 2), (2, 3), (3, 4)]


def test_a_call_with_every_hook_that_is_not_training_is_neither_counted_nor_fused(owned_step):
    evaluations = tf.Variable(0)

    @tf.function
    def train():
        return {"loss": tf.constant(1.0)}

    @tf.function
    def evaluate():
        evaluations.assign_add(1)
        return {"accuracy": tf.constant(0.5)}

    stop = monsession.StopAtStepHook(last_step=6)
    with monsession.MonitoredSession(hooks=[stop], steps_per_execution="auto") as sess:
        sess.run(evaluate, training=False)
        global_step = monsession.get_global_step()
        assert int(evaluations.numpy()) == 1 and int(global_step.numpy()) == 0
        sess.run(train)  # Fused: up to the last step.
        assert int(global_step.numpy()) == 6 and sess.should_stop()
    assert int(evaluations.numpy()) == 1


@pytest.mark.parametrize("value", ["yes", 1, [True]])
def test_training_must_be_a_bool_or_none(graph, value):
    global_step = monsession.get_or_create_global_step()
    with monsession.MonitoredSession() as sess:
        with pytest.raises(TypeError, match=r"MonitoredSession.run\(\): training must be True"):
            sess.run(global_step, training=value)
        assert sess.run(global_step, training=False) == 0


def test_a_training_call_with_chosen_hooks_is_counted_in_both_modes(program, caplog):
    calls = []
    recorder, other = Recorder("recorder", calls), Recorder("other", calls)
    stop = monsession.StopAtStepHook(last_step=3)
    with caplog.at_level(logging.WARNING, logger="monsession"):
        with monsession.MonitoredSession(
            monsession.ChiefSessionCreator(program.scaffold()), hooks=[stop, recorder, other]
        ) as sess:
            while not sess.should_stop():
                sess.run(program.step, hooks=[stop, recorder], training=True)
    assert recorder.steps == [(0, 1), (1, 2), (2, 3)] and other.steps == []
    assert not [r for r in caplog.records if "global step" in r.getMessage()]
