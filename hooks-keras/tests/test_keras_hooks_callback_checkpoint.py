"""`CheckpointSaverHook` under `model.fit` without a saver: HooksCallback gives it the state."""

from __future__ import annotations

import glob
import os

import numpy as np
import pytest
import tensorflow as tf
from keras_hooks_testing import X, Y, fit_run, make_model, weights

from monsession.hooks import CheckpointSaverHook
from monsession_hooks_keras import HooksCallback

XS = np.concatenate([X, X])  # 16 rows: 4 steps per epoch.
YS = np.concatenate([Y, Y])
STEP = "step/.ATTRIBUTES/VARIABLE_VALUE"


def _steps(directory):
    return sorted(
        int(path[: -len(".index")].rsplit("-", 1)[1])
        for path in glob.glob(os.path.join(directory, "model.ckpt-*.index"))
    )


def _restored(prefix):
    """A fresh model restored from `prefix`, and the global step read back."""
    model = make_model()
    model.optimizer.build(model.trainable_variables)
    step = tf.Variable(0, dtype=tf.int64)
    checkpoint = tf.train.Checkpoint(model=model, optimizer=model.optimizer, step=step)
    checkpoint.restore(prefix).assert_existing_objects_matched()
    return model, int(step.numpy())


def test_the_model_optimizer_and_step_are_saved_without_a_saver(tmp_path):
    directory = str(tmp_path / "ckpt")
    model = fit_run([], epochs=0)
    callback = HooksCallback([CheckpointSaverHook(directory, save_steps=5)])
    kept = {}

    class Keep(tf.keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            kept[int(model.optimizer.iterations)] = weights(model)

    fit_run([callback, Keep()], epochs=3, x=XS, y=YS, model=model)
    assert _steps(directory) == [0, 5, 10, 12]  # At creation, every 5 steps, at the end.
    for step in (5, 10, 12):
        prefix = os.path.join(directory, f"model.ckpt-{step}")
        assert int(tf.train.load_checkpoint(prefix).get_tensor(STEP)) == step
        restored, restored_step = _restored(prefix)
        assert restored_step == step
        for value, expected in zip(weights(restored), kept[step], strict=True):
            np.testing.assert_allclose(value, expected)
        assert int(restored.optimizer.iterations) == step
    assert not tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.SAVERS)  # Taken back.


def test_a_second_fit_with_the_same_callback_continues_the_checkpoints(tmp_path):
    directory = str(tmp_path / "ckpt")
    model = fit_run([], epochs=0)
    callback = HooksCallback([CheckpointSaverHook(directory, save_steps=5)])
    fit_run([callback], epochs=3, x=XS, y=YS, model=model)
    written = os.path.getmtime(os.path.join(directory, "model.ckpt-12.index"))
    fit_run([callback], epochs=2, x=XS, y=YS, model=model)
    # The optimizer's iteration count goes on (12 -> 20); step 12 is not written again.
    # The save at the first fit's end is off the schedule, so the second fit saves
    # at the uninterrupted run's steps (15, 20), not 5 steps after 12.
    assert _steps(directory) == [5, 10, 12, 15, 20]  # max_to_keep=5 dropped step 0.
    assert os.path.getmtime(os.path.join(directory, "model.ckpt-12.index")) == written
    restored, step = _restored(tf.train.latest_checkpoint(directory))
    assert step == 20
    for value, expected in zip(weights(restored), weights(model), strict=True):
        np.testing.assert_allclose(value, expected)


def test_a_given_saver_or_the_programs_checkpoint_in_the_collection_wins(tmp_path):
    model = fit_run([], epochs=0)
    own = tf.train.Checkpoint(model=model)
    fit_run([HooksCallback([CheckpointSaverHook(str(tmp_path / "given"), save_steps=5,
                                                saver=own)])], epochs=1, model=model)  # fmt: skip
    tf.compat.v1.add_to_collection(tf.compat.v1.GraphKeys.SAVERS, own)
    fit_run([HooksCallback([CheckpointSaverHook(str(tmp_path / "collection"), save_steps=5)])],
            epochs=1, model=model)  # fmt: skip
    assert tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.SAVERS) == [own]
    for run in ("given", "collection"):
        names = tf.train.load_checkpoint(tf.train.latest_checkpoint(str(tmp_path / run)))
        saved = names.get_variable_to_shape_map()
        assert STEP not in saved and any(name.startswith("model/") for name in saved)


def test_an_eager_loop_without_a_saver_still_says_to_pass_one(tmp_path):
    import monsession

    monsession.get_or_create_global_step()
    hook = CheckpointSaverHook(str(tmp_path), save_steps=5)
    with pytest.raises(TypeError, match=r"pass the state as saver=tf\.train\.Checkpoint"):
        with monsession.MonitoredSession(hooks=[hook]):
            pass
