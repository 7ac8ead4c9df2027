"""Each Keras private name of `_keras_compat` still means what the family relies on."""

from __future__ import annotations

import keras
from keras_hooks_testing import fit_run

from monsession_hooks_keras import _keras_compat


def test_default_marker_marks_the_no_op_batch_methods_only():
    base = keras.callbacks.Callback()
    for name in ("on_train_batch_begin", "on_train_batch_end", "on_batch_begin", "on_batch_end"):
        assert _keras_compat.is_default(getattr(base, name))
    assert not _keras_compat.is_default(keras.callbacks.TerminateOnNaN().on_batch_end)
    assert not _keras_compat.is_default(
        keras.callbacks.LambdaCallback(on_train_batch_end=lambda b, logs: None).on_train_batch_end
    )


def test_initial_epoch_is_where_backup_and_restore_resumes_fit(tmp_path):
    model = fit_run([], epochs=0)
    assert _keras_compat.initial_epoch(model) == 0
    # What an interrupted fit leaves behind after backing up its first epoch.
    tmp_path.mkdir(exist_ok=True)
    (tmp_path / "training_metadata.json").write_text('{"epoch": 1, "batch": 0}')
    model.save_weights(str(tmp_path / "latest.weights.h5"))
    seen = []
    fit_run(
        [keras.callbacks.BackupAndRestore(str(tmp_path)),
         keras.callbacks.LambdaCallback(on_epoch_begin=lambda epoch, logs: seen.append(epoch))],
        epochs=2, model=model,
    )  # fmt: skip
    assert seen == [1]
    assert _keras_compat.initial_epoch(model) == 1


def _trained_callbacks(tmp_path):
    """One of each callback of CALLBACK_STATE, after a batch and an epoch of training."""
    callbacks = [
        keras.callbacks.ModelCheckpoint(
            str(tmp_path / "m.weights.h5"), save_weights_only=True, save_freq=1
        ),
        keras.callbacks.BackupAndRestore(str(tmp_path / "backup"), save_freq=1),
        keras.callbacks.TensorBoard(str(tmp_path / "logs"), write_graph=False),
        keras.callbacks.EarlyStopping(monitor="loss"),
        keras.callbacks.ReduceLROnPlateau(monitor="loss"),
        keras.callbacks.History(),
    ]
    fit_run(callbacks, epochs=1)
    return callbacks


def test_each_callback_state_attribute_is_set_by_training(tmp_path):
    callbacks = _trained_callbacks(tmp_path)
    assert sorted(type(c).__name__ for c in callbacks) == sorted(_keras_compat.CALLBACK_STATE)
    for callback in callbacks:
        steps, epochs = _keras_compat.state_attributes(callback)
        assert steps + epochs == sum(_keras_compat.CALLBACK_STATE[type(callback).__name__], ())
        found = _keras_compat.read_attributes(callback, steps + epochs)
        assert sorted(found) == sorted(steps + epochs), type(callback).__name__


def test_the_batch_counters_are_what_the_callbacks_count_with(tmp_path):
    callbacks = _trained_callbacks(tmp_path)  # Two batches in one epoch.
    checkpoint, backup, board = callbacks[:3]
    names = ("_batches_seen_since_last_saving", "_last_batch_seen", "_current_epoch")
    # Saved after each batch; BackupAndRestore moves to the next epoch at its end.
    assert _keras_compat.read_attributes(checkpoint, names) == dict(
        zip(names, (0, 1, 0), strict=True)
    )
    assert _keras_compat.read_attributes(backup, names) == dict(zip(names, (0, 0, 1), strict=True))
    assert _keras_compat.read_attributes(board, ("_global_train_batch",)) == {
        "_global_train_batch": 2
    }
    # Put back, the counter decides the next save: 2 batches seen of save_freq=3.
    saver = keras.callbacks.ModelCheckpoint(
        str(tmp_path / "n{batch}.weights.h5"), save_weights_only=True, save_freq=3
    )
    saver.set_model(fit_run([], epochs=0))
    saver.on_epoch_begin(0)
    _keras_compat.write_attributes(
        saver, {"_batches_seen_since_last_saving": 2, "_last_batch_seen": 1}
    )
    saver.on_train_batch_end(2, {})
    assert (tmp_path / "n3.weights.h5").exists()
