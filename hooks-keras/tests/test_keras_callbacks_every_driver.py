"""Every standard Keras callback in a loop without epochs and with `monsession.Epochs`.

Each test runs `fit` and a monsession loop on the same model and 16 rows
(4 batches per epoch) and compares what the callback did. A loop without
epochs is one epoch: it is compared with `fit(epochs=1)`; the `Epochs`
loop runs 3 epochs, compared with `fit(epochs=3)`.
"""

from __future__ import annotations

import csv
import itertools
import re

import keras
import numpy as np
import pytest
from keras_hooks_testing import (
    files,
    fit_run,
    fresh_state,
    keras_loop_run,
    make_model,
    scalars,
    weights,
)

X = (np.arange(48, dtype=np.float32).reshape(16, 3) / 20.0).astype(np.float32)
Y = (X.sum(axis=1, keepdims=True) * 0.5).astype(np.float32)
DRIVERS = {"no_epochs": None, "epochs": 3}  # The loop's epochs; fit runs `or 1`.


def both(make_callbacks, tmp_path, driver, *, x=X, verbose=0, **hook_arguments):
    """Runs `fit`, then the loop, each with callbacks made for its own directory."""
    epochs = DRIVERS[driver]
    fit_dir, loop_dir = tmp_path / "fit", tmp_path / "loop"
    fit_dir.mkdir()
    loop_dir.mkdir()
    fit_model = fit_run(make_callbacks(fit_dir), epochs=epochs or 1, x=x, y=Y, verbose=verbose)
    fresh_state()
    loop_model = keras_loop_run(make_callbacks(loop_dir), x, Y, epochs=epochs, **hook_arguments)
    return (fit_dir, fit_model), (loop_dir, loop_model)


def assert_same_weights(loop_model, fit_model):
    for loop_value, fit_value in zip(weights(loop_model), weights(fit_model), strict=True):
        np.testing.assert_allclose(loop_value, fit_value, rtol=1e-5)


drivers = pytest.mark.parametrize("driver", sorted(DRIVERS))


def _recorders(directory, trace):
    """Callbacks that only record: checkpoints, rows, events, history and calls."""
    return [
        keras.callbacks.ModelCheckpoint(
            str(directory / "b{epoch}-{batch}.weights.h5"), save_weights_only=True, save_freq=3
        ),
        keras.callbacks.ModelCheckpoint(
            str(directory / "e{epoch}-{loss:.4f}.weights.h5"), save_weights_only=True
        ),
        keras.callbacks.CSVLogger(str(directory / "log.csv")),
        keras.callbacks.TensorBoard(directory / "tb", update_freq=1, write_graph=False),
        keras.callbacks.History(),
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
        ),
    ]


@pytest.fixture(scope="module", params=sorted(DRIVERS))
def recorded(request, tmp_path_factory):
    """One `fit` and one loop per driver, with every recording callback."""
    dirs, traces, histories = {}, {}, {}

    def make(directory):
        run = directory.name
        dirs[run], traces[run] = directory, []
        callbacks = _recorders(directory, traces[run])
        histories[run] = next(cb for cb in callbacks if type(cb) is keras.callbacks.History)
        return callbacks

    fresh_state()
    both(make, tmp_path_factory.mktemp(request.param), request.param)
    fresh_state()
    epochs = DRIVERS[request.param] or 1
    return {"driver": request.param, "epochs": epochs, "dirs": dirs, "trace": traces,
            "history": histories}  # fmt: skip


def test_model_checkpoint_saves_at_the_same_batches_and_epochs(recorded):
    fit_dir, loop_dir = recorded["dirs"]["fit"], recorded["dirs"]["loop"]
    saved = [name for name in files(fit_dir) if name.endswith(".weights.h5")]
    per_batch = [name for name in saved if name.startswith("b")]
    per_epoch = [name for name in saved if name.startswith("e")]
    # Every 3rd batch, counted across epochs (fit's rule); one file per epoch, named with its loss.
    assert per_batch == (["b1-3.weights.h5"] if recorded["driver"] == "no_epochs" else
                         ["b1-3.weights.h5", "b2-2.weights.h5", "b3-1.weights.h5",
                          "b3-4.weights.h5"])  # fmt: skip
    assert len(per_epoch) == recorded["epochs"]
    assert [name for name in files(loop_dir) if name.endswith(".weights.h5")] == saved
    for name in saved:
        loaded = []
        for directory in (fit_dir, loop_dir):
            model = make_model()
            model.load_weights(directory / name)
            loaded.append(model)
        assert_same_weights(*loaded)


def test_csv_logger_writes_one_row_per_epoch(recorded):
    fit_rows, loop_rows = (
        list(csv.reader(open(recorded["dirs"][run] / "log.csv"))) for run in ("fit", "loop")
    )
    assert loop_rows[0] == fit_rows[0]
    assert [row[0] for row in loop_rows[1:]] == [str(e) for e in range(recorded["epochs"])]
    assert [row[0] for row in fit_rows[1:]] == [row[0] for row in loop_rows[1:]]
    np.testing.assert_allclose(
        [float(r[1]) for r in loop_rows[1:]], [float(r[1]) for r in fit_rows[1:]], rtol=1e-5
    )


def test_tensorboard_writes_the_same_batch_and_epoch_scalars(recorded):
    fit_scalars = scalars(recorded["dirs"]["fit"] / "tb")
    epoch_steps = [step for _, step, tag, _ in fit_scalars if tag == "epoch_loss"]
    assert epoch_steps == list(range(recorded["epochs"]))
    assert {tag for _, _, tag, _ in fit_scalars} >= {"batch_loss", "epoch_loss"}
    assert scalars(recorded["dirs"]["loop"] / "tb") == fit_scalars


def test_history_records_the_same_epochs(recorded):
    fit_history, loop_history = recorded["history"]["fit"], recorded["history"]["loop"]
    assert loop_history.epoch == fit_history.epoch == list(range(recorded["epochs"]))
    np.testing.assert_allclose(loop_history.history["loss"], fit_history.history["loss"], rtol=1e-5)


def test_lambda_callback_sees_the_same_calls(recorded):
    fit_trace, loop_trace = (recorded["trace"][run] for run in ("fit", "loop"))
    assert [t[0] for t in fit_trace].count("epoch_end") == recorded["epochs"]
    assert [t[0] for t in fit_trace].count("batch_end") == 4 * recorded["epochs"]
    assert loop_trace == fit_trace


@drivers
def test_early_stopping_stops_with_epochs_and_sees_one_epoch_without(tmp_path, driver):
    stoppers = []

    def callbacks(directory):
        # Any improvement smaller than 10 is none: stops after the second epoch.
        stoppers.append(keras.callbacks.EarlyStopping(monitor="loss", min_delta=10.0, patience=1))
        return stoppers[-1:]

    (_, fit_model), (_, loop_model) = both(callbacks, tmp_path, driver)
    steps = 4 if driver == "no_epochs" else 8  # One epoch, or stopped after two.
    assert int(fit_model.optimizer.iterations) == int(loop_model.optimizer.iterations) == steps
    fit_stopper, loop_stopper = stoppers
    assert loop_stopper.stopped_epoch == fit_stopper.stopped_epoch
    assert loop_stopper.best == pytest.approx(fit_stopper.best, rel=1e-5)


@drivers
def test_learning_rate_callbacks_set_the_same_rates(tmp_path, driver):
    def callbacks(directory):
        return [
            keras.callbacks.LearningRateScheduler(lambda epoch, lr: 0.01 / (epoch + 1)),
            keras.callbacks.ReduceLROnPlateau(monitor="loss", min_delta=10.0, patience=0,
                                              factor=0.5, min_lr=0.0),
        ]  # fmt: skip

    (_, fit_model), (_, loop_model) = both(callbacks, tmp_path, driver)
    rate = float(loop_model.optimizer.learning_rate)
    # One epoch: the plateau's first epoch sets its best; three: the third rate, halved.
    assert rate == pytest.approx(0.01 if driver == "no_epochs" else 0.01 / 3 * 0.5)
    assert rate == pytest.approx(float(fit_model.optimizer.learning_rate))
    assert_same_weights(loop_model, fit_model)


@drivers
def test_terminate_on_nan_stops_at_the_nan_step(tmp_path, driver):
    x = X.copy()
    x[5, 0] = np.nan  # In the second batch.

    def callbacks(directory):
        return [keras.callbacks.TerminateOnNaN()]

    (_, fit_model), (_, loop_model) = both(callbacks, tmp_path, driver, x=x)
    assert int(fit_model.optimizer.iterations) == int(loop_model.optimizer.iterations) == 2


@drivers
def test_progbar_logger_shows_the_same_progress(tmp_path, driver, capsys):
    epochs = DRIVERS[driver]

    def lines():
        """The epoch headers and each epoch's last progress line.

        Keras's `Progbar` redraws the line between steps only when 0.05 s
        have passed since it last did: which intermediate counts appear,
        and whether the last count is drawn at the last step as well as
        when the epoch ends, depends on the machine's speed, not on the loop.
        """
        plain = re.sub(r"\x1b\[[0-9;]*m", "", capsys.readouterr().out)
        words = [line.split(" ")[0] for line in plain.replace("\r", "\n").splitlines() if line]
        kept = [word for word in words if word == "Epoch" or _is_last_count(word)]
        return [word for word, _ in itertools.groupby(kept)]

    fit_run([], epochs=0, x=X, y=Y)  # Built before the capture.
    capsys.readouterr()
    fit_run([keras.callbacks.ProgbarLogger()], epochs=epochs or 1, x=X, y=Y, verbose=1)
    fit_lines = lines()
    fresh_state()
    keras_loop_run([keras.callbacks.ProgbarLogger()], X, Y, epochs=epochs, steps=4)
    assert "4/4" in fit_lines and ("Epoch" in fit_lines) == (epochs is not None)
    assert lines() == fit_lines


@drivers
def test_backup_and_restore_backs_up_and_deletes_at_the_end(tmp_path, driver):
    seen = {}

    def callbacks(directory):
        backups = seen.setdefault(directory.name, [])
        return [
            keras.callbacks.BackupAndRestore(str(directory / "backup"), save_freq=3),
            keras.callbacks.LambdaCallback(
                on_epoch_end=lambda epoch, logs: backups.append(files(directory / "backup"))
            ),
        ]

    (fit_dir, fit_model), (loop_dir, loop_model) = both(callbacks, tmp_path, driver)
    assert seen["fit"] and all(seen["fit"])  # Backed up (every 3rd batch) before each epoch end.
    assert seen["loop"] == seen["fit"]
    assert not files(fit_dir / "backup") and not files(loop_dir / "backup")  # Deleted at the end.
    assert_same_weights(loop_model, fit_model)


def _ema_model():
    model = make_model()
    model.compile(optimizer=keras.optimizers.SGD(0.01, use_ema=True), loss="mse",
                  jit_compile=False)  # fmt: skip
    return model


@drivers
def test_swap_ema_weights_swaps_in_the_same_averages(tmp_path, driver):
    epochs = DRIVERS[driver]
    inside = {}  # Weights seen at each epoch's end, inside the swap: the EMA.

    def callbacks(run, model):
        return [
            keras.callbacks.SwapEMAWeights(swap_on_epoch=True),
            keras.callbacks.LambdaCallback(
                on_epoch_end=lambda epoch, logs: inside.setdefault(run, []).append(weights(model))
            ),
        ]

    fit_model = _ema_model()
    fit_run(callbacks("fit", fit_model), epochs=epochs or 1, x=X, y=Y, model=fit_model)
    fresh_state()
    loop_model = _ema_model()
    keras_loop_run(callbacks("loop", loop_model), X, Y, epochs=epochs, model=loop_model)
    assert len(inside["fit"]) == len(inside["loop"]) == (epochs or 1)
    for fit_seen, loop_seen in zip(inside["fit"], inside["loop"], strict=True):
        for fit_value, loop_value in zip(fit_seen, loop_seen, strict=True):
            np.testing.assert_allclose(loop_value, fit_value, rtol=1e-5)
    assert_same_weights(loop_model, fit_model)


def _is_last_count(word: str) -> bool:
    """Whether `word` is a progress count at its end, e.g. ``"4/4"``."""
    done, _, total = word.partition("/")
    return done.isdigit() and done == total
