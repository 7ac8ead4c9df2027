"""Child process of the epoch resume tests: the `Epochs` loop of docs/getting-started.md.

Usage: python epochs_child.py CHECKPOINT_DIR KILL_AFTER. Trains 3 epochs of
40 shuffled ids in batches of 4 (10 steps per epoch), the `Epochs` object in
the user's checkpoint, saved every 5 steps and at the end as
`CheckpointSaverHook(save_steps=5)` saves (core only: no hook family), then
prints ``DONE <weight>``. Prints ``RAN <step>
<ids>`` after every step and ``EPOCH <epoch>`` for every epoch the loop
yields. With KILL_AFTER > 0 the process kills itself with SIGKILL right after
that step (after its checkpoint, if any). `train` runs the same loop in the
calling process.
"""

from __future__ import annotations

import os
import signal
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf

import monsession

IDS, BATCH, EPOCHS, SAVE_STEPS = 40, 4, 3, 5


class SaveEvery(monsession.SessionRunHook):
    """Saves `manager`'s checkpoint after every `SAVE_STEPS`-th step and at the end."""

    def __init__(self, manager) -> None:
        self.manager = manager
        self.saved = -1

    def after_create_session(self, session, coord):
        self.saved = monsession.plugins.read_global_step(session)

    def after_run(self, run_context, run_values):
        step = run_context.global_step_after()
        if step % SAVE_STEPS == 0:
            self.save(step)

    def end(self, session):
        step = monsession.plugins.read_global_step(session)
        if step != self.saved:
            self.save(step)

    def save(self, step):
        self.manager.save(checkpoint_number=step)
        self.saved = step


class Recorder(monsession.SessionRunHook):
    """Reports the ids of each step, and kills the process after step `kill_after`."""

    def __init__(self, report, kill_after: int) -> None:
        self.report = report
        self.kill_after = kill_after

    def before_run(self, run_context):
        return monsession.SessionRunArgs("ids")

    def after_run(self, run_context, run_values):
        step = run_context.global_step_after()
        self.report("RAN", step, *run_values.results.tolist())
        if step == self.kill_after:
            os.kill(os.getpid(), signal.SIGKILL)


class EpochsProgram:
    """The loop's parts: 3 epochs of 40 shuffled ids in batches of 4, a weight
    that depends on every batch and their order, saved with the data position
    by a `CheckpointManager` into `directory`."""

    def __init__(self, directory: str, max_to_keep: int) -> None:
        tf.compat.v1.reset_default_graph()  # A fresh session-owned global step.
        dataset = tf.data.Dataset.range(IDS).shuffle(IDS, seed=7).batch(BATCH)
        self.data = monsession.Epochs(dataset, num_epochs=EPOCHS)
        self.weight = weight = tf.Variable(1.0)

        @tf.function
        def train_step(ids):
            weight.assign(0.9 * weight + tf.cast(tf.reduce_sum(ids), tf.float32) / 100.0)
            return {"ids": ids}

        self.train_step = train_step
        checkpoint = tf.train.Checkpoint(weight=weight, data=self.data)
        self.manager = tf.train.CheckpointManager(checkpoint, directory, max_to_keep=max_to_keep)
        self.creator = monsession.ChiefSessionCreator(
            scaffold=monsession.Scaffold(saver=self.manager), checkpoint_dir=directory
        )


def train(directory: str, kill_after: int = 0, report=None) -> float:
    """Trains (resuming from `directory`); returns the final weight."""
    report = report or (lambda *words: print(*words, flush=True))
    program = EpochsProgram(directory, max_to_keep=2)
    data, weight, train_step = program.data, program.weight, program.train_step
    manager, creator = program.manager, program.creator
    hooks = [SaveEvery(manager), Recorder(report, kill_after)]
    with monsession.MonitoredSession(session_creator=creator, hooks=hooks) as sess:
        for epoch in data.run(sess, train_step):
            report("EPOCH", epoch)
    return float(weight.numpy())


if __name__ == "__main__":
    print("DONE", repr(train(sys.argv[1], int(sys.argv[2]))), flush=True)
