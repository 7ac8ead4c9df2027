"""Saves off the schedule (at a stop step, at a signal) leave the schedule of a restart alone.

Saving every 10 steps, a run stopped by `StopAtStepHook` at 25, or by a
real SIGTERM or SIGINT to this process after step 31, saves that step; the
job restarted from it saves at the steps of the run that was never stopped
(30, 40, ... or 40, 50, ...), in every mode (the checkpoint family's saver
with its listeners, under `MonitoredTrainingSession`). Checkpoints are read
back with `tf.train.load_checkpoint`.
"""

from __future__ import annotations

import json
import os
import signal

import pytest
import tensorflow as tf
from checkpoint_testing import ONLY_CHECKPOINTS, CountingListener, checkpoint_steps, load_step

import monsession
from monsession_hooks_checkpoint import CheckpointSaverHook

EVERY = 10
MODES = ["graph", "eager", "eager-auto", "epochs"]
BATCHES = 7  # Epochs: batches per epoch, so epochs end off the schedule too.


class _SignalAfter(monsession.SessionRunHook):
    """Sends `signum` to this process after step `at` (the session stops after that step)."""

    def __init__(self, signum: int, at: int) -> None:
        self._signum, self._at = signum, at

    def next_action(self, global_step):
        return monsession.NextAction(steps=max(1, self._at - global_step))

    def after_run(self, run_context, run_values):
        if run_context.global_step_after() == self._at:
            signal.raise_signal(self._signum)


def _train(mode, directory, last_step, extra_hooks=()):
    """Trains to `last_step` (or a stop) in `mode`, resuming from `directory`; the saves made."""
    listener = CountingListener()

    def arguments(scaffold=None):
        saver = CheckpointSaverHook(
            directory, save_steps=EVERY, scaffold=scaffold, listeners=[listener], max_to_keep=None
        )
        return dict(
            checkpoint_dir=directory,
            scaffold=scaffold,
            save_checkpoint_secs=None,
            chief_only_hooks=[saver],
            hooks=[monsession.StopAtStepHook(last_step=last_step), *extra_hooks],
            **ONLY_CHECKPOINTS,
        )

    if mode == "graph":
        with tf.Graph().as_default():
            global_step = monsession.get_or_create_global_step()
            train = tf.compat.v1.assign_add(global_step, 1)
            with monsession.MonitoredTrainingSession(**arguments()) as sess:
                while not sess.should_stop():
                    sess.run(train)
        return listener.saved_steps
    tf.compat.v1.reset_default_graph()  # A fresh global step.
    global_step = monsession.get_or_create_global_step()
    state = {"step": global_step}
    epochs = None
    if mode == "epochs":
        epochs = monsession.Epochs(tf.data.Dataset.range(BATCHES))
        state["data"] = epochs

    @tf.function
    def step(*batch):
        global_step.assign_add(1)
        return {}

    spe = "auto" if mode == "eager-auto" else 1
    scaffold = monsession.Scaffold(saver=tf.train.Checkpoint(**state))
    with monsession.MonitoredTrainingSession(
        **arguments(scaffold), steps_per_execution=spe
    ) as sess:
        if epochs is not None:
            for _ in epochs.run(sess, step):
                pass
        else:
            while not sess.should_stop():
                sess.run(step)
    return listener.saved_steps


def _global_step(mode, checkpoint):
    """The global step a checkpoint (file prefix or directory) holds."""
    name = "global_step" if mode == "graph" else "step/.ATTRIBUTES/VARIABLE_VALUE"
    return load_step(checkpoint, name)


def _timer_step(directory, step):
    with open(os.path.join(directory, f"model.ckpt-{step}.hooks.json")) as state_file:
        states = json.load(state_file)["hooks"]
    return states["CheckpointSaverHook[0]"]["timer"]["last_triggered_step"]


@pytest.mark.parametrize("mode", MODES)
def test_a_stop_step_save_does_not_move_the_schedule_of_the_longer_run(tmp_path, mode):
    uninterrupted = str(tmp_path / "uninterrupted")
    assert _train(mode, uninterrupted, 55) == [0, 10, 20, 30, 40, 50, 55]

    directory = str(tmp_path / "stopped")
    assert _train(mode, directory, 25) == [0, 10, 20, 25]
    assert _train(mode, directory, 55) == [30, 40, 50, 55]
    # Saved with step 25: the last trigger of the schedule, not the stop.
    assert _timer_step(directory, 25) == 20
    assert checkpoint_steps(directory)[-5:] == [25, 30, 40, 50, 55]  # Graph mode keeps 5.
    for step in (30, 40, 50, 55):
        assert _global_step(mode, os.path.join(directory, f"model.ckpt-{step}")) == step


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
@pytest.mark.parametrize("mode", MODES)
def test_a_signal_save_does_not_move_the_schedule_of_the_restart(tmp_path, mode, signum):
    received = []
    previous = signal.signal(signum, lambda signum, frame: received.append(signum))
    try:
        directory = str(tmp_path)
        assert _train(mode, directory, 60, [_SignalAfter(signum, 31)]) == [0, 10, 20, 30, 31]
    finally:
        signal.signal(signum, previous)
    # The session handed the signal on to the handler installed before it.
    assert received == [signum]
    assert tf.train.latest_checkpoint(directory).endswith("model.ckpt-31")
    assert _global_step(mode, directory) == 31
    # The uninterrupted run saves 0, 10, ..., 60.
    assert _train(mode, directory, 60) == [40, 50, 60]
    assert _timer_step(directory, 31) == 30


def test_a_fresh_hook_on_a_checkpoint_without_its_state_starts_the_schedule_there(tmp_path):
    """A checkpoint TensorFlow wrote (no hook state): the schedule starts where it restores."""
    directory = str(tmp_path)
    with tf.Graph().as_default():
        global_step = monsession.get_or_create_global_step()
        train = tf.compat.v1.assign_add(global_step, 1)
        with tf.compat.v1.train.MonitoredTrainingSession(
            checkpoint_dir=directory, save_checkpoint_steps=EVERY, save_summaries_steps=None
        ) as sess:
            for _ in range(7):
                sess.run(train)
    assert checkpoint_steps(directory) == [0, 7]
    hook = CheckpointSaverHook(directory, save_steps=EVERY)
    with tf.Graph().as_default():
        global_step = monsession.get_or_create_global_step()
        train = tf.compat.v1.assign_add(global_step, 1)
        with monsession.SingularMonitoredSession(hooks=[hook], checkpoint_dir=directory) as sess:
            for _ in range(13):
                sess.run(train)
    assert checkpoint_steps(directory) == [0, 7, 17, 20]
