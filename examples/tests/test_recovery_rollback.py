"""A recovery that rolls back to an older checkpoint is clean: TensorBoard shows every step once.

A real `AbortedError` after step 16, checkpoints every 10 steps: the session
restores checkpoint 10 and trains steps 11-16 again. The summary hooks write
a `SessionLog.START` at step 11 after the recovery, so TensorBoard's reader
(which purges what was written before a START at or past its step) shows
each step once, and every rate is positive. TensorFlow's own hooks write
their START only in `begin()`: there, steps 11-16 show twice.
"""

from __future__ import annotations

import glob
import os

import pytest
import tensorflow as tf
from tensorboard.backend.event_processing import event_file_loader, plugin_event_accumulator

import monsession

ABORT_AFTER = 16
LAST_STEP = 30


class AbortOnce(monsession.SessionRunHook):
    """Raises a real `AbortedError` after the step that reaches `at`, once."""

    def __init__(self, at: int | None) -> None:
        self._at, self.created_at = at, []

    def after_create_session(self, session, coord):
        self.created_at.append(monsession.plugins.read_global_step(session))

    def after_run(self, run_context, run_values):
        if self._at is not None and run_context.global_step_after() == self._at:
            self._at = None
            raise tf.errors.AbortedError(None, None, "injected preemption")


def _train(
    directory: str, mode: str, abort_after: int | None, summaries: int | None = 1
) -> AbortOnce:
    abort = AbortOnce(abort_after)
    arguments = {
        "checkpoint_dir": directory,
        "save_checkpoint_steps": 10,
        "save_summaries_steps": summaries,
        "log_step_count_steps": 5,
        "hooks": [abort, monsession.StopAtStepHook(last_step=LAST_STEP)],
    }
    if mode == "graph":
        with tf.Graph().as_default():
            global_step = monsession.get_or_create_global_step()
            weight = tf.compat.v1.get_variable("weight", initializer=1.0)
            new_weight = weight.assign(weight * 0.9)
            tf.compat.v1.summary.scalar("w", new_weight)
            train_op = tf.group(new_weight, global_step.assign_add(1))
            with monsession.MonitoredTrainingSession(**arguments) as sess:
                while not sess.should_stop():
                    sess.run(train_op)
        return abort
    tf.compat.v1.reset_default_graph()
    global_step = monsession.get_or_create_global_step()
    weight = tf.Variable(1.0)

    @tf.function
    def step():
        weight.assign(weight * 0.9)
        global_step.assign_add(1)
        tf.summary.scalar("w", weight, step=global_step)
        return {"w": tf.identity(weight)}

    scaffold = monsession.Scaffold(saver=tf.train.Checkpoint(w=weight, step=global_step))
    with monsession.MonitoredTrainingSession(scaffold=scaffold, **arguments) as sess:
        while not sess.should_stop():
            sess.run(step)
    return abort


def _series(accumulator, tag: str) -> tuple[list[int], list[float]]:
    """(steps, values) of a scalar as TensorBoard shows it."""
    events = accumulator.Tensors(tag)
    return [e.step for e in events], [float(tf.make_ndarray(e.tensor_proto)) for e in events]


def _tensorboard_view(directory: str) -> dict[str, tuple[list[int], list[float]]]:
    """TensorBoard's own reader (the one its UI uses), keeping every point."""
    accumulator = plugin_event_accumulator.EventAccumulator(
        directory, size_guidance={"tensors": 0}, purge_orphaned_data=True
    )
    accumulator.Reload()
    tags = accumulator.Tags()["tensors"]
    return {tag: _series(accumulator, tag) for tag in ("w", "global_step/sec") if tag in tags}


def _starts(directory: str) -> list[int]:
    return sorted(
        {
            event.step
            for path in glob.glob(os.path.join(directory, "events.*"))
            for event in event_file_loader.LegacyEventFileLoader(path).Load()
            if event.session_log.status == tf.compat.v1.SessionLog.START
        }
    )


@pytest.mark.parametrize("mode", ["graph", "eager"])
def test_tensorboard_shows_each_step_once_after_a_rollback(tmp_path, mode):
    """What TensorBoard shows after the rollback equals the fault-free run's, rates positive."""
    views = {}
    for name, abort_after in (("fault-free", None), ("rollback", ABORT_AFTER)):
        directory = str(tmp_path / name)
        tf.compat.v1.summary.FileWriterCache.clear()
        abort = _train(directory, mode, abort_after)
        tf.compat.v1.summary.FileWriterCache.clear()
        views[name] = _tensorboard_view(directory)
        if abort_after is None:
            assert abort.created_at == [0]
            assert _starts(directory) == [1]
        else:
            assert abort.created_at == [0, 10]  # Restored checkpoint 10 after step 16.
            assert _starts(directory) == [1, 11]

    steps, values = views["rollback"]["w"]
    assert steps == list(range(1, LAST_STEP + 1))
    assert values == pytest.approx([0.9**step for step in steps], rel=1e-5)
    assert views["rollback"]["w"] == views["fault-free"]["w"]
    steps, rates = views["rollback"]["global_step/sec"]
    assert steps == views["fault-free"]["global_step/sec"][0]
    assert len(steps) == len(set(steps)) >= 5
    assert all(rate > 0 for rate in rates), rates


@pytest.mark.parametrize("mode", ["graph", "eager"])
def test_the_step_rate_alone_in_its_directory_shows_each_step_once(tmp_path, mode):
    """Without summaries, the step counter's STARTs alone make TensorBoard drop the old rates.

    As TensorFlow's, it writes none on a fresh start; after the recovery it
    writes two at the restored step, because TensorBoard takes a run's first
    START as its beginning, not as a restart.
    """
    views, starts = {}, {}
    for name, abort_after in (("fault-free", None), ("rollback", ABORT_AFTER)):
        directory = str(tmp_path / name)
        tf.compat.v1.summary.FileWriterCache.clear()
        _train(directory, mode, abort_after, summaries=None)
        tf.compat.v1.summary.FileWriterCache.clear()
        views[name], starts[name] = _tensorboard_view(directory), _starts(directory)
    steps, rates = views["rollback"]["global_step/sec"]
    assert steps == views["fault-free"]["global_step/sec"][0] == [6, 11, 16, 21, 26]
    assert all(rate > 0 for rate in rates), rates
    assert starts == {"fault-free": [], "rollback": [11]}
