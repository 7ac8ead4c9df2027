"""Graph mode: how many `Session` runs CheckpointSaverHook(save_steps=N) costs per step.

TensorFlow's hook fetches the global step with every step and reads it again
after every step (two runs per step). Ours learns the step from core's step
service: one run per step where it does not save. Runs are counted on a real
`tf.compat.v1.Session` subclass, handed to both monitored sessions by a
session creator: every `run()` and every call of a callable the session made
(`make_callable`, and `_make_callable_from_options`, which core's graph
backend uses for its prepared steps) counts once.

The session keeps TensorFlow's default threading: the global-step read
tensor that the step service fetches with the step (the one TensorFlow's
hooks fetch) then runs before or after the step's increment, in no fixed
order, and the count must not depend on which.
"""

from __future__ import annotations

import pytest
import tensorflow as tf
from checkpoint_testing import CountingListener, counter_program

import monsession
from monsession_hooks_checkpoint import CheckpointSaverHook

SAVE_STEPS = 5
STEPS = 60
# A save step costs the step, one read of the global step (the step service
# confirms that the save is due, as TensorFlow's hook does) and the Saver's run.
RUNS_PER_SAVE_STEP = 3


class CountingSession(tf.compat.v1.Session):
    """A real session counting its runs; runs made inside a counted call count once."""

    def __init__(self):
        super().__init__()
        self.runs = 0
        self._depth = 0

    def _counted(self, function, *args, **kwargs):
        if self._depth == 0:
            self.runs += 1
        self._depth += 1
        try:
            return function(*args, **kwargs)
        finally:
            self._depth -= 1

    def _counting(self, made):
        def call(*args, **kwargs):
            return self._counted(made, *args, **kwargs)

        return call

    def run(self, *args, **kwargs):
        return self._counted(super().run, *args, **kwargs)

    def make_callable(self, *args, **kwargs):
        return self._counting(super().make_callable(*args, **kwargs))

    def _make_callable_from_options(self, *args, **kwargs):
        return self._counting(super()._make_callable_from_options(*args, **kwargs))


class Creating:
    """Creates a `CountingSession` (variables initialized) and keeps it."""

    created: CountingSession | None = None

    def create_session(self):
        self.created = CountingSession()
        self.created.run(tf.compat.v1.global_variables_initializer())
        return self.created


class OurCreator(Creating, monsession.SessionCreator):
    """The counting session for `monsession.MonitoredSession`."""


class TheirCreator(Creating, tf.compat.v1.train.SessionCreator):
    """The counting session for `tf.compat.v1.train.MonitoredSession`."""


def _runs_per_step(api, creator, hook_class, directory, listener):
    """Runs STEPS steps; returns the session runs of each step (index 0: step 1)."""
    with tf.Graph().as_default():
        _, train_op, _ = counter_program()
        hook = hook_class(
            directory,
            save_steps=SAVE_STEPS,
            saver=tf.compat.v1.train.Saver(),
            listeners=[listener],
        )
        per_step = []
        with api.MonitoredSession(session_creator=creator, hooks=[hook]) as sess:
            raw = creator.created
            for _ in range(STEPS):
                before = raw.runs
                sess.run(train_op)
                per_step.append(raw.runs - before)
        return per_step


@pytest.fixture
def ours(tmp_path):
    listener = CountingListener()
    per_step = _runs_per_step(
        monsession, OurCreator(), CheckpointSaverHook, str(tmp_path / "ours"), listener
    )
    return per_step, listener.saved_steps


@pytest.fixture
def theirs(tmp_path):
    listener = CountingListener()
    per_step = _runs_per_step(
        tf.compat.v1.train,
        TheirCreator(),
        tf.compat.v1.train.CheckpointSaverHook,
        str(tmp_path / "theirs"),
        listener,
    )
    return per_step, listener.saved_steps


def test_one_session_run_per_step_that_does_not_save(ours):
    per_step, saved_steps = ours
    save_steps = list(range(SAVE_STEPS, STEPS + 1, SAVE_STEPS))
    assert saved_steps == [0, *save_steps, STEPS][: len(saved_steps)]
    # Core's step service read the global step when the session was created,
    # so even the first step costs one run.
    expected = [RUNS_PER_SAVE_STEP if step in save_steps else 1 for step in range(1, STEPS + 1)]
    assert per_step == expected


def test_tensorflows_monitored_session_runs_twice_per_step(ours, theirs):
    our_steps, our_saves = ours
    their_steps, their_saves = theirs
    assert our_saves == their_saves  # Same saves, same steps.
    save_steps = set(range(SAVE_STEPS, STEPS + 1, SAVE_STEPS))
    idle = [index for index in range(STEPS) if index + 1 not in save_steps]
    assert {their_steps[index] for index in idle} == {2}
    assert {our_steps[index] for index in idle} == {1}
    assert [their_steps[s - 1] for s in sorted(save_steps)] == [RUNS_PER_SAVE_STEP] * len(
        save_steps
    )
    assert sum(our_steps) < sum(their_steps)
