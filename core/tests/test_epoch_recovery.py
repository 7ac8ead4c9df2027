"""`Epochs.run` recovers from a preemption error as if nothing had happened.

A real `AbortedError`, raised once by a hook, makes the session re-create
itself and restore the latest checkpoint, which rewinds the `Epochs` iterator
and counter (they are in the user's checkpoint). The loop must then go on at
the restored position: every step trains on the batch of an uninterrupted
run, each epoch begins, ends and is yielded once, and the loop ends after
the last epoch, whether the restore goes back into the aborted step's epoch,
back across an epoch boundary, or lands on one.
"""

from __future__ import annotations

import pytest
import tensorflow as tf
from epochs_child import BATCH, EPOCHS, IDS, EpochsProgram

import monsession

LAST_STEP = IDS // BATCH * EPOCHS


class SaveEvery(monsession.SessionRunHook):
    """Saves the checkpoint after every `every`-th step (core has no checkpoint family)."""

    def __init__(self, manager, every):
        self.manager = manager
        self.every = every

    def after_run(self, run_context, run_values):
        step = run_context.global_step_after()
        if step % self.every == 0:
            self.manager.save(checkpoint_number=step)


class Record(monsession.SessionRunHook):
    """Records the ids each step trains on, and the epoch notifications, in order."""

    def __init__(self):
        self.steps = []  # (global step, ids), replayed steps included.
        self.events = []

    def before_run(self, run_context):
        return monsession.SessionRunArgs("ids")

    def after_run(self, run_context, run_values):
        self.steps.append((run_context.global_step_after(), run_values.results.tolist()))

    def end(self, session):
        self.global_step = monsession.plugins.read_global_step(session)

    def epoch_begin(self, epoch):
        self.events.append(("begin", epoch))

    def epoch_end(self, epoch):
        self.events.append(("end", epoch))


class AbortOnce(monsession.SessionRunHook):
    """Raises a real AbortedError once, in `method` of the step that ends at `step`."""

    def __init__(self, step, method):
        self.step = step
        self.method = method
        self.fired = False

    def _abort(self, step):
        if step == self.step and not self.fired:
            self.fired = True
            raise tf.errors.AbortedError(None, None, f"preempted at step {step}")

    def before_run(self, run_context):
        if self.method == "before_run":
            self._abort(run_context.global_step + 1)

    def after_run(self, run_context, run_values):
        if self.method == "after_run":
            self._abort(run_context.global_step_after())


def train(directory, save_every, abort=None):
    """Runs the `Epochs` loop of docs/getting-started.md; returns what a user sees."""
    program = EpochsProgram(directory, max_to_keep=3)
    data, weight, train_step = program.data, program.weight, program.train_step
    manager, creator = program.manager, program.creator
    record = Record()
    hooks = [SaveEvery(manager, save_every), record]
    if abort is not None:
        hooks.append(abort)
    yielded = []
    with monsession.MonitoredSession(session_creator=creator, hooks=hooks) as sess:
        for epoch in data.run(sess, train_step):
            yielded.append(epoch)
            record.events.append(("yield", epoch))
    return {
        # What each step trained on last (a replayed step trains on the same batch).
        "batches": dict(record.steps),
        "last_step": max(s for s, _ in record.steps),
        "events": record.events,
        "yielded": yielded,
        "global_step": record.global_step,
        "counter": int(data.epoch.numpy()),
        "weight": float(weight.numpy()),
    }


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    return train(str(tmp_path_factory.mktemp("uninterrupted")), save_every=5)


@pytest.mark.parametrize(
    ("save_every", "step", "method"),
    [
        (5, 17, "after_run"),  # Back to step 15, in the same epoch.
        (8, 12, "after_run"),  # Back to step 8, across the end of epoch 0.
        (8, 11, "before_run"),  # Back to step 8, from the first step of epoch 1.
        (5, 10, "after_run"),  # Restored at the end of epoch 0, saved in the aborted step.
        (5, 21, "before_run"),  # Restored at the start of epoch 2, already begun.
        (5, 30, "after_run"),  # Restored after the last step: nothing is left to train.
    ],
)
def test_recovery_inside_the_epochs_loop_is_exact(
    tmp_path, uninterrupted, save_every, step, method
):
    abort = AbortOnce(step, method)
    got = train(str(tmp_path), save_every, abort)
    assert abort.fired
    assert uninterrupted["yielded"] == [0, 1, 2]
    assert got["batches"] == uninterrupted["batches"]
    assert got["last_step"] == got["global_step"] == LAST_STEP
    assert got["events"] == uninterrupted["events"]
    assert got["yielded"] == [0, 1, 2]
    assert got["counter"] == EPOCHS
    assert got["weight"] == pytest.approx(uninterrupted["weight"], rel=1e-6)
