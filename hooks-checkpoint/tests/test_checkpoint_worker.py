"""The chief's saves mirrored on a non-chief worker (MultiWorkerMirroredStrategy):
same steps, a temporary directory, removed at the end."""

from __future__ import annotations

import dataclasses
import os

import pytest
import tensorflow as tf
from checkpoint_testing import checkpoint_steps, fresh_eager

import monsession
from monsession_hooks_checkpoint._plugin import monsession_default_hooks
from monsession_hooks_checkpoint._worker_saving import WorkerCheckpointSaverHook


@pytest.fixture(autouse=True)
def eager_state():
    with fresh_eager():
        yield


def _state():
    global_step = monsession.get_or_create_global_step()
    weight = tf.Variable(1.0)
    checkpoint = tf.train.Checkpoint(weight=weight, step=global_step)

    @tf.function
    def step():
        weight.assign_add(1.0)
        global_step.assign_add(1)
        return {"loss": weight}

    return global_step, checkpoint, step


def _train(hook, last_step, step, seen):
    with monsession.MonitoredSession(
        session_creator=monsession.ChiefSessionCreator(
            scaffold=monsession.Scaffold(saver=hook._scaffold.saver)
        ),
        hooks=[hook, monsession.StopAtStepHook(last_step=last_step)],
    ) as sess:
        seen.append(checkpoint_steps(hook.temporary_directory))
        while not sess.should_stop():
            sess.run(step)
            seen.append(checkpoint_steps(hook.temporary_directory))


def test_saves_on_the_chiefs_steps_into_a_temporary_directory_that_is_removed(tmp_path):
    _, checkpoint, step = _state()
    chief_dir = tmp_path / "chief"
    hook = WorkerCheckpointSaverHook(
        str(chief_dir), save_steps=2, scaffold=monsession.Scaffold(saver=checkpoint)
    )
    temp = hook.temporary_directory
    assert not temp.startswith(str(tmp_path))
    seen = []
    _train(hook, 5, step, seen)
    # As the chief: a save at creation (no checkpoint yet), every 2 steps, at the end;
    # only the last one kept.
    assert seen == [[0], [0], [2], [2], [4], [4]]
    assert not os.path.exists(temp)
    assert not chief_dir.exists()


def test_does_not_save_at_creation_when_the_chief_restored_that_step(tmp_path):
    global_step, checkpoint, step = _state()
    chief_dir = tmp_path / "chief"
    global_step.assign(3)
    manager = tf.train.CheckpointManager(
        checkpoint, str(chief_dir), max_to_keep=None, checkpoint_name="model.ckpt"
    )
    manager.save(checkpoint_number=3)
    assert tf.train.latest_checkpoint(str(chief_dir)).endswith("model.ckpt-3")
    hook = WorkerCheckpointSaverHook(
        str(chief_dir), save_steps=2, scaffold=monsession.Scaffold(saver=checkpoint)
    )
    seen = []
    _train(hook, 5, step, seen)
    # The chief skips rewriting the checkpoint it restored; so does the worker.
    assert seen[0] == []
    assert seen[-1] == [5]
    assert checkpoint_steps(str(chief_dir)) == [3]


def test_a_checkpoint_manager_of_the_chief_saves_its_checkpoint_into_the_temporary_directory(
    tmp_path,
):
    """Scaffold(saver=CheckpointManager(chief_dir)): the worker saves the
    manager's Checkpoint into its own directory, never into the chief's, and
    skips the step the chief's manager (with its own file names) restored."""
    global_step, checkpoint, step = _state()
    chief_dir = tmp_path / "chief"
    global_step.assign(3)
    manager = tf.train.CheckpointManager(checkpoint, str(chief_dir), max_to_keep=None)
    manager.save(checkpoint_number=3)
    assert tf.train.latest_checkpoint(str(chief_dir)).endswith("ckpt-3")
    hook = WorkerCheckpointSaverHook(
        str(chief_dir), save_steps=2, scaffold=monsession.Scaffold(saver=manager)
    )
    seen = []
    with monsession.MonitoredSession(
        session_creator=monsession.ChiefSessionCreator(scaffold=monsession.Scaffold(saver=manager)),
        hooks=[hook, monsession.StopAtStepHook(last_step=5)],
    ) as sess:
        seen.append(checkpoint_steps(hook.temporary_directory))
        while not sess.should_stop():
            sess.run(step)
            seen.append(checkpoint_steps(hook.temporary_directory))
    assert seen == [[], [], [5]]  # Step 5: every 2 steps from 3, and the end.
    assert not os.path.exists(hook.temporary_directory)
    assert sorted(os.listdir(chief_dir)) == [
        "checkpoint",
        "ckpt-3.data-00000-of-00001",
        "ckpt-3.index",
    ]


def test_plugin_gives_workers_that_save_with_the_chief_the_worker_hook(tmp_path):
    _, checkpoint, _ = _state()
    settings = monsession.plugins.TrainingSettings(
        master="",
        is_chief=False,
        checkpoint_dir=str(tmp_path),
        summary_dir=None,
        scaffold=monsession.Scaffold(saver=checkpoint),
        save_checkpoint_secs=None,
        save_checkpoint_steps=10,
        save_summaries_steps=100,
        save_summaries_secs=None,
        log_step_count_steps=100,
        save_graph_def=True,
        config=None,
        max_wait_secs=10,
        eager=True,
        saves_with_chief=True,
    )
    (default,) = monsession_default_hooks(settings)
    assert isinstance(default.hook, WorkerCheckpointSaverHook)
    assert default.hook._chief_dir == str(tmp_path)
    default.hook._cleanup()

    in_seconds = dataclasses.replace(settings, save_checkpoint_secs=60, save_checkpoint_steps=None)
    with pytest.raises(ValueError, match="save_checkpoint_steps"):
        monsession_default_hooks(in_seconds)
