"""`monsession.plugins.in_eager_mode`: the mode a hook works for, from the session's mode.

Each test puts it where `tf.executing_eagerly()` gives the other answer.
"""

from __future__ import annotations

import pytest
import tensorflow as tf

import monsession
from monsession.plugins import in_eager_mode


class ModeRecorder(monsession.SessionRunHook):
    """Records, at each call, what `in_eager_mode` answers and what TensorFlow does."""

    def __init__(self):
        self.answers = []

    def _record(self, where, session):
        self.answers.append((where, in_eager_mode(session), tf.executing_eagerly()))

    def after_create_session(self, session, coord):
        self._record("after_create_session", session)

    def before_run(self, run_context):
        self._record("before_run", run_context.session)

    def end(self, session):
        self._record("end", session)


def test_a_graph_session_run_outside_its_graph_block_is_in_graph_mode():
    recorder = ModeRecorder()
    with tf.Graph().as_default():
        step = monsession.get_or_create_global_step()
        train_op = step.assign_add(1)
        assert not in_eager_mode()
        sess = monsession.MonitoredSession(hooks=[recorder])
    sess.run(train_op)  # The program runs it outside the block: TensorFlow is eager here.
    sess.close()
    assert recorder.answers == [
        ("after_create_session", False, False),
        ("before_run", False, True),
        ("end", False, True),
    ]


def test_tensorflows_own_session_is_in_graph_mode_outside_its_graph_block():
    recorder = ModeRecorder()
    with tf.Graph().as_default():
        train_op = tf.compat.v1.train.get_or_create_global_step().assign_add(1)
        sess = tf.compat.v1.train.MonitoredSession(hooks=[recorder])
    sess.run(train_op)
    assert recorder.answers[-1] == ("before_run", False, True)
    sess.close()


def test_a_step_traced_for_an_eager_session_is_in_eager_mode():
    recorder = ModeRecorder()
    traced = []

    @tf.function
    def step():
        traced.append((in_eager_mode(), tf.executing_eagerly()))
        return tf.constant(1.0)

    with monsession.MonitoredSession(hooks=[recorder]) as sess:
        sess.run(step)
    assert traced == [(True, False)]
    assert [answer[:2] for answer in recorder.answers] == [
        ("after_create_session", True),
        ("before_run", True),
        ("end", True),
    ]


def test_a_function_traced_in_a_graph_is_in_graph_mode():
    traced = []

    with tf.Graph().as_default():

        @tf.function
        def inner():
            traced.append(in_eager_mode())
            return tf.constant(1)

        inner()
    assert traced == [False]
    assert in_eager_mode()


def test_epochs_asks_the_session_for_its_mode():
    with tf.Graph().as_default():
        monsession.get_or_create_global_step()
        sess = monsession.MonitoredSession()
    epochs = monsession.Epochs(tf.data.Dataset.range(2), num_epochs=1)
    with sess, pytest.raises(RuntimeError, match=r"Epochs.run\(\) runs a TF2 step function"):
        next(epochs.run(sess, lambda batch: None))  # TensorFlow is eager here; the session is not.
