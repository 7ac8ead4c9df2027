"""Core's control hooks and the timer, each test run in graph and eager mode."""

from __future__ import annotations

import threading
import time

import pytest
import tensorflow as tf

import monsession


def run_until_stop(program, hooks, limit=50, **kwargs):
    steps = 0
    with monsession.MonitoredSession(hooks=hooks, **kwargs) as sess:
        while not sess.should_stop() and steps < limit:
            sess.run(program.step)
            steps += 1
    return steps


def test_stop_at_step_last_step(program):
    assert run_until_stop(program, [monsession.StopAtStepHook(last_step=3)]) == 3


def test_stop_at_step_num_steps_counts_from_the_restored_step(program, tmp_path):
    scaffold = program.scaffold()
    hook = monsession.StopAtStepHook(num_steps=2)
    with monsession.SingularMonitoredSession(hooks=[hook], scaffold=scaffold) as sess:
        while not sess.should_stop():
            sess.run(program.step)
        raw = sess.raw_session()
        if program.mode == "graph":
            scaffold.saver.save(raw, str(tmp_path / "model.ckpt"), global_step=2)
        else:
            program.checkpoint.save(str(tmp_path / "model.ckpt"))
    assert hook.last_step == 2
    hook = monsession.StopAtStepHook(num_steps=3)
    creator = monsession.ChiefSessionCreator(scaffold=scaffold, checkpoint_dir=str(tmp_path))
    assert run_until_stop(program, [hook], session_creator=creator) == 3
    assert hook.last_step == 5


def test_feed_fn_hook_feeds_every_step(program):
    seen = []

    class Loss(monsession.SessionRunHook):
        def before_run(self, run_context):
            return monsession.SessionRunArgs(program.weight)

        def after_run(self, run_context, run_values):
            seen.append(float(run_values.results))

    feed = monsession.FeedFnHook(lambda: {program.lr: 0.5})
    run_until_stop(program, [feed, Loss(), monsession.StopAtStepHook(last_step=2)])
    # w <- w - 0.5 * 2w = 0 after the first step.
    assert seen[-1] == pytest.approx(0.0)


def test_final_ops_hook_evaluates_at_end(program):
    final = monsession.FinalOpsHook({"step": program.global_step, "w": program.weight})
    run_until_stop(program, [final, monsession.StopAtStepHook(last_step=4)])
    assert int(final.final_ops_values["step"]) == 4
    assert final.final_ops_values["w"] == pytest.approx(4.0 * 0.8**4)


def test_global_step_waiter_waits_for_another_worker(program):
    """The hook holds the first step until another thread advances the step."""

    class SeenStep(monsession.SessionRunHook):
        """Reads the global step once the waiter let the run start."""

        def before_run(self, run_context):
            self.seen = int(run_context.session.run(program.global_step))

    waiter = monsession.GlobalStepWaiterHook(wait_until_step=3)
    seen = SeenStep()
    increment = program.global_step.assign_add(3) if program.mode == "graph" else None
    with monsession.MonitoredSession(hooks=[waiter, seen]) as sess:
        raw = sess._tf_sess()

        def other_worker():
            time.sleep(0.3)
            if increment is not None:
                raw.run(increment)
            else:
                program.global_step.assign_add(3)

        helper = threading.Thread(target=other_worker)
        helper.start()
        sess.run(program.step)
        helper.join()
    assert seen.seen == 3  # Without the wait the run starts at step 0.


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "One of num_steps or last_step must be specified"),
        ({"num_steps": 1, "last_step": 1}, "Only one of num_steps or last_step"),
        ({"num_steps": -1}, "StopAtStepHook: invalid num_steps=-1; expected a non-negative int"),
        ({"last_step": -5}, "StopAtStepHook: invalid last_step=-5; expected a non-negative int"),
    ],
)
def test_stop_at_step_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        monsession.StopAtStepHook(**kwargs)


def test_hooks_needing_a_global_step_say_so(graph):
    tf.constant(0)
    with pytest.raises(RuntimeError, match="Global step should be created to use StopAtStepHook"):
        monsession.MonitoredSession(hooks=[monsession.StopAtStepHook(num_steps=1)])


def test_feed_fn_must_be_callable():
    with pytest.raises(TypeError, match="FeedFnHook: feed_fn must be callable"):
        monsession.FeedFnHook({"x": 1})


def test_stop_at_step_refuses_a_string():
    with pytest.raises(
        TypeError, match=r"StopAtStepHook: invalid num_steps='5' of type str; expected"
    ):
        monsession.StopAtStepHook(num_steps="5")


def test_timer_every_steps():
    timer = monsession.SecondOrStepTimer(every_steps=3)
    assert timer.should_trigger_for_step(1)
    assert timer.update_last_triggered_step(1) == (None, None)
    assert [timer.should_trigger_for_step(s) for s in (1, 2, 3, 4)] == [False, False, False, True]
    elapsed_secs, elapsed_steps = timer.update_last_triggered_step(4)
    assert elapsed_steps == 3 and elapsed_secs >= 0
    assert timer.last_triggered_step() == 4
    timer.reset()
    assert timer.should_trigger_for_step(4)


def test_timer_every_secs(monkeypatch):
    # The timer's own clock, set by the test: what triggers is decided by the
    # seconds the timer reads, whatever the machine's speed.
    now = [1000.0]
    monkeypatch.setattr(time, "time", lambda: now[0])
    timer = monsession.SecondOrStepTimer(every_secs=60)
    timer.update_last_triggered_step(1)
    assert not timer.should_trigger_for_step(2)
    now[0] += 59.5
    assert not timer.should_trigger_for_step(2)
    now[0] += 0.5
    assert not timer.should_trigger_for_step(1), "never twice for the same step"
    assert timer.should_trigger_for_step(2)
    assert timer.update_last_triggered_step(2) == (60.0, 1)
