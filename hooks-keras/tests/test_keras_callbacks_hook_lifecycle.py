"""KerasCallbacksHook: what drives the callbacks in a session, call by call."""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf
from keras_hooks_testing import files, loop_run, make_model, trace_callback, weights

import monsession
from monsession_hooks_keras import KerasCallbacksHook


def test_without_epochs_the_loop_is_one_epoch_whose_batches_count_from_the_first_step():
    trace = []
    model = make_model()
    hook = KerasCallbacksHook([trace_callback(trace)], model)
    global_step = monsession.get_or_create_global_step()
    global_step.assign(5)  # A restored run: batches still count from 0.

    @tf.function
    def step():
        global_step.assign_add(1)
        return {"loss": tf.constant(1.0)}

    with monsession.MonitoredSession(hooks=[hook]) as session:
        for _ in range(2):
            session.run(step)
    # As fit(epochs=1): the epoch's logs are its last step's.
    assert trace == ["train_begin", "epoch_begin 0", "batch_begin 0", "batch_end 0 ['loss']",
                     "batch_begin 1", "batch_end 1 ['loss']", "epoch_end 0 ['loss']",
                     "train_end ['loss']"]  # fmt: skip


def test_a_hook_reused_in_a_second_session_begins_training_again():
    trace = []
    hook = KerasCallbacksHook([trace_callback(trace)], make_model())
    monsession.get_or_create_global_step()
    for _ in range(2):
        with monsession.MonitoredSession(hooks=[hook]):
            pass
    assert trace == ["train_begin", "train_end []", "train_begin", "train_end []"]


def test_stop_training_set_by_a_batch_callback_stops_after_that_step():
    epochs = []

    def stop(batch, logs):
        if epochs[-1] == 1 and batch == 0:  # The third step: batches restart at each epoch.
            model.stop_training = True

    model = make_model()
    callback = keras.callbacks.LambdaCallback(
        on_epoch_begin=lambda epoch, logs: epochs.append(epoch), on_train_batch_end=stop
    )
    loop_run(
        lambda m: [], epochs=3, model=model, keras_hook=lambda m: KerasCallbacksHook([callback], m)
    )
    assert int(model.optimizer.iterations) == 3
    assert epochs == [0, 1]


def test_a_program_without_global_step_gets_the_sessions_own():
    trace = []
    hook = KerasCallbacksHook([trace_callback(trace)], make_model())
    with monsession.MonitoredSession(hooks=[hook]) as session:  # It creates the global step.
        for _ in range(2):
            session.run(tf.function(lambda: {"loss": tf.constant(1.0)}))
    assert trace[2:6] == ["batch_begin 0", "batch_end 0 ['loss']", "batch_begin 1",
                          "batch_end 1 ['loss']"]  # fmt: skip


def test_epoch_callbacks_run_at_the_boundaries_of_monsession_epochs():
    trace = []
    model = make_model()

    def stop_after_second_epoch(epoch, logs):
        model.stop_training = epoch == 1

    callbacks = [
        keras.callbacks.LambdaCallback(
            on_epoch_begin=lambda epoch, logs: trace.append(f"begin {epoch}"),
            on_epoch_end=lambda epoch, logs: trace.append(f"end {epoch}"),
        ),
        keras.callbacks.LambdaCallback(on_epoch_end=stop_after_second_epoch),
    ]
    hook = KerasCallbacksHook(callbacks, model)
    data = monsession.Epochs(tf.data.Dataset.range(3), num_epochs=5)

    @tf.function
    def step(x):
        return {"loss": tf.cast(x, tf.float32)}

    with monsession.MonitoredSession(hooks=[hook]) as session:
        done = list(data.run(session, step))
    assert done == [0, 1]  # EarlyStopping-like: stop_training at an epoch's end ends the loop.
    assert trace == ["begin 0", "end 0", "begin 1", "end 1"]
    assert int(monsession.get_global_step().numpy()) == 6


def test_model_checkpoint_saves_every_n_batches_in_a_training_session_without_epochs(tmp_path):
    model = make_model()
    global_step = monsession.get_or_create_global_step()
    saved = {}

    @tf.function
    def step():
        for variable in model.trainable_variables:
            variable.assign_add(tf.ones_like(variable))
        global_step.assign_add(1)
        return {"loss": tf.constant(1.0)}

    checkpoint = keras.callbacks.ModelCheckpoint(
        str(tmp_path / "b{epoch}-{batch}.weights.h5"), save_weights_only=True, save_freq=3
    )
    keep = keras.callbacks.LambdaCallback(
        on_train_batch_end=lambda batch, logs: saved.setdefault(batch + 1, weights(model))
    )
    hook = KerasCallbacksHook([checkpoint, keep], model)
    with monsession.MonitoredTrainingSession(hooks=[hook]) as session:
        for _ in range(7):
            session.run(step)
    assert files(tmp_path) == ["b1-3.weights.h5", "b1-6.weights.h5"]
    for batch in (3, 6):
        loaded = make_model()
        loaded.load_weights(tmp_path / f"b1-{batch}.weights.h5")
        for value, expected in zip(weights(loaded), saved[batch], strict=True):
            np.testing.assert_allclose(value, expected)


def test_an_epoch_stopped_midway_ends_with_the_session():
    trace = []
    model = make_model()
    hook = KerasCallbacksHook([trace_callback(trace)], model, logs=())
    data = monsession.Epochs(tf.data.Dataset.range(3), num_epochs=5)

    @tf.function
    def step(x):
        return {"loss": tf.cast(x, tf.float32)}

    stop = monsession.StopAtStepHook(last_step=4)
    with monsession.MonitoredSession(hooks=[hook, stop]) as session:
        assert list(data.run(session, step)) == [0]
    assert [t for t in trace if "batch" not in t] == [
        "train_begin", "epoch_begin 0", "epoch_end 0 []", "epoch_begin 1", "epoch_end 1 []",
        "train_end []"]  # fmt: skip
