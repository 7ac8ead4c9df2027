"""The durability contract of background saves (hooks-checkpoint README, "Durability").

* A recovery never restores a checkpoint older than the newest save begun
  before the error: every restore in the process waits for the writes in
  flight.
* A background save counts as done at one point, chosen by the hook, never by
  the writer thread's speed: before the next save, in `end()` /
  `on_failure()`, and when a recovery re-creates the session.
"""

from __future__ import annotations

import logging
import time

import pytest
import tensorflow as tf
from checkpoint_testing import (
    ONLY_CHECKPOINTS,
    CountingListener,
    checkpoint_steps,
    counter_program,
    fresh_eager,
    fresh_graph,
    load_step,
)

import monsession
from monsession_hooks_checkpoint import CheckpointSaverHook

# Large enough that writing it takes far longer than the steps between the
# save and the error: without the wait, the recovery finds the save before.
_BIG = 4_000_000


class AbortOnce(monsession.SessionRunHook):
    """Raises a real `AbortedError` after the step that reaches `at`, once."""

    def __init__(self, at: int) -> None:
        self._at, self.fired = at, False
        self.created_at: list[int] = []

    def after_create_session(self, session, coord):
        self.created_at.append(monsession.plugins.read_global_step(session))

    def after_run(self, run_context, run_values):
        step = run_context.global_step_after()
        if step >= self._at and not self.fired:
            self.fired = True
            raise tf.errors.AbortedError(None, None, f"injected preemption at step {step}")


class StepsAtAfterSave(CountingListener):
    """Records, for each `after_save`, the global step the training had reached."""

    def __init__(self, read_step) -> None:
        super().__init__()
        self.read_step = read_step
        self.reached: list[int] = []

    def after_save(self, session, global_step_value):
        self.reached.append(self.read_step(session))
        return super().after_save(session, global_step_value)


class SlowSteps(monsession.SessionRunHook):
    """Makes each step last a while, as a real model's does (the writer gets ahead)."""

    def after_run(self, run_context, run_values):
        time.sleep(0.05)


def _eager_program(size: int = _BIG):
    global_step = monsession.get_or_create_global_step()
    big = tf.Variable(tf.zeros([size]))

    @tf.function
    def step():
        big.assign_add(tf.ones([size]))
        global_step.assign_add(1)
        return {"step": tf.identity(global_step)}

    return global_step, step, tf.train.Checkpoint(step=global_step, big=big)


@pytest.mark.parametrize("mode", ["eager", "graph"])
def test_a_recovery_restores_the_save_begun_before_the_error(tmp_path, mode):
    """Saves every 5 steps, a real AbortedError after step 12: the recovery restores 10, not 5.

    Then it trains on to step 20 without saving 10 again, and every save is
    confirmed to the listeners once, in order.
    """
    directory = str(tmp_path)
    abort = AbortOnce(at=12)
    listener = StepsAtAfterSave(monsession.plugins.read_global_step)
    context = fresh_eager() if mode == "eager" else fresh_graph()
    with context:
        if mode == "eager":
            _, train, checkpoint = _eager_program()
            scaffold = monsession.Scaffold(saver=checkpoint)
        else:
            _, train, _ = counter_program()
            scaffold = None
        hooks = [
            CheckpointSaverHook(directory, save_steps=5, scaffold=scaffold, listeners=[listener]),
            abort,
            monsession.StopAtStepHook(last_step=20),
        ]
        with monsession.MonitoredTrainingSession(
            checkpoint_dir=directory,
            scaffold=scaffold,
            hooks=hooks,
            save_checkpoint_steps=None,
            save_checkpoint_secs=None,
            **ONLY_CHECKPOINTS,
        ) as sess:
            while not sess.should_stop():
                sess.run(train)
    assert abort.fired
    assert abort.created_at == [0, 10]
    assert listener.saved_steps == [0, 5, 10, 15, 20]
    assert checkpoint_steps(directory)[-1] == 20
    name = "step/.ATTRIBUTES/VARIABLE_VALUE" if mode == "eager" else "global_step"
    assert load_step(tf.train.latest_checkpoint(directory), name) == 20


def test_a_background_save_is_confirmed_at_the_next_save_not_when_the_thread_is_done(
    tmp_path, caplog
):
    """Log lines and `after_save` come at the same steps whatever the writer's speed.

    Each background save is confirmed just before the next one (and the last
    in `end()`): its "after saving" line directly precedes the next "before
    saving" line. Before, it came at the first step after the thread was
    done, between other log lines.
    """
    directory = str(tmp_path)
    with fresh_eager():
        # Small: its thread is done long before the next save.
        global_step, train, checkpoint = _eager_program(size=4)
        listener = StepsAtAfterSave(lambda session: int(global_step.numpy()))
        hook = CheckpointSaverHook(directory, save_steps=4, saver=checkpoint, listeners=[listener])
        with caplog.at_level(logging.INFO, logger="tensorflow"):
            with monsession.SingularMonitoredSession(hooks=[hook, SlowSteps()]) as sess:
                for _ in range(10):
                    sess.run(train)
    assert listener.saved_steps == [0, 4, 8, 10]
    # Confirmed before the save of 4 (at 4), of 8 (at 8), of 10 (in end(), at 10).
    assert listener.reached == [4, 8, 10, 10]
    lines = [
        record.getMessage()
        for record in caplog.records
        if "checkpoint listeners" in record.getMessage()
    ]
    before = "Calling checkpoint listeners before saving checkpoint {}..."
    after = "Calling checkpoint listeners after saving checkpoint {}..."
    assert lines == [
        before.format(0),
        after.format(0),
        before.format(4),
        after.format(4),
        before.format(8),
        after.format(8),
        before.format(10),
        after.format(10),
    ]


def test_a_synchronous_save_is_confirmed_before_the_step_returns(tmp_path):
    """`async_save=False`: durable when the step returns, as in graph mode."""
    directory = str(tmp_path)
    with fresh_eager():
        global_step, train, checkpoint = _eager_program()
        listener = StepsAtAfterSave(lambda session: int(global_step.numpy()))
        hook = CheckpointSaverHook(
            directory, save_steps=4, saver=checkpoint, listeners=[listener], async_save=False
        )
        with monsession.SingularMonitoredSession(hooks=[hook]) as sess:
            for _ in range(10):
                sess.run(train)
                assert tf.train.latest_checkpoint(directory).endswith(
                    f"-{int(global_step.numpy()) // 4 * 4}"
                )
    assert listener.reached == [0, 4, 8, 10]


class SaverSeenAtEnd(monsession.SessionRunHook):
    """Records what the checkpoint saves with asynchronously when its `end()` is called."""

    def __init__(self, checkpoint) -> None:
        self.checkpoint = checkpoint
        self.saver = None

    def end(self, session):
        self.saver = type(self.checkpoint._async_checkpointer_impl).__name__


def test_two_hooks_saving_one_checkpoint_share_its_writer_until_the_last_ends(tmp_path):
    """A user `CheckpointSaverHook` beside the default one, the same `tf.train.Checkpoint`.

    Both save the last step in `end()`. The first hook to end must not give
    the checkpoint its own saver back while the other still saves with it:
    that save would go to TensorFlow's asynchronous saver, which nothing
    waits for, and the session would close with the checkpoint half written.
    """
    directory = str(tmp_path)
    with fresh_eager():
        _, train, checkpoint = _eager_program()
        before = checkpoint._async_checkpointer_impl
        probe = SaverSeenAtEnd(checkpoint)
        hooks = [
            CheckpointSaverHook(directory, save_steps=2, saver=checkpoint),
            probe,  # Ends after the first hook and before the second.
            CheckpointSaverHook(directory, save_secs=600, saver=checkpoint),
        ]
        with monsession.MonitoredSession(hooks=hooks) as sess:
            for _ in range(3):
                sess.run(train)
        assert probe.saver == "BackgroundWriter"
        assert checkpoint._async_checkpointer_impl is before
    # Every save is complete once the session is closed.
    latest = tf.train.latest_checkpoint(directory)
    assert latest.endswith("-3")
    assert load_step(latest, "step/.ATTRIBUTES/VARIABLE_VALUE") == 3
    for step in checkpoint_steps(directory):
        reader = tf.train.load_checkpoint(f"{directory}/model.ckpt-{step}")
        assert reader.get_tensor("big/.ATTRIBUTES/VARIABLE_VALUE").shape == (_BIG,)
