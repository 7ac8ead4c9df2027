"""`on_failure(session, error)`: hooks hear of a failed session, instead of `end()`."""

from __future__ import annotations

import logging

import pytest
import tensorflow as tf

import monsession


class Recorder(monsession.SessionRunHook):
    """Records its end()/on_failure() calls, with the global step it reads then."""

    def __init__(self, name, calls, global_step, fail_with=None):
        self.name = name
        self.calls = calls
        self.global_step = global_step
        self.fail_with = fail_with

    def end(self, session):
        self.calls.append((self.name, "end"))

    def on_failure(self, session, error):
        # The session still runs: on_failure comes before it closes.
        step = int(session.run(self.global_step))
        self.calls.append((self.name, "on_failure", error, step))
        if self.fail_with is not None:
            raise self.fail_with


class TensorFlowHook(tf.compat.v1.train.SessionRunHook):
    """A hook written for TensorFlow: no on_failure()."""

    def __init__(self, calls):
        self.calls = calls

    def end(self, session):
        self.calls.append(("tf", "end"))


def _session(program, hooks):
    return monsession.MonitoredSession(
        session_creator=monsession.ChiefSessionCreator(scaffold=program.scaffold()), hooks=hooks
    )


def test_hooks_hear_of_the_error_in_order_before_the_session_closes(program):
    calls = []
    hooks = [Recorder(name, calls, program.global_step) for name in ("a", "b")]
    error = ValueError("broken input")
    with pytest.raises(ValueError) as raised:
        with _session(program, hooks) as sess:
            sess.run(program.step)
            sess.run(program.step)
            raise error
    assert raised.value is error
    assert calls == [("a", "on_failure", error, 2), ("b", "on_failure", error, 2)]
    assert sess._is_closed()


def test_an_error_in_on_failure_is_logged_and_does_not_mask_the_original(program, caplog):
    calls = []
    hooks = [
        Recorder("a", calls, program.global_step, fail_with=RuntimeError("hook broke")),
        Recorder("b", calls, program.global_step),
    ]
    error = tf.errors.InvalidArgumentError(None, None, "bad record")
    with caplog.at_level(logging.ERROR, logger="monsession"):
        with pytest.raises(tf.errors.InvalidArgumentError) as raised:
            with _session(program, hooks) as sess:
                sess.run(program.step)
                raise error
    assert raised.value is error
    assert [call[:2] for call in calls] == [("a", "on_failure"), ("b", "on_failure")]
    assert "Recorder.on_failure() raised; the session's own error (InvalidArgumentError" in (
        caplog.text
    )
    assert "hook broke" in caplog.text  # The hook's traceback is logged.


def test_a_keyboard_interrupt_is_a_failure(program):
    calls = []
    with pytest.raises(KeyboardInterrupt):
        with _session(program, [Recorder("a", calls, program.global_step)]) as sess:
            sess.run(program.step)
            raise KeyboardInterrupt
    assert [call[:2] for call in calls] == [("a", "on_failure")]


def test_a_clean_exit_calls_end_only(program):
    calls = []
    with _session(program, [Recorder("a", calls, program.global_step)]) as sess:
        sess.run(program.step)
    assert calls == [("a", "end")]


@pytest.mark.parametrize(
    "end_of_data", [tf.errors.OutOfRangeError(None, None, "End of sequence"), StopIteration()]
)
def test_the_end_of_data_is_a_clean_exit(program, end_of_data):
    calls = []
    with _session(program, [Recorder("a", calls, program.global_step)]) as sess:
        sess.run(program.step)
        raise end_of_data
    assert calls == [("a", "end")]


def test_tensorflow_hooks_without_on_failure_are_skipped(graph):
    calls = []
    global_step = monsession.get_or_create_global_step()
    step = tf.compat.v1.assign_add(global_step, 1)
    with pytest.raises(ValueError, match="boom"):
        with monsession.MonitoredSession(
            hooks=[TensorFlowHook(calls), Recorder("ours", calls, global_step)]
        ) as sess:
            sess.run(step)
            raise ValueError("boom")
    assert [call[:2] for call in calls] == [("ours", "on_failure")]
