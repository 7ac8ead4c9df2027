"""The Keras-callback rows: every standard Keras callback that runs in a custom loop.

One `KerasCallbacksHook` holds them all (with the model, never compiled, and
an SGD optimizer of its own, as custom loops have them); each row observes
one callback, from the files it writes or from a recorder callback placed
after it. The rows run in the keras-loop and keras-epochs columns and are
compared with the uninterrupted run of their column.

Not in the rows, and why (see also hooks-keras/README.md "The standard
callbacks", where each is tested side by side with `model.fit`):
`BackupAndRestore` is a second restore mechanism (its `on_train_begin` loads
its own backup into the model, over the checkpoint the session restored), so
a loop with monsession checkpoints has no use for it; `ProgbarLogger` only
prints for a terminal; `RemoteMonitor` posts to a server; `SwapEMAWeights`
needs a step that applies the optimizer with `use_ema`, which this program's
closed-form update does not.
"""

from __future__ import annotations

import csv
import glob
import math
import os
from typing import Any

import tensorflow as tf
from tensorboard.backend.event_processing import event_file_loader
from tensorboard.util import tensor_util

from driver_matrix import table
from driver_matrix.records import record

LEARNING_RATE = 0.1


def build(program: Any, epochs: int) -> Any:
    """The hook with every callback of the rows, writing under `<run dir>/keras`."""
    import keras

    from monsession_hooks_keras import KerasCallbacksHook

    # TerminateOnNaN prints to stdout, where child.py reports the jobs: to the log instead.
    keras.config.disable_interactive_logging()
    folder = program.path("keras")
    os.makedirs(folder, exist_ok=True)
    model = program.model

    def lr() -> float:
        return round(float(model.optimizer.learning_rate.numpy()), 6)

    def nan_loss(batch: int, logs: dict[str, Any]) -> None:
        # TerminateOnNaN reads "loss": the callbacks from here on see the probe (NaN at 30).
        logs["loss"] = logs["probe"]

    def batch_end(batch: int, logs: dict[str, Any]) -> None:
        step = int(logs["step"])
        record("keras-batch", batch=int(batch), step=step, loss=round(float(logs["w"]) ** 2, 3))
        if model.stop_training:
            record("keras-stop", step=step)

    def epoch_begin(epoch: int, logs: Any) -> None:
        record("keras-epoch-begin", epoch=int(epoch), step=10 * epoch, lr=lr())

    def epoch_end(epoch: int, logs: Any) -> None:
        record("keras-epoch-end", epoch=int(epoch), step=10 * (epoch + 1), lr=lr())

    def train_end(logs: Any) -> None:
        history, stopping = callbacks[-2], callbacks[3]
        record(
            "keras-end",
            history=[
                history.epoch,
                {k: [_number(v) for v in vs] for k, vs in history.history.items()},
            ],
            early=[
                stopping.stopped_epoch,
                stopping.best_epoch,
                _number(stopping.best),
                stopping.wait,
            ],
        )

    callbacks = [
        keras.callbacks.ModelCheckpoint(
            os.path.join(folder, "batch", "e{epoch:02d}-b{batch:02d}.weights.h5"),
            save_weights_only=True,
            save_freq=table.SAVE_STEPS,
        ),
        keras.callbacks.ModelCheckpoint(
            os.path.join(folder, "epoch", "e{epoch:02d}-loss{loss:.2f}.weights.h5"),
            save_weights_only=True,
        ),
        keras.callbacks.TensorBoard(
            os.path.join(folder, "board"), update_freq=1, write_graph=False
        ),
        keras.callbacks.EarlyStopping(monitor="loss", patience=2),
        keras.callbacks.LearningRateScheduler(lambda epoch, rate: round(float(rate) * 0.9, 6)),
        keras.callbacks.ReduceLROnPlateau(monitor="loss", patience=1, factor=0.5),
        keras.callbacks.CSVLogger(os.path.join(folder, "log.csv"), append=True),
        keras.callbacks.LambdaCallback(
            on_train_batch_end=lambda batch, logs: tf.summary.flush(),  # TensorBoard's writer.
            on_epoch_begin=epoch_begin,
            on_epoch_end=epoch_end,
            on_train_end=train_end,
        ),
        keras.callbacks.LambdaCallback(on_train_batch_end=nan_loss),
        keras.callbacks.TerminateOnNaN(),
        keras.callbacks.History(),
        keras.callbacks.LambdaCallback(on_train_batch_end=batch_end),
    ]
    return KerasCallbacksHook(
        callbacks,
        model,
        optimizer=keras.optimizers.SGD(learning_rate=LEARNING_RATE),
        logs=("loss", "probe", "step", "w"),
        epochs=epochs,
        steps=10,
        verbose=0,
    )


def _number(value: float, places: int = 3) -> float | str:
    """Rounded; NaN as "nan", which compares equal to itself."""
    return "nan" if math.isnan(value) else round(value, places)


def _weights(path: str) -> list[float]:
    import h5py

    found: list[float] = []

    def visit(name: str, item: Any) -> None:
        if isinstance(item, h5py.Dataset) and item.shape == () and "optimizer" not in name:
            found.append(round(float(item[()]), 4))

    with h5py.File(path, "r") as stream:
        stream.visititems(visit)
    return found


def _events(run: Any) -> list[Any]:
    found = []
    for path in sorted(glob.glob(os.path.join(run.directory, "keras", "board", "*", "events.*"))):
        folder = os.path.basename(os.path.dirname(path))
        for event in event_file_loader.LegacyEventFileLoader(path).Load():
            for value in event.summary.value:
                if not value.tag.startswith(("batch_", "epoch_")):
                    continue  # The step's own tf.summary calls, not the callback's.
                number = float(tensor_util.make_ndarray(value.tensor).reshape(()))
                key = (folder, value.tag, int(event.step))
                found.append({"t": event.wall_time, "step": key, "v": _number(number)})
    latest: dict[Any, Any] = {}
    for item in sorted(found, key=lambda item: item["t"]):
        folder, tag, step = item["step"]
        # The global step of a batch summary; an epoch's is its last batch's.
        global_step = step if tag.startswith("batch") else 10 * (step + 1)
        later = [s for t, s in run.starts if t > item["t"]]
        if all(global_step <= s for s in later):
            latest[item["step"]] = item["v"]
    return [[*key, value] for key, value in sorted(latest.items())]


def _records(run: Any, kind: str) -> list[dict[str, Any]]:
    return run.current([r for r in run.records if r["kind"] == kind])


def observe(run: Any, row: str) -> Any:
    """What a user sees of the callback of `row` in `run`."""
    folder = os.path.join(run.directory, "keras")
    if row == "keras-checkpoint":
        paths = sorted(glob.glob(os.path.join(folder, "batch", "*.h5")))
        return [[os.path.basename(p), _weights(p)] for p in paths]
    if row == "keras-checkpoint-epoch":
        return sorted(os.path.basename(p) for p in glob.glob(os.path.join(folder, "epoch", "*")))
    if row == "keras-csv":
        path = os.path.join(folder, "log.csv")
        if not os.path.exists(path):
            return []
        with open(path) as stream:
            return [[cell[:8] for cell in line] for line in csv.reader(stream)]
    if row == "keras-lambda":
        return {
            "batches": [[r["step"], r["batch"], r["loss"]] for r in _records(run, "keras-batch")],
            "epochs": [r["epoch"] for r in _records(run, "keras-epoch-end")],
        }
    if row == "keras-tensorboard":
        return _events(run)
    if row == "keras-lr":
        begins = [[r["epoch"], r["lr"]] for r in _records(run, "keras-epoch-begin")]
        ends = [[r["epoch"], r["lr"]] for r in _records(run, "keras-epoch-end")]
        return {"begin": begins, "end": ends}
    if row == "keras-nan":
        return [r["step"] for r in _records(run, "keras-stop")]
    ends = [r for r in run.records if r["kind"] == "keras-end"]
    last = ends[-1] if ends else {}
    if row == "keras-earlystop":
        return last.get("early")
    if row == "keras-history":
        return last.get("history")
    raise KeyError(row)
