"""Standard Keras callbacks: the same effect in a monsession loop as under `model.fit`.

Both runs train the same model on the same batches (`keras_hooks_testing`);
the loop calls `KerasCallbacksHook.epoch_begin`/`epoch_end` with the epoch's
mean loss, as `fit` logs it.
"""

from __future__ import annotations

import csv
import re

import keras
import numpy as np
import pytest
from keras_hooks_testing import (
    X,
    files,
    fit_run,
    fresh_state,
    loop_run,
    make_model,
    scalars,
    weights,
)

from monsession_hooks_keras import KerasCallbacksHook


def both(make_callbacks, tmp_path, *, epochs=3, x=X):
    """Runs `fit` and the loop with callbacks made for a directory each."""
    fit_dir, loop_dir = tmp_path / "fit", tmp_path / "loop"
    fit_model = fit_run(make_callbacks(fit_dir), epochs=epochs, x=x)
    fresh_state()
    loop_model = loop_run(
        lambda model: [],
        epochs=epochs,
        x=x,
        keras_hook=lambda model: KerasCallbacksHook(make_callbacks(loop_dir), model, epochs=epochs),
    )
    return (fit_dir, fit_model), (loop_dir, loop_model)


def test_tensorboard_writes_the_same_scalars(tmp_path):
    def callbacks(directory):
        return [keras.callbacks.TensorBoard(directory / "tb", update_freq=1, write_graph=False)]

    (fit_dir, _), (loop_dir, _) = both(callbacks, tmp_path)
    fit_scalars = scalars(fit_dir / "tb")
    assert {tag for _, _, tag, _ in fit_scalars} >= {"batch_loss", "epoch_loss"}
    assert scalars(loop_dir / "tb") == fit_scalars


def test_model_checkpoint_saves_the_same_files_per_batch_and_per_epoch(tmp_path):
    def callbacks(directory):
        return [
            keras.callbacks.ModelCheckpoint(
                str(directory / "b{epoch}-{batch}.weights.h5"), save_weights_only=True, save_freq=3
            ),
            keras.callbacks.ModelCheckpoint(
                str(directory / "e{epoch}.weights.h5"), save_weights_only=True
            ),
        ]

    (fit_dir, _), (loop_dir, _) = both(callbacks, tmp_path)
    assert files(fit_dir) == ["b2-1.weights.h5", "b3-2.weights.h5", "e1.weights.h5",
                              "e2.weights.h5", "e3.weights.h5"]  # fmt: skip
    assert files(loop_dir) == files(fit_dir)
    for name in files(fit_dir):
        saved = []
        for directory in (fit_dir, loop_dir):
            model = make_model()
            model.load_weights(directory / name)
            saved.append(weights(model))
        for fit_value, loop_value in zip(*saved, strict=True):
            np.testing.assert_allclose(loop_value, fit_value, rtol=1e-5)


def test_csv_logger_writes_the_same_rows(tmp_path):
    def callbacks(directory):
        directory.mkdir(parents=True, exist_ok=True)
        return [keras.callbacks.CSVLogger(str(directory / "log.csv"))]

    (fit_dir, _), (loop_dir, _) = both(callbacks, tmp_path)
    rows = [list(csv.reader(open(d / "log.csv"))) for d in (fit_dir, loop_dir)]
    assert rows[0][0] == rows[1][0] == ["epoch", "loss", "val_loss"]  # Keras adds val_ columns.
    assert [r[0] for r in rows[1][1:]] == [r[0] for r in rows[0][1:]] == ["0", "1", "2"]
    np.testing.assert_allclose(
        [float(r[1]) for r in rows[1][1:]], [float(r[1]) for r in rows[0][1:]], rtol=1e-5
    )


def test_early_stopping_stops_after_the_same_epoch(tmp_path):
    def callbacks(directory):
        # Any improvement smaller than 10 is none: stops after the second epoch.
        return [keras.callbacks.EarlyStopping(monitor="loss", min_delta=10.0, patience=1)]

    (_, fit_model), (_, loop_model) = both(callbacks, tmp_path, epochs=5)
    assert int(fit_model.optimizer.iterations) == 4
    assert int(loop_model.optimizer.iterations) == 4


def test_learning_rate_callbacks_set_the_same_rates(tmp_path):
    def callbacks(directory):
        return [
            keras.callbacks.LearningRateScheduler(lambda epoch, lr: 0.01 / (epoch + 1)),
            keras.callbacks.ReduceLROnPlateau(monitor="loss", min_delta=10.0, patience=0,
                                              factor=0.5, min_lr=0.0),
        ]  # fmt: skip

    (_, fit_model), (_, loop_model) = both(callbacks, tmp_path)
    fit_rate = float(fit_model.optimizer.learning_rate)
    assert fit_rate == pytest.approx(0.01 / 3 * 0.5)
    assert float(loop_model.optimizer.learning_rate) == pytest.approx(fit_rate)
    np.testing.assert_allclose(weights(loop_model)[0], weights(fit_model)[0], rtol=1e-5)


def test_terminate_on_nan_stops_at_the_same_step(tmp_path):
    x = X.copy()
    x[5, 0] = np.nan  # In the second batch.

    def callbacks(directory):
        return [keras.callbacks.TerminateOnNaN()]

    (_, fit_model), (_, loop_model) = both(callbacks, tmp_path, x=x)
    assert int(fit_model.optimizer.iterations) == 2
    assert int(loop_model.optimizer.iterations) == 2


def test_lambda_callback_sees_the_same_calls(tmp_path):
    traces = []

    def callbacks(directory):
        trace = []
        traces.append(trace)
        return [
            keras.callbacks.LambdaCallback(
                on_train_begin=lambda logs: trace.append(("train_begin",)),
                on_epoch_begin=lambda epoch, logs: trace.append(("epoch_begin", epoch)),
                on_train_batch_begin=lambda batch, logs: trace.append(("batch_begin", batch)),
                on_train_batch_end=lambda batch, logs: trace.append(
                    ("batch_end", batch, round(logs["loss"], 4))
                ),
                on_epoch_end=lambda epoch, logs: trace.append(
                    ("epoch_end", epoch, round(logs["loss"], 4))
                ),
                on_train_end=lambda logs: trace.append(("train_end", round(logs["loss"], 4))),
            )
        ]

    both(callbacks, tmp_path, epochs=2)
    fit_trace, loop_trace = traces
    assert [t[0] for t in fit_trace].count("batch_end") == 4
    assert loop_trace == fit_trace


def test_progbar_logger_shows_the_same_progress(tmp_path, capsys):
    def callbacks(directory):
        return [keras.callbacks.ProgbarLogger()]

    def lines():
        text = capsys.readouterr().out
        plain = re.sub(r"\x1b\[[0-9;]*m", "", text)  # Without the bold of terminals.
        return [line.split(" ")[0] for line in plain.replace("\r", "\n").splitlines() if line]

    fit_run(callbacks(None), epochs=2, verbose=1)
    fit_lines = lines()
    fresh_state()
    loop_run(
        lambda model: [],
        epochs=2,
        keras_hook=lambda model: KerasCallbacksHook(callbacks(None), model, epochs=2, steps=2),
    )
    assert "Epoch" in fit_lines and "2/2" in fit_lines
    assert lines() == fit_lines


class _InterruptError(Exception):
    pass


def test_backup_and_restore_resumes_at_the_same_epoch_with_the_same_weights(tmp_path):
    def interrupted(directory):
        def stop(epoch, logs):
            if epoch == 1:
                raise _InterruptError

        return [
            keras.callbacks.BackupAndRestore(str(directory / "backup")),
            keras.callbacks.LambdaCallback(on_epoch_end=stop),
        ]

    epochs_seen = {}

    def resumed(directory):
        seen = epochs_seen.setdefault(directory.name, [])
        return [
            keras.callbacks.BackupAndRestore(str(directory / "backup")),
            keras.callbacks.LambdaCallback(on_epoch_begin=lambda epoch, logs: seen.append(epoch)),
        ]

    for directory in ("fit", "loop"):
        with pytest.raises(_InterruptError):
            if directory == "fit":
                fit_run(interrupted(tmp_path / "fit"))
            else:
                fresh_state()
                loop_run(
                    lambda model: [],
                    keras_hook=lambda m: KerasCallbacksHook(interrupted(tmp_path / "loop"), m),
                )
        assert files(tmp_path / directory / "backup")  # Epoch 0 is backed up.
    fresh_state()
    (fit_dir, fit_model), (loop_dir, loop_model) = both(resumed, tmp_path)
    # BackupAndRestore (listed first) backed up epoch 1 before the interruption.
    assert epochs_seen == {"fit": [2], "loop": [2]}
    np.testing.assert_allclose(weights(loop_model)[0], weights(fit_model)[0], rtol=1e-5)
    assert not files(fit_dir / "backup") and not files(loop_dir / "backup")  # Deleted at the end.


def test_logs_are_fetched_only_when_a_callback_reads_them(tmp_path):
    fetched = []

    class Spy(KerasCallbacksHook):
        def before_run(self, run_context):
            args = super().before_run(run_context)
            fetched.append(args)
            return args

    def run(callbacks, **arguments):
        fetched.clear()
        fresh_state()
        loop_run(lambda model: [], epochs=1, keras_hook=lambda m: Spy(callbacks, m, **arguments))
        return [None if args is None else args.fetches for args in fetched]

    # Epoch logs are the last step's unless the loop gives them: `logs=()` fetches nothing.
    epoch_callbacks = [keras.callbacks.EarlyStopping(monitor="loss"),
                       keras.callbacks.CSVLogger(str(tmp_path / "log.csv"))]  # fmt: skip
    assert run(epoch_callbacks) == [{"loss": "loss"}] * 2
    assert run(epoch_callbacks, logs=()) == [None, None]
    assert run([keras.callbacks.TerminateOnNaN()]) == [{"loss": "loss"}] * 2
    assert (
        run([keras.callbacks.LearningRateScheduler(lambda epoch, lr: lr)]) == [{"loss": "loss"}] * 2
    )
    assert run([keras.callbacks.LambdaCallback(on_epoch_begin=lambda e, logs: None)]) == [None] * 2
