"""Shared helpers of the keras family's tests: one tiny model trained two ways.

`fit_run` trains with `model.fit`; `loop_run` trains the same model on the
same batches in a monsession loop whose step is the same computation
(`train_step`), so that callbacks and hooks can be compared side by side.
Event files are read with TensorBoard's own reader.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Callable, Iterable
from typing import Any

import keras
import numpy as np
import tensorflow as tf
from tensorboard.backend.event_processing import event_file_loader
from tensorboard.util import tensor_util

import monsession

BATCH = 4
X = (np.arange(24, dtype=np.float32).reshape(8, 3) / 10.0).astype(np.float32)
Y = (X.sum(axis=1, keepdims=True) * 0.5).astype(np.float32)
BATCHES = [(X[i : i + BATCH], Y[i : i + BATCH]) for i in range(0, len(X), BATCH)]


def fresh_state() -> None:
    """A fresh default graph (so a fresh global step) and fresh Keras names."""
    tf.compat.v1.reset_default_graph()
    keras.backend.clear_session()


def train_step(model: Any, x: Any, y: Any) -> Any:
    """One training step; records `tf.summary` "step_loss" at the default step."""
    with tf.GradientTape() as tape:
        y_pred = model(x, training=True)
        loss = model.compute_loss(x=x, y=y, y_pred=y_pred)
    tf.summary.scalar("step_loss", loss)
    grads = tape.gradient(loss, model.trainable_variables)
    model.optimizer.apply(grads, model.trainable_variables)
    return loss


class StepModel(keras.Sequential):
    """A Sequential model whose `fit` step is `train_step` (with its summary)."""

    def train_step(self, data: Any) -> Any:
        x, y = data
        loss = train_step(self, x, y)
        self.loss_tracker.update_state(loss)
        return {"loss": self.loss_tracker.result()}

    @property
    def metrics(self) -> list[Any]:
        return [self.loss_tracker]


def make_model(learning_rate: float = 0.01) -> Any:
    model = StepModel(
        [
            keras.Input((3,)),
            keras.layers.Dense(1, kernel_initializer="ones", bias_initializer="zeros"),
        ]
    )
    model.loss_tracker = keras.metrics.Mean(name="loss")
    model.compile(optimizer=keras.optimizers.SGD(learning_rate), loss="mse", jit_compile=False)
    return model


def fit_run(
    callbacks: list[Any],
    *,
    epochs: int = 3,
    x: Any = X,
    y: Any = Y,
    model: Any = None,
    verbose: int = 0,
) -> Any:
    """Trains with `model.fit` (batches of 4, not shuffled); returns the model."""
    model = model or make_model()
    model.fit(
        x, y, batch_size=BATCH, epochs=epochs, shuffle=False, verbose=verbose, callbacks=callbacks
    )
    return model


def _mean_loss_step(model: Any) -> Any:
    """A `tf.function` step that trains `model`, advances the global step and
    returns the running mean of the loss, as `fit`'s step does."""
    global_step = monsession.get_or_create_global_step()

    @tf.function
    def step(x: Any, y: Any) -> Any:
        loss = train_step(model, x, y)
        model.loss_tracker.update_state(loss)
        with tf.control_dependencies([loss]):
            global_step.assign_add(1)
        return {"loss": model.loss_tracker.result()}

    return step


def keras_loop_run(
    callbacks: list[Any],
    x: Any,
    y: Any,
    *,
    epochs: int | None,
    model: Any = None,
    **hook_arguments: Any,
) -> Any:
    """Trains with a `KerasCallbacksHook` in a monsession loop; returns the model.

    With `epochs`, `monsession.Epochs` runs that many epochs (and calls the
    hook's epoch methods); without, the loop runs each batch once and calls
    no epoch method. The step returns the running mean of the loss (reset
    by the hook when an epoch begins), as `fit`'s does.
    """
    from monsession_hooks_keras import KerasCallbacksHook

    model = model or make_model()
    step = _mean_loss_step(model)

    hook = KerasCallbacksHook(callbacks, model, epochs=epochs, **hook_arguments)
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(BATCH)
    with monsession.MonitoredSession(hooks=[hook]) as session:
        if epochs is not None:
            for _ in monsession.Epochs(dataset, num_epochs=epochs).run(session, step):
                pass
        else:
            for bx, by in dataset:
                if session.should_stop():
                    break
                session.run(step, feed_dict={"x": bx, "y": by})
    return model


def loop_run(
    make_hooks: Callable[[Any], Iterable[Any]],
    *,
    epochs: int = 3,
    x: Any = X,
    model: Any = None,
    keras_hook: Callable[[Any], Any] | None = None,
) -> Any:
    """Trains the same way in a monsession loop; returns the model.

    Args:
      make_hooks: Makes the session's hooks from the model.
      epochs: Epochs of two batches.
      x: The inputs (`Y` are the targets).
      model: The model, else a new one.
      keras_hook: Makes a `KerasCallbacksHook` from the model; the loop then
        calls its epoch methods with the epoch's mean loss, as `fit` logs it.
    """
    model = model or make_model()
    step = _mean_loss_step(model)

    hook = keras_hook(model) if keras_hook else None
    hooks = [*make_hooks(model), *([hook] if hook else [])]
    batches = [(x[i : i + BATCH], Y[i : i + BATCH]) for i in range(0, len(x), BATCH)]
    with monsession.MonitoredSession(hooks=hooks) as session:
        first = hook.initial_epoch if hook else 0
        for epoch in range(first, epochs):
            model.loss_tracker.reset_state()
            if hook:
                hook.epoch_begin(epoch)
            for bx, by in batches:
                if session.should_stop():
                    break
                outputs = session.run(step, feed_dict={"x": bx, "y": by})
            if session.should_stop():
                break
            if hook and hook.epoch_end(epoch, {"loss": outputs["loss"]}):
                break
    return model


def weights(model: Any) -> list[np.ndarray]:
    return [np.asarray(v) for v in model.get_weights()]


def event_files(logdir: Any) -> list[str]:
    return sorted(glob.glob(os.path.join(os.fspath(logdir), "**", "events.*"), recursive=True))


def scalars(logdir: Any, places: int = 4) -> list[tuple[str, int, str, float]]:
    """(run folder, step, tag, value) of every scalar summary under `logdir`, sorted."""
    found = []
    for path in event_files(logdir):
        run = os.path.relpath(os.path.dirname(path), os.fspath(logdir))
        for event in event_file_loader.LegacyEventFileLoader(path).Load():
            for value in event.summary.value:
                if value.HasField("simple_value"):
                    number = float(value.simple_value)
                else:
                    array = tensor_util.make_ndarray(value.tensor)
                    if array.size != 1 or array.dtype.kind not in "biuf":
                        continue
                    number = float(array.reshape(()))
                found.append((run, int(event.step), value.tag, round(number, places)))
    return sorted(found)


def files(directory: Any) -> list[str]:
    """Every file under `directory`, relative, sorted."""
    root = os.fspath(directory)
    return sorted(
        os.path.relpath(os.path.join(folder, name), root)
        for folder, _, names in os.walk(root)
        for name in names
    )


def trace_callback(trace: list[str]) -> Any:
    """A Keras callback that appends one line per call it gets to `trace`."""
    return keras.callbacks.LambdaCallback(
        on_train_begin=lambda logs: trace.append("train_begin"),
        on_epoch_begin=lambda epoch, logs: trace.append(f"epoch_begin {epoch}"),
        on_train_batch_begin=lambda batch, logs: trace.append(f"batch_begin {batch}"),
        on_train_batch_end=lambda batch, logs: trace.append(f"batch_end {batch} {sorted(logs)}"),
        on_epoch_end=lambda epoch, logs: trace.append(f"epoch_end {epoch} {sorted(logs)}"),
        on_train_end=lambda logs: trace.append(f"train_end {sorted(logs or {})}"),
    )
