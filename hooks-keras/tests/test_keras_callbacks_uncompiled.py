"""KerasCallbacksHook with a model that was never compiled, as custom loops have them.

The step applies its own `keras.optimizers.SGD`; the hook is given it
(`optimizer=`), or not. Event files are read back with TensorBoard's reader,
checkpoints with `load_weights`.
"""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf
from keras_hooks_testing import BATCHES, scalars

import monsession
from monsession_hooks_keras import KerasCallbacksHook

STEPS = 4


def _uncompiled() -> keras.Model:
    return keras.Sequential(
        [
            keras.Input((3,)),
            keras.layers.Dense(1, kernel_initializer="ones", bias_initializer="zeros"),
        ]
    )


def _train(model, step_optimizer, callbacks, **hook_arguments):
    """Trains STEPS steps in a loop without epochs; returns the kernel after each step."""
    global_step = monsession.get_or_create_global_step()

    @tf.function
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(model(x, training=True) - y))
        grads = tape.gradient(loss, model.trainable_variables)
        step_optimizer.apply(grads, model.trainable_variables)
        global_step.assign_add(1)
        return {"loss": loss}

    hook = KerasCallbacksHook(callbacks, model, verbose=0, **hook_arguments)
    kernels, losses = [], []
    with monsession.MonitoredSession(hooks=[hook]) as session:
        for index in range(STEPS):
            x, y = BATCHES[index % len(BATCHES)]
            losses.append(float(session.run(step, feed_dict={"x": x, "y": y})["loss"]))
            kernels.append(model.layers[0].kernel.numpy().copy())
    return kernels, losses


def test_tensorboard_checkpoints_and_lambdas_run_with_the_optimizer_given(tmp_path):
    model, optimizer = _uncompiled(), keras.optimizers.SGD(learning_rate=0.05)
    assert not hasattr(model, "optimizer")
    ends = []
    callbacks = [
        keras.callbacks.TensorBoard(str(tmp_path / "logs"), update_freq=1, write_graph=False),
        keras.callbacks.ModelCheckpoint(
            str(tmp_path / "ckpt" / "b{batch}.weights.h5"), save_weights_only=True, save_freq=2
        ),
        keras.callbacks.LambdaCallback(on_epoch_end=lambda epoch, logs: ends.append(logs)),
    ]
    kernels, losses = _train(model, optimizer, callbacks, optimizer=optimizer)

    assert model.optimizer is optimizer
    assert ends == [{"loss": pytest.approx(losses[-1])}]
    found = scalars(tmp_path / "logs")
    batch_losses = [(step, value) for run, step, tag, value in found if tag == "batch_loss"]
    assert batch_losses == [(step + 1, round(loss, 4)) for step, loss in enumerate(losses)]
    epoch_scalars = {
        tag: (step, value) for run, step, tag, value in found if tag.startswith("epoch")
    }
    assert epoch_scalars == {
        "epoch_loss": (0, round(losses[-1], 4)),
        "epoch_learning_rate": (0, 0.05),
    }
    assert sorted(p.name for p in (tmp_path / "ckpt").iterdir()) == [
        "b2.weights.h5",
        "b4.weights.h5",
    ]
    for batch in (2, 4):
        restored = _uncompiled()
        restored.optimizer = keras.optimizers.SGD()  # The file holds the optimizer's too.
        restored.optimizer.build(restored.trainable_variables)
        restored.load_weights(str(tmp_path / "ckpt" / f"b{batch}.weights.h5"))
        np.testing.assert_allclose(restored.layers[0].kernel.numpy(), kernels[batch - 1])
        assert int(restored.optimizer.iterations.numpy()) == batch


def test_without_an_optimizer_the_callbacks_that_do_not_need_one_run(tmp_path):
    model = _uncompiled()
    optimizer = keras.optimizers.SGD(learning_rate=0.05)
    callbacks = [
        keras.callbacks.TensorBoard(str(tmp_path / "logs"), update_freq=1, write_graph=False),
        keras.callbacks.CSVLogger(str(tmp_path / "log.csv")),
    ]
    _train(model, optimizer, callbacks)

    assert model.optimizer is None
    tags = sorted({tag for _, _, tag, _ in scalars(tmp_path / "logs")})
    assert tags == ["batch_loss", "epoch_loss"]  # No learning rate without an optimizer.
    assert (tmp_path / "log.csv").read_text().splitlines()[1].startswith("0,")


@pytest.mark.parametrize(
    "callback",
    [
        keras.callbacks.ReduceLROnPlateau(),
        keras.callbacks.LearningRateScheduler(lambda epoch: 0.1),
        keras.callbacks.TensorBoard("unused", write_steps_per_second=True, write_graph=False),
    ],
    ids=lambda callback: type(callback).__name__,
)
def test_a_callback_that_needs_an_optimizer_is_an_error_without_one(callback):
    with pytest.raises(ValueError, match=r"callbacks\[0\] is .*optimizer=optimizer"):
        KerasCallbacksHook([callback], _uncompiled())


def test_an_optimizer_other_than_the_compiled_one_is_an_error():
    model = _uncompiled()
    model.compile(optimizer=keras.optimizers.SGD(), loss="mse")
    with pytest.raises(ValueError, match="compiled with the optimizer"):
        KerasCallbacksHook([], model, optimizer=keras.optimizers.SGD())
    KerasCallbacksHook([], model, optimizer=model.optimizer)  # The same one is fine.
    with pytest.raises(TypeError, match="optimizer must be a Keras 3"):
        KerasCallbacksHook([], _uncompiled(), optimizer=tf.keras.optimizers.SGD)
