"""SIGTERM and SIGINT stop a session at a step boundary, then are handed on.

The subprocess tests send real signals to a training child (signal_child.py)
once it ran a few steps; the in-process tests raise signals in pytest's main
thread with recording handlers installed, so nothing ends the test process.
"""

from __future__ import annotations

import logging
import os
import signal
import threading

import pytest
import tensorflow as tf

import monsession
import monsession.testing

CHILD = os.path.join(os.path.dirname(__file__), "signal_child.py")
WATCHED = (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1)
PHASES = ["graph-user", "eager-for-loop", "graph-off", "eager-sigint-caught", "graph-sigterm"]


@pytest.fixture(scope="module")
def child_run():
    """One child through every phase (one TensorFlow import for all)."""
    return monsession.testing.run_signal_phases(CHILD, PHASES)


@pytest.mark.parametrize("phase", ["graph-user", "eager-for-loop"])
def test_sigterm_stops_after_the_current_step_then_the_users_handler_runs(child_run, phase):
    assert child_run.steps("END", phase) == [child_run.last_step(phase)], child_run.stderr[-3000:]
    assert child_run.tagged("USER-HANDLER", phase) == [str(int(signal.SIGTERM))]
    assert child_run.index("END", phase) < child_run.index("USER-HANDLER", phase)
    # The user's handler returned: the `with` block was left normally.
    assert child_run.index("USER-HANDLER", phase) < child_run.index("AFTER-WITH", phase)


def test_stop_on_signals_false_leaves_sigterm_to_the_users_handler(child_run):
    phase = "graph-off"
    handled = child_run.index("USER-HANDLER", phase)
    ran_after = [i for i, line in enumerate(child_run.lines) if line.startswith(f"RAN {phase} ")]
    assert ran_after[-1] > handled  # Called at once; training went on.
    assert child_run.last_step(phase) == 25
    assert child_run.steps("END", phase) == [25]


def test_sigint_raises_keyboard_interrupt_after_end(child_run):
    phase = "eager-sigint-caught"
    assert child_run.steps("END", phase) == [child_run.last_step(phase)], child_run.stderr[-3000:]
    assert child_run.tagged("CAUGHT", phase) == ["KeyboardInterrupt"]
    assert child_run.tagged("AFTER-WITH", phase) == []
    assert child_run.tagged("FAILURE", phase) == []  # An interruption at a step boundary.


def test_sigterm_with_its_default_action_ends_the_process_after_end(child_run):
    phase = "graph-sigterm"
    assert child_run.steps("END", phase) == [child_run.last_step(phase)], child_run.stderr[-3000:]
    assert child_run.returncode == -signal.SIGTERM  # Killed by SIGTERM, as without monsession.
    assert child_run.tagged("AFTER-WITH", phase) == []
    assert "SIGTERM received; stopping after the current step" in child_run.stderr


# In-process: the handlers are recorded, and restored after each test.


@pytest.fixture
def calls():
    """A list that the recording handlers and hooks append to; handlers restored after.

    SIGINT starts at Python's own handler, as in a program run in a terminal
    (pytest started from a background job inherits it ignored).
    """
    previous = {signum: signal.getsignal(signum) for signum in WATCHED}
    signal.signal(signal.SIGINT, signal.default_int_handler)
    yield []
    for signum, handler in previous.items():
        signal.signal(signum, handler)


def recording_handler(calls, name="user"):
    def handler(signum, frame):
        calls.append((name, signal.Signals(signum).name))

    return handler


class RecordEnd(monsession.SessionRunHook):
    def __init__(self, calls, name="end"):
        self.calls = calls
        self.name = name

    def end(self, session):
        self.calls.append((self.name, "end"))


def _train(sess, step, signal_at=(), limit=50):
    """Runs steps until should_stop(); raises the given signals after step 3."""
    ran = 0
    while not sess.should_stop() and ran < limit:
        sess.run(step)
        ran += 1
        if ran == 3:
            for signum in signal_at:
                signal.raise_signal(signum)
    return ran


def test_the_step_boundary_in_process(program, calls):
    users = recording_handler(calls)
    signal.signal(signal.SIGTERM, users)
    with monsession.MonitoredSession(
        session_creator=monsession.ChiefSessionCreator(scaffold=program.scaffold()),
        hooks=[RecordEnd(calls)],
    ) as sess:
        ran = _train(sess, program.step, [signal.SIGTERM])
        assert sess.should_stop()
        assert calls == []  # Nothing handed on while the session is open.
    assert ran == 3
    assert calls == [("end", "end"), ("user", "SIGTERM")]
    assert signal.getsignal(signal.SIGTERM) is users  # Restored.


def test_without_a_hook_that_ends_monitored_session_leaves_signals_alone(graph, calls):
    step = tf.compat.v1.assign_add(monsession.get_or_create_global_step(), 1)
    before = signal.getsignal(signal.SIGTERM)
    with monsession.MonitoredSession(hooks=[monsession.StopAtStepHook(last_step=2)]) as sess:
        assert signal.getsignal(signal.SIGTERM) is before
        _train(sess, step)
    with monsession.MonitoredSession(hooks=[RecordEnd(calls)]) as sess:
        assert signal.getsignal(signal.SIGTERM) is not before
        assert signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    assert signal.getsignal(signal.SIGTERM) is before
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_monitored_training_session_stops_on_signals_by_default(graph, calls):
    monsession.get_or_create_global_step()
    before = signal.getsignal(signal.SIGTERM)
    with monsession.MonitoredTrainingSession(log_step_count_steps=None) as sess:
        assert signal.getsignal(signal.SIGTERM) is not before
        assert not sess.should_stop()
    with monsession.MonitoredTrainingSession(stop_on_signals=False) as sess:
        assert signal.getsignal(signal.SIGTERM) is before
    assert signal.getsignal(signal.SIGTERM) is before


def test_other_signals_and_a_second_signal(graph, calls):
    step = tf.compat.v1.assign_add(monsession.get_or_create_global_step(), 1)
    signal.signal(signal.SIGUSR1, recording_handler(calls))
    sigterm = signal.getsignal(signal.SIGTERM)
    with monsession.MonitoredSession(
        hooks=[RecordEnd(calls)], stop_on_signals=[signal.SIGUSR1]
    ) as sess:
        assert signal.getsignal(signal.SIGTERM) is sigterm
        # The second signal goes to the user's handler at once; the stop stays.
        ran = _train(sess, step, [signal.SIGUSR1, signal.SIGUSR1])
        assert calls == [("user", "SIGUSR1")]
    assert ran == 3
    assert calls == [("user", "SIGUSR1"), ("end", "end")]  # Handed on once only.


def test_an_ignored_signal_stays_ignored(graph, calls, caplog):
    """As in a background job (`nohup ... &`): left ignored, and said only at DEBUG.

    An INFO line about it would make a user's log (and the docs' output)
    depend on how the program was started.
    """
    monsession.get_or_create_global_step()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with caplog.at_level(logging.DEBUG, logger="monsession"):
        with monsession.MonitoredSession(hooks=[RecordEnd(calls)]):
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
            assert signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
    said = [r for r in caplog.records if "SIGINT is ignored in this process" in r.getMessage()]
    assert [r.levelno for r in said] == [logging.DEBUG]


def test_nested_sessions_hand_the_signal_down(graph, calls):
    step = tf.compat.v1.assign_add(monsession.get_or_create_global_step(), 1)
    signal.signal(signal.SIGTERM, recording_handler(calls))
    with monsession.MonitoredSession(hooks=[RecordEnd(calls, "outer")]) as outer:
        with monsession.MonitoredSession(hooks=[RecordEnd(calls, "inner")]) as inner:
            _train(inner, step, [signal.SIGTERM])
            assert not outer.should_stop()
        assert calls == [("inner", "end")]
        assert outer.should_stop()  # The inner session handed SIGTERM to the outer one.
    assert calls == [("inner", "end"), ("outer", "end"), ("user", "SIGTERM")]


def test_an_error_wins_over_a_pending_signal(graph, calls, caplog):
    step = tf.compat.v1.assign_add(monsession.get_or_create_global_step(), 1)
    users = recording_handler(calls)
    signal.signal(signal.SIGTERM, users)
    with pytest.raises(ValueError, match="boom"):
        with monsession.MonitoredSession(hooks=[RecordEnd(calls)]) as sess:
            _train(sess, step, [signal.SIGTERM])
            raise ValueError("boom")
    assert calls == []  # No end(), and SIGTERM is not handed on: the error propagates.
    assert "SIGTERM arrived, but the session failed" in caplog.text
    assert signal.getsignal(signal.SIGTERM) is users


def test_a_session_created_in_another_thread_leaves_signals_alone(calls):
    before = signal.getsignal(signal.SIGTERM)
    seen = []

    def train():
        with tf.Graph().as_default():
            monsession.get_or_create_global_step()
            with monsession.MonitoredSession(hooks=[RecordEnd(calls)]) as sess:
                seen.append(signal.getsignal(signal.SIGTERM))
                sess.should_stop()

    thread = threading.Thread(target=train)
    thread.start()
    thread.join()
    assert seen == [before]
    assert calls == [("end", "end")]


@pytest.mark.parametrize(
    ("value", "error", "match"),
    [
        ("yes", TypeError, "stop_on_signals must be True, False, None or an iterable"),
        (1.5, TypeError, "stop_on_signals must be"),
        ([signal.SIGKILL], ValueError, "stop_on_signals holds SIGKILL, which no process can catch"),
        ([10_000], ValueError, "stop_on_signals holds 10000, which is not a signal number"),
        (["SIGTERM"], ValueError, "stop_on_signals holds 'SIGTERM', which is not a signal number"),
    ],
)
def test_bad_stop_on_signals(graph, value, error, match):
    monsession.get_or_create_global_step()
    with pytest.raises(error, match=f"MonitoredSession: {match}"):
        monsession.MonitoredSession(stop_on_signals=value)
