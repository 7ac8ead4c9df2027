"""LoggingTensorHook: which steps log, what values, at_end, formatter, in both modes.

The first tests follow TensorFlow's own LoggingTensorHookTest (graph mode,
driving the hook through `monsession.testing.hooked_session`), reading the lines from
TensorFlow's "tensorflow" logger with caplog; the hook logs there as TensorFlow's does, so
patching `tf_logging.info` as TensorFlow's tests do sees them too (tested in both modes).
"""

from __future__ import annotations

import re
import time
from unittest import mock

import numpy as np
import pytest
import tensorflow as tf
from logging_hooks_testing import (
    LOGGER,
    MODES,
    FetchRecorder,
    capture_info,
    expected_losses,
    messages,
    program_in,
    train,
)
from tensorflow.python.platform import tf_logging

import monsession
import monsession.testing
from monsession_hooks_logging import LoggingTensorHook

MOCK_START_TIME = 1484695987.209386


@pytest.mark.parametrize("mode", MODES)
def test_a_patched_tensorflow_logger_sees_the_lines(mode):
    """TensorFlow's own pattern: ``mock.patch.object(tf_logging, "info")``."""
    with program_in(mode) as program, mock.patch.object(tf_logging, "info") as mock_log:
        hook = LoggingTensorHook({"loss": program.loss}, every_n_iter=2)
        train(program, [hook], steps=3)
    lines = [call.args[0] % call.args[1:] for call in mock_log.call_args_list]
    lines = [line for line in lines if line.startswith("loss")]
    assert len(lines) == 2
    assert lines[0] == "loss = 16.0"
    value = re.fullmatch(r"loss = ([\d.]+) \(\d+\.\d{3} sec\)", lines[1]).group(1)
    assert float(value) == pytest.approx(expected_losses(3)[2])


# --- TensorFlow's LoggingTensorHookTest, on our hook --------------------------------------


def test_illegal_args_match_tensorflow():
    with pytest.raises(ValueError, match="nvalid every_n_iter"):
        LoggingTensorHook(tensors=["t"], every_n_iter=0)
    with pytest.raises(ValueError, match="nvalid every_n_iter"):
        LoggingTensorHook(tensors=["t"], every_n_iter=-10)
    with pytest.raises(ValueError, match="xactly one of"):
        LoggingTensorHook(tensors=["t"], every_n_iter=5, every_n_secs=5)
    with pytest.raises(ValueError, match="xactly one of"):
        LoggingTensorHook(tensors=["t"])


def _graph_session():
    t = tf.constant(42.0, name="foo")
    train_op = tf.constant(3)
    return t, train_op


def test_print_at_end_only(caplog):
    capture_info(caplog)
    with tf.Graph().as_default(), tf.compat.v1.Session() as sess:
        t, train_op = _graph_session()
        hook = LoggingTensorHook(tensors=[t.name], at_end=True)
        hook.begin()
        mon_sess = monsession.testing.hooked_session(sess, [hook])
        for _ in range(3):
            mon_sess.run(train_op)
        assert messages(caplog) == []
        hook.end(sess)
        assert messages(caplog) == ["foo:0 = 42.0"]


def _validate_print_every_n_steps(caplog, sess, at_end):
    t, train_op = _graph_session()
    hook = LoggingTensorHook(tensors=[t.name], every_n_iter=10, at_end=at_end)
    hook.begin()
    mon_sess = monsession.testing.hooked_session(sess, [hook])
    caplog.clear()
    mon_sess.run(train_op)
    assert messages(caplog) == [f"{t.name} = 42.0"]
    for _ in range(3):
        caplog.clear()
        for _ in range(9):
            mon_sess.run(train_op)
            assert messages(caplog) == []
        mon_sess.run(train_op)
        (line,) = messages(caplog)
        assert re.fullmatch(re.escape(t.name) + r" = 42\.0 \(\d+\.\d{3} sec\)", line)
    caplog.clear()
    mon_sess.run(train_op)
    assert messages(caplog) == []
    hook.end(sess)
    assert len(messages(caplog)) == (1 if at_end else 0)


@pytest.mark.parametrize("at_end", [False, True])
def test_print_every_n_steps(caplog, at_end):
    capture_info(caplog)
    with tf.Graph().as_default(), tf.compat.v1.Session() as sess:
        _validate_print_every_n_steps(caplog, sess, at_end)
        _validate_print_every_n_steps(caplog, sess, at_end)  # begin() resets the hook.


def test_print_first_step_has_no_elapsed_time(caplog):
    capture_info(caplog)
    with tf.Graph().as_default(), tf.compat.v1.Session() as sess:
        t, train_op = _graph_session()
        hook = LoggingTensorHook(tensors={"foo": t}, every_n_iter=1)
        hook.begin()
        monsession.testing.hooked_session(sess, [hook]).run(train_op)
        (record,) = [r for r in caplog.records if r.name == LOGGER]
        assert record.getMessage() == "foo = 42.0"
        assert "sec" not in str(record.args)


def _validate_print_every_n_secs(caplog, sess, at_end, mock_time):
    t, train_op = _graph_session()
    hook = LoggingTensorHook(tensors=[t.name], every_n_secs=1.0, at_end=at_end)
    hook.begin()
    mon_sess = monsession.testing.hooked_session(sess, [hook])
    caplog.clear()
    mon_sess.run(train_op)
    assert messages(caplog) == [f"{t.name} = 42.0"]
    caplog.clear()
    mon_sess.run(train_op)
    assert messages(caplog) == []
    mock_time.return_value += 1.0
    mon_sess.run(train_op)
    assert messages(caplog) == [f"{t.name} = 42.0 (1.000 sec)"]
    caplog.clear()
    hook.end(sess)
    assert messages(caplog) == ([f"{t.name} = 42.0 (0.000 sec)"] if at_end else [])


@pytest.mark.parametrize("at_end", [False, True])
def test_print_every_n_secs(caplog, at_end):
    capture_info(caplog)
    with (
        mock.patch.object(time, "time") as mock_time,
        tf.Graph().as_default(),
        tf.compat.v1.Session() as sess,
    ):
        mock_time.return_value = MOCK_START_TIME
        _validate_print_every_n_secs(caplog, sess, at_end, mock_time)
        _validate_print_every_n_secs(caplog, sess, at_end, mock_time)


def test_print_formatter(caplog):
    capture_info(caplog)
    with tf.Graph().as_default(), tf.compat.v1.Session() as sess:
        t, train_op = _graph_session()
        hook = LoggingTensorHook(
            tensors=[t.name], every_n_iter=10, formatter=lambda items: f"qqq={items[t.name]}"
        )
        hook.begin()
        monsession.testing.hooked_session(sess, [hook]).run(train_op)
        assert messages(caplog) == ["qqq=42.0"]


# --- Both modes, under MonitoredSession ----------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_every_n_iter_logs_local_steps_with_their_values(caplog, mode):
    capture_info(caplog)
    with program_in(mode) as program:
        hook = FetchRecorder(LoggingTensorHook({"loss": program.loss}, every_n_iter=3))
        train(program, [hook], steps=10)
    losses = expected_losses(10)
    lines = messages(caplog)
    assert [float(re.match(r"loss = ([\d.e-]+)", line).group(1)) for line in lines] == (
        pytest.approx([losses[0], losses[3], losses[6], losses[9]])
    )
    assert "sec" not in lines[0]
    assert all(re.search(r" \(\d+\.\d{3} sec\)$", line) for line in lines[1:])
    # Values are fetched on the logging steps only.
    assert hook.asked == [i % 3 == 0 for i in range(10)]
    assert hook.session_runs == [0] * 10


def test_steps_are_counted_by_the_hook_not_the_global_step(caplog):
    capture_info(caplog)
    with program_in("eager") as program:
        program.global_step.assign(50)
        hook = LoggingTensorHook([program.loss], every_n_iter=4)
        train(program, [hook], steps=5)
    assert len(messages(caplog)) == 2  # Local steps 0 and 4, whatever the global step.


@pytest.mark.parametrize("mode", MODES)
def test_at_end_logs_once_more_in_end(caplog, mode):
    capture_info(caplog)
    with program_in(mode) as program:
        hook = LoggingTensorHook({"loss": program.loss, "w": program.weight}, 5, at_end=True)
        train(program, [hook], steps=7)
    lines = messages(caplog)
    assert len(lines) == 3
    w_end = 4.0 * 0.8**7
    assert re.fullmatch(r"loss = [\d.]+, w = ([\d.]+) \(\d+\.\d{3} sec\)", lines[2])
    assert float(re.search(r"w = ([\d.]+)", lines[2]).group(1)) == pytest.approx(w_end)
    loss_end = float(re.match(r"loss = ([\d.]+)", lines[2]).group(1))
    if mode == "graph":  # The loss tensor is run once more, like TensorFlow.
        assert loss_end == pytest.approx(w_end**2)
    else:  # The step's output: the latest value the hook fetched (local step 5).
        assert loss_end == pytest.approx(expected_losses(6)[5])
    # The end line is off the schedule: the timer keeps its trigger at
    # iteration 5, so a restart from a state saved after it logs at 10.
    assert hook.state_dict()["timer"]["last_triggered_step"] == 5


@pytest.mark.parametrize("mode", MODES)
def test_formatter_gets_the_tagged_values(caplog, mode):
    capture_info(caplog)
    seen = []

    def formatter(values):
        seen.append(dict(values))
        return f"loss is {values['loss']:.2f}"

    with program_in(mode) as program:
        hook = LoggingTensorHook({"loss": program.loss}, every_n_iter=2, formatter=formatter)
        train(program, [hook], steps=3)
    losses = expected_losses(3)
    assert [v["loss"] for v in seen] == pytest.approx([losses[0], losses[2]])
    assert messages(caplog) == [f"loss is {losses[0]:.2f}", f"loss is {losses[2]:.2f}"]


@pytest.mark.parametrize("mode", MODES)
def test_every_n_secs_in_both_modes(caplog, mode):
    capture_info(caplog)
    with program_in(mode) as program, mock.patch.object(time, "time") as mock_time:
        mock_time.return_value = MOCK_START_TIME
        hook = LoggingTensorHook([program.loss], every_n_secs=10)
        with monsession.MonitoredSession(hooks=[hook]) as session:
            for i in range(7):
                mock_time.return_value = MOCK_START_TIME + 4 * i  # 0, 4, ..., 24 seconds.
                session.run(program.step)
    losses = expected_losses(7)
    lines = messages(caplog)
    assert len(lines) == 3  # At 0, 12 and 24 seconds.
    for line, step in zip(lines[1:], [3, 6], strict=True):
        value, elapsed = re.fullmatch(r"loss = ([\d.]+) \((.*) sec\)", line).groups()
        assert (float(value), elapsed) == (pytest.approx(losses[step]), "12.000")


def test_eager_list_of_names_and_variables_uses_names_as_tags(caplog):
    capture_info(caplog)
    with program_in("eager") as program:
        hook = LoggingTensorHook(["loss", program.weight], every_n_iter=100)
        train(program, [hook], steps=1)
    assert messages(caplog) == ["loss = 16.0, w:0 = 3.2"]


def test_eager_callables_and_tensors(caplog):
    capture_info(caplog)
    with program_in("eager") as program:
        hook = LoggingTensorHook(
            {"double_w": lambda: 2 * program.weight, "seven": tf.constant(7)}, every_n_iter=1
        )
        train(program, [hook], steps=1)
    assert messages(caplog) == ["double_w = 6.4, seven = 7"]


def test_arrays_are_printed_without_scientific_notation(caplog):
    capture_info(caplog)
    with tf.Graph().as_default(), tf.compat.v1.Session() as sess:
        t = tf.constant(np.array([1e-8, 1.0], dtype=np.float64), name="small")
        hook = LoggingTensorHook(["small"], every_n_iter=1)
        hook.begin()
        monsession.testing.hooked_session(sess, [hook]).run(tf.constant(0))
    assert messages(caplog) == ["small = [0.00000001 1.        ]"]
    assert t is not None
