"""Eager mode: tf.train.Checkpoint saved through a CheckpointManager, restored on restart."""

from __future__ import annotations

import os

import keras
import numpy as np
import pytest
import tensorflow as tf
from checkpoint_testing import CountingListener, checkpoint_steps, fresh_eager, load_step

import monsession
from monsession_hooks_checkpoint import CheckpointSaverHook

STATE_STEP = "step/.ATTRIBUTES/VARIABLE_VALUE"


@pytest.fixture(autouse=True)
def eager_state():
    with fresh_eager():
        yield


def _data():
    rng = np.random.default_rng(0)
    features = rng.normal(size=(16, 4)).astype("float32")
    return tf.constant(features), tf.constant(features @ rng.normal(size=(4, 2)).astype("float32"))


class KerasTrainer:
    """A Keras 3 model and optimizer trained by a tf.function step."""

    def __init__(self, seed):
        tf.compat.v1.reset_default_graph()  # A fresh global step, as in a new process.
        keras.utils.set_random_seed(seed)
        self.global_step = monsession.get_or_create_global_step()
        self.model = keras.Sequential(
            [keras.Input((4,)), keras.layers.Dense(8), keras.layers.Dense(2)]
        )
        self.optimizer = keras.optimizers.Adam(0.05)
        self.optimizer.build(self.model.trainable_variables)
        self.checkpoint = tf.train.Checkpoint(
            model=self.model, optimizer=self.optimizer, step=self.global_step
        )
        features, labels = _data()

        @tf.function
        def step():
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(self.model(features) - labels))
            grads = tape.gradient(loss, self.model.trainable_variables)
            self.optimizer.apply_gradients(zip(grads, self.model.trainable_variables, strict=True))
            self.global_step.assign_add(1)
            return {"loss": loss}

        self.step = step

    def train(self, logdir, steps, **kwargs):
        with monsession.MonitoredTrainingSession(
            checkpoint_dir=logdir,
            scaffold=monsession.Scaffold(saver=self.checkpoint),
            save_checkpoint_steps=2,
            **kwargs,
        ) as session:
            start = int(self.global_step.numpy())
            for _ in range(steps):
                session.run(self.step)
        return start

    def state(self):
        return [v.numpy() for v in self.model.variables + self.optimizer.variables]


def test_keras_model_and_optimizer_resume_exactly(tmp_path):
    logdir = str(tmp_path / "run")
    straight = KerasTrainer(seed=1)
    straight.train(str(tmp_path / "straight"), 6)

    first = KerasTrainer(seed=1)
    assert first.train(logdir, 3) == 0
    saved = first.state()
    assert tf.train.latest_checkpoint(logdir) == os.path.join(logdir, "model.ckpt-3")
    assert checkpoint_steps(logdir) == [0, 2, 3]

    restarted = KerasTrainer(seed=2)  # Other initial weights: all must come from the file.
    assert not np.allclose(restarted.state()[0], saved[0])
    with monsession.MonitoredTrainingSession(
        checkpoint_dir=logdir, scaffold=monsession.Scaffold(saver=restarted.checkpoint)
    ):
        assert int(restarted.global_step.numpy()) == 3
        for mine, theirs in zip(restarted.state(), saved, strict=True):
            np.testing.assert_array_equal(mine, theirs)
    assert restarted.train(logdir, 3) == 3
    for mine, theirs in zip(restarted.state(), straight.state(), strict=True):
        np.testing.assert_allclose(mine, theirs, rtol=1e-6, atol=1e-7)
    assert load_step(logdir, STATE_STEP) == 6


def test_async_saving_files_are_complete_after_end(tmp_path):
    logdir = str(tmp_path)
    trainer = KerasTrainer(seed=3)
    listener = CountingListener()
    hook = CheckpointSaverHook(
        logdir, save_steps=1, saver=trainer.checkpoint, listeners=[listener], async_save=True
    )
    with monsession.MonitoredSession(
        session_creator=monsession.ChiefSessionCreator(checkpoint_dir=logdir), hooks=[hook]
    ) as session:
        for _ in range(4):
            session.run(trainer.step)
        expected = trainer.state()
    assert listener.counts == {"begin": 1, "before_save": 5, "after_save": 5, "end": 1}
    assert tf.train.latest_checkpoint(logdir) == os.path.join(logdir, "model.ckpt-4")
    reader = tf.train.load_checkpoint(logdir)
    assert reader.get_tensor(STATE_STEP) == 4
    restored = KerasTrainer(seed=4)
    tf.train.Checkpoint(
        model=restored.model, optimizer=restored.optimizer, step=restored.global_step
    ).restore(tf.train.latest_checkpoint(logdir)).assert_consumed()
    for mine, theirs in zip(restored.state(), expected, strict=True):
        np.testing.assert_array_equal(mine, theirs)


def _counter_checkpoint():
    global_step = monsession.get_or_create_global_step()

    @tf.function
    def step():
        global_step.assign_add(1)
        return {}

    return global_step, step, tf.train.Checkpoint(step=global_step)


def test_max_to_keep_and_basename(tmp_path):
    _, step, checkpoint = _counter_checkpoint()
    hook = CheckpointSaverHook(
        str(tmp_path), save_steps=1, saver=checkpoint, checkpoint_basename="ck", max_to_keep=2
    )
    with monsession.SingularMonitoredSession(hooks=[hook], checkpoint_dir=str(tmp_path)) as sess:
        for _ in range(5):
            sess.run(step)
    assert checkpoint_steps(str(tmp_path), "ck") == [4, 5]
    state = tf.train.get_checkpoint_state(str(tmp_path))
    assert [os.path.basename(p) for p in state.all_model_checkpoint_paths] == ["ck-4", "ck-5"]
    assert not [name for name in os.listdir(tmp_path) if name.startswith(("graph", "events"))]


def test_users_checkpoint_manager_is_used_as_is(tmp_path):
    _, step, checkpoint = _counter_checkpoint()
    manager = tf.train.CheckpointManager(checkpoint, str(tmp_path), max_to_keep=1)
    hook = CheckpointSaverHook(str(tmp_path), save_steps=2, saver=manager)
    with monsession.SingularMonitoredSession(
        hooks=[hook], scaffold=monsession.Scaffold(saver=manager), checkpoint_dir=str(tmp_path)
    ) as sess:
        for _ in range(3):
            sess.run(step)
    assert manager.latest_checkpoint == os.path.join(str(tmp_path), "ckpt-3")
    assert checkpoint_steps(str(tmp_path), "ckpt") == [3]


def test_listener_counts_and_stop_in_eager_mode(tmp_path):
    _, step, checkpoint = _counter_checkpoint()
    listener = CountingListener()
    hook = CheckpointSaverHook(str(tmp_path), save_steps=1, saver=checkpoint, listeners=[listener])
    with monsession.SingularMonitoredSession(hooks=[hook], checkpoint_dir=str(tmp_path)) as sess:
        sess.run(step)
        sess.run(step)
        listener.ask_for_stop = True
        sess.run(step)
        assert sess.should_stop()
    assert listener.counts == {"begin": 1, "before_save": 4, "after_save": 4, "end": 1}
    assert listener.saved_steps == [0, 1, 2, 3]


def test_eager_needs_a_checkpoint_to_save(tmp_path):
    monsession.get_or_create_global_step()
    with pytest.raises(TypeError, match=r"eager mode there is no graph to save"):
        CheckpointSaverHook(str(tmp_path), save_steps=1).begin()
    with pytest.raises(TypeError, match=r"eager mode there is no graph to save"):
        CheckpointSaverHook(str(tmp_path), save_steps=1, scaffold=monsession.Scaffold()).begin()


def test_without_saver_the_checkpoint_of_the_savers_collection_is_saved(tmp_path):
    global_step, step, checkpoint = _counter_checkpoint()
    savers = tf.compat.v1.GraphKeys.SAVERS
    tf.compat.v1.add_to_collection(savers, checkpoint)  # As HooksCallback does under fit.
    hook = CheckpointSaverHook(str(tmp_path), save_steps=2)
    with monsession.MonitoredSession(hooks=[hook]) as session:
        for _ in range(3):
            session.run(step)
    assert checkpoint_steps(str(tmp_path)) == [0, 2, 3]
    assert load_step(str(tmp_path / "model.ckpt-2"), STATE_STEP) == 2
    tf.compat.v1.add_to_collection(savers, tf.train.Checkpoint(step=global_step))
    with pytest.raises(ValueError, match=r"holds 2 tf\.train\.Checkpoints; pass the one"):
        CheckpointSaverHook(str(tmp_path / "two"), save_steps=2).begin()


def test_checkpoint_manager_in_another_directory_is_refused(tmp_path):
    _, _, checkpoint = _counter_checkpoint()
    manager = tf.train.CheckpointManager(checkpoint, str(tmp_path / "elsewhere"), max_to_keep=1)
    with pytest.raises(ValueError, match=r"elsewhere.*checkpoint_dir"):
        CheckpointSaverHook(str(tmp_path / "here"), save_steps=1, saver=manager)
    hook = CheckpointSaverHook(
        str(tmp_path / "here"), save_steps=1, scaffold=monsession.Scaffold(saver=manager)
    )
    with pytest.raises(ValueError, match=r"elsewhere.*checkpoint_dir"):
        hook.begin()


def test_object_checkpoint_as_saver_is_refused_in_graph_mode(tmp_path):
    with tf.Graph().as_default():
        global_step = monsession.get_or_create_global_step()
        hook = CheckpointSaverHook(
            str(tmp_path), save_steps=1, saver=tf.train.Checkpoint(step=global_step)
        )
        with pytest.raises(TypeError, match="in graph mode saver must be"):
            hook.begin()


class CompleteAtAfterSave(CountingListener):
    """Checks at every `after_save` that the checkpoint is complete and the latest.

    Records the global step reached when `after_save` runs.
    """

    def __init__(self, directory, global_step):
        super().__init__()
        self.directory = directory
        self.global_step = global_step
        self.announced_at = []

    def after_save(self, session, global_step_value):
        self.announced_at.append(int(self.global_step.numpy()))
        latest = tf.train.latest_checkpoint(self.directory)
        assert latest == os.path.join(self.directory, f"model.ckpt-{global_step_value}")
        assert tf.train.load_checkpoint(latest).get_tensor(STATE_STEP) == global_step_value
        return super().after_save(session, global_step_value)


def test_keras_model_saves_in_the_background_by_default(tmp_path, caplog):
    """Every save of a Keras 3 model stays asynchronous and equals a synchronous one.

    TensorFlow's own asynchronous saving fails on the second save of a Keras
    3 model; before, the hook then saved synchronously (and by default
    always did). The background writer's files hold exactly the values of
    the step that saved (training goes on while they are written), under
    the keys of a synchronous save; `after_save` runs once they are complete,
    so for a background save a later step has run by then.
    """
    runs = {}
    for name, async_save in (("background", None), ("sync", False)):
        logdir = str(tmp_path / name)
        trainer = KerasTrainer(seed=5)
        listener = CompleteAtAfterSave(logdir, trainer.global_step)
        options = {} if async_save is None else {"async_save": async_save}
        hook = CheckpointSaverHook(
            logdir, save_steps=2, saver=trainer.checkpoint, listeners=[listener], **options
        )
        states = {}
        with caplog.at_level("WARNING", logger="tensorflow"):
            with monsession.SingularMonitoredSession(hooks=[hook], checkpoint_dir=logdir) as sess:
                states[0] = trainer.state()
                for step in range(1, 6):
                    sess.run(trainer.step)
                    if step % 2 == 0:
                        states[step] = trainer.state()
            states[5] = trainer.state()
        assert listener.saved_steps == [0, 2, 4, 5]
        assert listener.counts == {"begin": 1, "before_save": 4, "after_save": 4, "end": 1}
        later = [at > saved for at, saved in zip(listener.announced_at, [0, 2, 4], strict=False)]
        assert any(later) == (async_save is None), listener.announced_at
        runs[name] = states
        for step, expected in states.items():
            restored = KerasTrainer(seed=6)  # Other weights: every value comes from the file.
            restored.checkpoint.restore(
                os.path.join(logdir, f"model.ckpt-{step}")
            ).assert_consumed()
            assert int(restored.global_step.numpy()) == step
            for mine, theirs in zip(restored.state(), expected, strict=True):
                np.testing.assert_array_equal(mine, theirs)
    assert "saving synchronously" not in caplog.text
    readers = {name: tf.train.load_checkpoint(str(tmp_path / name)) for name in runs}
    shapes = readers["background"].get_variable_to_shape_map()
    assert shapes == readers["sync"].get_variable_to_shape_map()
    assert "save_counter/.ATTRIBUTES/VARIABLE_VALUE" in shapes
    assert "_CHECKPOINTABLE_OBJECT_GRAPH" in shapes
    for key in set(shapes) - {"_CHECKPOINTABLE_OBJECT_GRAPH"}:  # It holds Keras' unique names.
        np.testing.assert_array_equal(
            readers["background"].get_tensor(key), readers["sync"].get_tensor(key), err_msg=key
        )
