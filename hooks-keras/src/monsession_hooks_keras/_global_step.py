"""The optimizer's iteration count as the global step, for hooks under `model.fit`."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import tensorflow as tf


def optimizer_step_variable(model: Any, owner: str) -> Any:
    """Returns the `tf.Variable` behind `model.optimizer.iterations`.

    Args:
      model: A compiled Keras 3 model.
      owner: Who asks, for messages.

    Raises:
      ValueError: If the model has no optimizer (it is not compiled), or its
        iteration count is not a TensorFlow variable (another Keras backend).
    """
    optimizer = getattr(model, "optimizer", None)
    iterations = getattr(optimizer, "iterations", None)
    if iterations is None:
        raise ValueError(
            f"{owner}: the model has no optimizer with an iteration count; compile it "
            "with model.compile(optimizer=...) before training."
        )
    variable = getattr(iterations, "value", iterations)
    if not isinstance(variable, tf.Variable):
        raise ValueError(
            f"{owner}: model.optimizer.iterations is {variable!r}, not a TensorFlow variable; "
            "monsession needs Keras 3 on the TensorFlow backend (KERAS_BACKEND=tensorflow)."
        )
    return variable


@contextlib.contextmanager
def fit_global_step(model: Any) -> Iterator[Any]:
    """Makes `model.optimizer.iterations` the global step while the block runs.

    Hooks find the global step with `monsession.get_global_step()` (which is
    `tf.compat.v1.train.get_global_step()`: the only variable of the default
    graph's ``GLOBAL_STEP`` collection). Under `model.fit` the step that
    training advances is the optimizer's iteration count, so `HooksCallback`
    puts that variable in the collection from train begin to train end; the
    collection's previous content (e.g. a global step the program created
    for a custom loop) is put back afterwards.

    ```python
    with fit_global_step(model) as step:
        assert monsession.get_global_step() is step
    ```

    Args:
      model: A compiled Keras 3 model (TensorFlow backend).

    Yields:
      The `tf.Variable` behind `model.optimizer.iterations`.

    Raises:
      ValueError: If the model has no optimizer, or not on the TensorFlow backend.
    """
    variable = optimizer_step_variable(model, "fit_global_step")
    collection = tf.compat.v1.get_collection_ref(tf.compat.v1.GraphKeys.GLOBAL_STEP)
    previous = list(collection)
    collection[:] = [variable]
    try:
        yield variable
    finally:
        collection[:] = previous


@contextlib.contextmanager
def fit_checkpoint(model: Any, step: Any) -> Iterator[Any]:
    """Offers the state of `model.fit` to hooks that save one while the block runs.

    Adds ``tf.train.Checkpoint(model=model, optimizer=model.optimizer, step=step)``
    to the default graph's ``SAVERS`` collection, where `CheckpointSaverHook`
    finds its state when it is given no saver (as graph mode finds its
    `Saver` there); removed at the end. A collection that already holds a
    `tf.train.Checkpoint` (the program's own) is left as it is.

    Args:
      model: A compiled Keras 3 model.
      step: The global step variable (`model.optimizer.iterations`).

    Yields:
      The checkpoint offered, or `None` if the program's was kept.
    """
    collection = tf.compat.v1.get_collection_ref(tf.compat.v1.GraphKeys.SAVERS)
    if any(
        isinstance(item, (tf.train.Checkpoint, tf.train.CheckpointManager)) for item in collection
    ):
        yield None
        return
    checkpoint = tf.train.Checkpoint(model=model, optimizer=model.optimizer, step=step)
    collection.append(checkpoint)
    try:
        yield checkpoint
    finally:
        if checkpoint in collection:
            collection.remove(checkpoint)
