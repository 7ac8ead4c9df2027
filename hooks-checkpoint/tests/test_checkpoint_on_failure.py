"""`save_on_failure=True`: a failed session saves the step reached, where that is safe."""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

import pytest
import tensorflow as tf
from checkpoint_testing import CountingListener, checkpoint_steps, fresh_eager, fresh_graph

import monsession
from monsession_hooks_checkpoint import CheckpointSaverHook


@dataclasses.dataclass
class Program:
    mode: str
    step: Any
    checkpoint: Any  # Eager: the tf.train.Checkpoint; graph: None (the graph's Saver).
    step_name: str

    def session(self, hook, singular=False):
        scaffold = monsession.Scaffold(saver=self.checkpoint)
        if singular:
            return monsession.SingularMonitoredSession(hooks=[hook], scaffold=scaffold)
        creator = monsession.ChiefSessionCreator(scaffold=scaffold)
        return monsession.MonitoredSession(session_creator=creator, hooks=[hook])

    def hook(self, directory, **kwargs):
        saver = {"saver": self.checkpoint} if self.checkpoint is not None else {}
        return CheckpointSaverHook(str(directory), **saver, **kwargs)


@pytest.fixture(params=["graph", "eager"])
def program(request):
    """A counter: each step adds one to the global step."""
    fresh = fresh_graph if request.param == "graph" else fresh_eager
    with fresh():
        global_step = monsession.get_or_create_global_step()
        if request.param == "graph":
            step = tf.compat.v1.assign_add(global_step, 1)
            yield Program("graph", step, None, "global_step")
        else:

            @tf.function
            def step():
                global_step.assign_add(1)
                return {}

            checkpoint = tf.train.Checkpoint(step=global_step)
            yield Program("eager", step, checkpoint, "step/.ATTRIBUTES/VARIABLE_VALUE")


def _fail_after(program, hook, steps, error, singular=False):
    with pytest.raises(type(error)) as raised:
        with program.session(hook, singular) as sess:
            for _ in range(steps):
                sess.run(program.step)
            raise error
    assert raised.value is error  # Saving changed nothing of the error.


def _latest_step(program, directory):
    reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(str(directory)))
    return int(reader.get_tensor(program.step_name))


def test_a_crash_saves_the_step_reached(program, tmp_path):
    listener = CountingListener()
    hook = program.hook(tmp_path, save_steps=100, listeners=[listener], save_on_failure=True)
    _fail_after(program, hook, 3, ValueError("bad batch"))
    assert checkpoint_steps(str(tmp_path)) == [0, 3]
    assert _latest_step(program, tmp_path) == 3
    # The listeners see the save, but no end(): the session did not end cleanly.
    assert listener.counts == {"begin": 1, "before_save": 2, "after_save": 2, "end": 0}


def test_without_save_on_failure_a_crash_saves_nothing(program, tmp_path):
    _fail_after(program, program.hook(tmp_path, save_steps=100), 3, ValueError("bad batch"))
    assert checkpoint_steps(str(tmp_path)) == [0]


def test_an_asynchronous_save_on_failure_is_complete(tmp_path):
    with fresh_eager():
        global_step = monsession.get_or_create_global_step()
        weights = tf.Variable(tf.zeros([256, 1024]))

        @tf.function
        def step():
            weights.assign_add(tf.ones_like(weights))
            global_step.assign_add(1)
            return {}

        checkpoint = tf.train.Checkpoint(step=global_step, w=weights)
        program = Program("eager", step, checkpoint, "step/.ATTRIBUTES/VARIABLE_VALUE")
        hook = program.hook(tmp_path, save_steps=100, async_save=True, save_on_failure=True)
        _fail_after(program, hook, 4, ValueError("bad batch"))
        reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(str(tmp_path)))
        assert int(reader.get_tensor(program.step_name)) == 4
        assert (reader.get_tensor("w/.ATTRIBUTES/VARIABLE_VALUE") == 4.0).all()


def test_a_step_already_saved_is_not_saved_again(program, tmp_path):
    listener = CountingListener()
    hook = program.hook(tmp_path, save_steps=1, listeners=[listener], save_on_failure=True)
    _fail_after(program, hook, 2, ValueError("bad batch"))
    assert checkpoint_steps(str(tmp_path)) == [0, 1, 2]
    assert listener.counts["before_save"] == 3


@pytest.mark.parametrize(
    "error",
    [
        tf.errors.AbortedError(None, None, "the parameter server restarted"),
        tf.errors.UnavailableError(None, None, "the worker is gone"),
        tf.compat.v1.train.NanLossDuringTrainingError(),
        KeyboardInterrupt(),
    ],
    ids=["aborted", "unavailable", "nan-loss", "keyboard-interrupt"],
)
def test_no_save_where_saving_is_not_safe(program, tmp_path, caplog, error):
    hook = program.hook(tmp_path, save_steps=100, save_on_failure=True)
    with caplog.at_level(logging.WARNING, logger="monsession.checkpoint"):
        _fail_after(program, hook, 3, error, singular=True)  # No recovery: the error surfaces.
    assert checkpoint_steps(str(tmp_path)) == [0]
    assert f"not saving after {type(error).__name__}" in caplog.text


class FailingListener(CountingListener):
    """Its `before_save` raises on the save of step `fail_at`."""

    def __init__(self, fail_at):
        super().__init__()
        self.fail_at = fail_at

    def before_save(self, session, global_step_value):
        super().before_save(session, global_step_value)
        if global_step_value == self.fail_at:
            raise OSError(f"disk full while saving {global_step_value}")


def test_no_second_attempt_after_the_hooks_own_save_failed(program, tmp_path):
    listener = FailingListener(fail_at=2)
    hook = program.hook(tmp_path, save_steps=2, listeners=[listener], save_on_failure=True)
    with pytest.raises(OSError, match="disk full while saving 2"):
        with program.session(hook) as sess:
            for _ in range(3):
                sess.run(program.step)
    assert listener.counts["before_save"] == 2  # Step 0, then the failed save of step 2.
    assert checkpoint_steps(str(tmp_path)) == [0]


def test_save_on_failure_must_be_a_bool(tmp_path):
    with pytest.raises(TypeError, match="CheckpointSaverHook: save_on_failure must be a bool"):
        CheckpointSaverHook(str(tmp_path), save_steps=1, save_on_failure="yes")
