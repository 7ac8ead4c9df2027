"""What the monitored session offers the rest of core: its hooks, its steps, its creation.

`Epochs.run` runs its batches through `run` (`LoopSession`) with the
session's `dispatcher`: these are the session's own methods, not its
private attributes.
"""

from __future__ import annotations

import pytest
import tensorflow as tf

import monsession
from monsession._durability._retry import RetryPolicy
from monsession._fusion._loop import BoundStep


class Ender(monsession.SessionRunHook):
    def __init__(self, calls, fail_with=None):
        self.calls = calls
        self.fail_with = fail_with

    def end(self, session):
        self.calls.append("end")
        if self.fail_with is not None:
            raise self.fail_with


def test_a_session_whose_hooks_end_raises_is_closed_all_the_same(graph):
    monsession.get_or_create_global_step()
    calls = []
    sess = monsession.MonitoredSession(hooks=[Ender(calls, fail_with=OSError("disk full"))])
    with pytest.raises(OSError, match="disk full"):
        sess.close()
    assert calls == ["end"]
    assert sess.should_stop() and sess._is_closed()


def test_hooks_are_the_sessions_own_in_order(graph):
    monsession.get_or_create_global_step()
    first, second = Ender([]), Ender([])
    with monsession.MonitoredSession(hooks=[first, second]) as sess:
        assert sess.dispatcher.hooks == (first, second)
        assert sess.recoveries == 0


class QuickRetries(monsession.ChiefSessionCreator):
    """Re-creates the session without waiting (the policy `test_retries` uses)."""

    retry_policy = RetryPolicy(initial_backoff_secs=0.01, max_backoff_secs=0.01)


def test_a_bound_step_runs_and_one_not_to_rerun_returns_none_after_a_recovery():
    """`Epochs.run`'s contract: a step not to retry returns `None` after a recovery."""
    tf.compat.v1.reset_default_graph()
    global_step = monsession.get_or_create_global_step()
    calls = []

    @tf.function
    def step(amount):
        return {"step": global_step.assign_add(amount)}

    def preempted(amount):
        calls.append("preempted")
        raise tf.errors.UnavailableError(None, None, "connection reset")

    try:
        with monsession.MonitoredSession(QuickRetries(), hooks=[Ender(calls)]) as sess:
            out = sess.run(BoundStep(step, (tf.constant(2, tf.int64),), {}))
            assert int(out["step"]) == 2
            assert sess.run(BoundStep(preempted, (1,), {}, retry=False)) is None
            assert sess.recoveries == 1
        assert calls == ["preempted", "end"]  # Not retried.
    finally:
        tf.compat.v1.reset_default_graph()


def _saved_graph_checkpoint(directory):
    """A graph-mode checkpoint of a global step at 7 in `directory`; its prefix."""
    with tf.Graph().as_default():
        step = monsession.get_or_create_global_step()
        with tf.compat.v1.Session() as sess:
            sess.run(step.initializer)
            sess.run(step.assign(7))
            return tf.compat.v1.train.Saver().save(sess, str(directory / "model.ckpt"), 7)


def test_the_chief_creator_returns_the_checkpoint_it_restored_graph(tmp_path):
    prefix = _saved_graph_checkpoint(tmp_path)
    with tf.Graph().as_default():
        step = monsession.get_or_create_global_step()
        creator = monsession.ChiefSessionCreator(checkpoint_dir=str(tmp_path))
        created = creator.create_restored()
        assert created.restored_from == prefix
        assert created.session.run(step) == 7
        created.session.close()
    with tf.Graph().as_default():
        monsession.get_or_create_global_step()
        created = monsession.ChiefSessionCreator(
            checkpoint_dir=str(tmp_path / "none")
        ).create_restored()
        assert created.restored_from is None
        created.session.close()


def test_the_chief_creator_returns_the_checkpoint_it_restored_eager(tmp_path):
    weight = tf.Variable(3.0)
    prefix = tf.train.Checkpoint(weight=weight).save(str(tmp_path / "ckpt"))
    weight.assign(0.0)
    scaffold = monsession.Scaffold(saver=tf.train.Checkpoint(weight=weight))
    created = monsession.ChiefSessionCreator(
        scaffold, checkpoint_dir=str(tmp_path)
    ).create_restored()
    assert created.restored_from == prefix
    assert float(weight.numpy()) == 3.0
    fresh = monsession.ChiefSessionCreator(checkpoint_dir=str(tmp_path / "none")).create_restored()
    assert fresh.restored_from is None
