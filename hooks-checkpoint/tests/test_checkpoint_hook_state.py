"""CheckpointSaverHook writes the hooks' state beside every checkpoint, in both modes."""

from __future__ import annotations

import json
import os

import keras
import tensorflow as tf
from checkpoint_testing import counter_program, fresh_eager, fresh_graph

import monsession
from monsession_hooks_checkpoint import CheckpointSaverHook
from monsession_hooks_checkpoint._background_writer import BackgroundWriter
from monsession_hooks_checkpoint._tf_compat import (
    forget_async_request,
    install_checkpoint_writer,
    manager_checkpoint_prefix,
    snapshot_checkpoint,
    write_snapshot,
)


def _saved_hooks(path):
    with open(path) as state_file:
        return json.load(state_file)["hooks"]


def test_tf_compat_manager_checkpoint_prefix(tmp_path):
    with fresh_eager():
        checkpoint = tf.train.Checkpoint(step=tf.Variable(0))
        manager = tf.train.CheckpointManager(
            checkpoint, str(tmp_path), max_to_keep=1, checkpoint_name="abc"
        )
        assert manager_checkpoint_prefix(manager) == os.path.join(str(tmp_path), "abc")
        assert manager.save(checkpoint_number=3) == os.path.join(str(tmp_path), "abc-3")


def test_tf_compat_snapshot_written_later_holds_the_values_read(tmp_path):
    with fresh_eager():
        weight = tf.Variable([1.0, 2.0])
        with tf.distribute.MirroredStrategy(["/cpu:0"]).scope():
            # Serialized as the variable itself, not as a reading function.
            mirrored = keras.Variable([3.0])
        checkpoint = tf.train.Checkpoint(weight=weight, mirrored=tf.Module())
        checkpoint.mirrored.value = mirrored
        snapshot = snapshot_checkpoint(checkpoint)
        weight.assign_add([10.0, 10.0])  # After the read: not in the snapshot.
        mirrored.assign_add([10.0])
        write_snapshot(snapshot, str(tmp_path / "snap"), tf.train.CheckpointOptions())
        reader = tf.train.load_checkpoint(str(tmp_path / "snap"))
        assert list(reader.get_tensor("weight/.ATTRIBUTES/VARIABLE_VALUE")) == [1.0, 2.0]
        assert list(reader.get_tensor("mirrored/value/.ATTRIBUTES/VARIABLE_VALUE")) == [3.0]
        assert "_CHECKPOINTABLE_OBJECT_GRAPH" in reader.get_variable_to_shape_map()
        marker = object()
        assert install_checkpoint_writer(checkpoint, marker) is None
        assert install_checkpoint_writer(checkpoint, None) is marker
        forget_async_request(checkpoint)


def test_checkpoint_restores_itself_after_a_background_write(tmp_path):
    """A checkpoint that saved asynchronously restores as usual (it used to recurse)."""
    with fresh_eager():
        weight = tf.Variable(1.0)
        checkpoint = tf.train.Checkpoint(weight=weight)
        writer = BackgroundWriter(checkpoint)
        install_checkpoint_writer(checkpoint, writer)
        manager = tf.train.CheckpointManager(checkpoint, str(tmp_path), max_to_keep=1)
        background = tf.train.CheckpointOptions(experimental_enable_async_checkpoint=True)
        path = manager.save(options=background)
        weight.assign(5.0)
        manager.sync()
        assert manager.latest_checkpoint == path
        checkpoint.restore(path).assert_consumed()
        assert float(weight.numpy()) == 1.0
        weight.assign(7.0)
        checkpoint.restore(path, options=background).assert_consumed()
        assert float(weight.numpy()) == 1.0


def test_seconds_timer_keeps_its_last_trigger_across_a_restart(tmp_path):
    directory = str(tmp_path)
    with fresh_graph():
        global_step, train_op, _ = counter_program()
        hook = CheckpointSaverHook(directory, save_secs=3600)
        with monsession.SingularMonitoredSession(hooks=[hook], checkpoint_dir=directory) as sess:
            for _ in range(3):
                sess.run(train_op)
        # Step 0 at creation, the timer's trigger; step 3 at end(), off the
        # schedule: the timer keeps step 0.
        saved = _saved_hooks(os.path.join(directory, "model.ckpt-3.hooks.json"))
        timer = saved["CheckpointSaverHook[0]"]["timer"]
        assert hook.state_dict()["timer"]["last_triggered_step"] == 0
        assert timer["last_triggered_step"] == 0
        assert timer["secs_since_trigger"] >= 0
        assert os.path.exists(os.path.join(directory, "model.ckpt-0.hooks.json"))
    with fresh_graph():
        global_step, train_op, _ = counter_program()
        restarted = CheckpointSaverHook(directory, save_secs=3600)
        with monsession.SingularMonitoredSession(
            hooks=[restarted], checkpoint_dir=directory
        ) as sess:
            # The hour counts from the save at step 0, in training time (the
            # time between the processes does not count), not from this
            # restart nor from the save at the end: the restored trigger is kept.
            state = restarted.state_dict()["timer"]
            assert state["last_triggered_step"] == 0
            assert state["secs_since_trigger"] >= timer["secs_since_trigger"]
            assert sess.run(global_step) == 3


def test_eager_user_manager_names_the_state_files_and_restores_the_timer(tmp_path):
    directory = str(tmp_path)
    with fresh_eager():
        step = monsession.get_or_create_global_step()
        checkpoint = tf.train.Checkpoint(step=step)
        manager = tf.train.CheckpointManager(
            checkpoint, directory, max_to_keep=None, checkpoint_name="custom"
        )

        @tf.function
        def train():
            step.assign_add(1)

        hook = CheckpointSaverHook(directory, save_steps=2, saver=manager)
        scaffold = monsession.Scaffold(saver=checkpoint)
        with monsession.SingularMonitoredSession(
            hooks=[hook], scaffold=scaffold, checkpoint_dir=directory
        ) as sess:
            for _ in range(5):
                sess.run(train)
        assert sorted(n for n in os.listdir(directory) if n.endswith(".hooks.json")) == [
            f"custom-{n}.hooks.json" for n in (0, 2, 4, 5)
        ]
        saved = _saved_hooks(os.path.join(directory, "custom-4.hooks.json"))
        assert saved["CheckpointSaverHook[0]"]["timer"]["last_triggered_step"] == 4
    with fresh_eager():
        step = monsession.get_or_create_global_step()
        checkpoint = tf.train.Checkpoint(step=step)
        restarted = CheckpointSaverHook(directory, save_steps=2, scaffold=None, saver=checkpoint)
        with monsession.SingularMonitoredSession(
            hooks=[restarted],
            scaffold=monsession.Scaffold(saver=checkpoint),
            checkpoint_dir=directory,
        ):
            state = restarted.state_dict()["timer"]
        expected = _saved_hooks(os.path.join(directory, "custom-5.hooks.json"))
        # The checkpoint of step 5 was written by end(), off the schedule:
        # its state holds the last trigger, step 4, so the restart saves at 6.
        assert state["last_triggered_step"] == 4
        assert expected["CheckpointSaverHook[0]"]["timer"]["last_triggered_step"] == 4


def test_state_files_go_with_the_checkpoints_max_to_keep_deletes(tmp_path):
    directory = str(tmp_path)
    with fresh_eager():
        step = monsession.get_or_create_global_step()
        checkpoint = tf.train.Checkpoint(step=step)

        @tf.function
        def train():
            step.assign_add(1)

        hook = CheckpointSaverHook(directory, save_steps=2, saver=checkpoint, max_to_keep=2)
        with monsession.SingularMonitoredSession(
            hooks=[hook], scaffold=monsession.Scaffold(saver=checkpoint), checkpoint_dir=directory
        ) as sess:
            for _ in range(7):
                sess.run(train)
        names = os.listdir(directory)
        indexes = sorted(n[: -len(".index")] for n in names if n.endswith(".index"))
        states = sorted(n[: -len(".hooks.json")] for n in names if n.endswith(".hooks.json"))
        assert states == indexes == ["model.ckpt-6", "model.ckpt-7"]
