"""KerasCallbacksHook: bad input and misuse fail clearly, at construction where possible."""

from __future__ import annotations

import logging

import keras
import numpy as np
import pytest
import tensorflow as tf
from keras_hooks_testing import loop_run, make_model

import monsession
from monsession_hooks_keras import HooksCallback, KerasCallbacksHook


def test_a_callback_that_is_not_a_keras_3_callback_is_named():
    with pytest.raises(TypeError, match=r"KerasCallbacksHook: callbacks\[1\] is 'csv'"):
        KerasCallbacksHook([keras.callbacks.TerminateOnNaN(), "csv"], make_model())


def test_hooks_callback_belongs_in_fit_not_in_the_loop():
    with pytest.raises(ValueError, match=r"callbacks\[0\] is a HooksCallback"):
        KerasCallbacksHook([HooksCallback([])], make_model())


def test_the_model_must_be_a_keras_model():
    with pytest.raises(TypeError, match=r"KerasCallbacksHook: model must be a Keras 3 keras"):
        KerasCallbacksHook([], object())


def test_logs_must_be_names():
    with pytest.raises(TypeError, match="KerasCallbacksHook: logs must be the names"):
        KerasCallbacksHook([], make_model(), logs=[1])


def test_graph_mode_is_refused_at_construction_and_in_begin():
    model = make_model()
    hook = KerasCallbacksHook([], model)
    with tf.Graph().as_default():
        with pytest.raises(RuntimeError, match=r"eager mode only .* graph mode"):
            KerasCallbacksHook([], model)
        monsession.get_or_create_global_step()
        with pytest.raises(RuntimeError, match="eager mode only"):
            with monsession.MonitoredSession(hooks=[hook]):
                pass


def test_epoch_methods_outside_the_session_are_refused():
    hook = KerasCallbacksHook([], make_model())
    with pytest.raises(RuntimeError, match=r"KerasCallbacksHook.epoch_begin\(\) runs"):
        hook.epoch_begin(0)
    with pytest.raises(RuntimeError, match=r"KerasCallbacksHook.epoch_end\(\) runs"):
        hook.epoch_end(0)


def test_a_log_the_step_does_not_return_is_named():
    with pytest.raises(ValueError, match="KerasCallbacksHook fetches 'accuracy'"):
        loop_run(
            lambda model: [],
            keras_hook=lambda m: KerasCallbacksHook(
                [keras.callbacks.TerminateOnNaN()], m, logs=("loss", "accuracy")
            ),
        )


def test_tensorboard_write_graph_is_named_as_what_does_not_work_outside_fit(caplog, tmp_path):
    with caplog.at_level(logging.WARNING):
        KerasCallbacksHook([keras.callbacks.TensorBoard(str(tmp_path))], make_model())
    assert "callbacks[0] is TensorBoard(write_graph=True)" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        KerasCallbacksHook(
            [keras.callbacks.TensorBoard(str(tmp_path), write_graph=False)], make_model()
        )
    assert "TensorBoard" not in caplog.text


def test_a_hook_given_to_fit_as_a_callback_says_to_wrap_it_in_hooks_callback():
    model = make_model()
    x, y = np.zeros((8, 3), "float32"), np.zeros((8, 1), "float32")
    hook = monsession.StopAtStepHook(last_step=2)
    with pytest.raises(AttributeError) as raised:
        model.fit(x, y, epochs=1, verbose=0, callbacks=[hook])
    message = str(raised.value)
    assert message.startswith("StopAtStepHook is a monsession hook, not a Keras callback")
    assert "callbacks=[HooksCallback([...your hooks])]" in message
    assert "from monsession_hooks_keras import HooksCallback" in message
    # Still no such attribute: a plain tf.compat.v1.train hook to anything that asks.
    assert not hasattr(hook, "set_model") and getattr(hook, "on_epoch_end", None) is None
