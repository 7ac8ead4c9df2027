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
