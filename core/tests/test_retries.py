"""Recovery from preemption errors is bounded, backs off and logs at WARNING."""

import logging
import time

import pytest
import tensorflow as tf

import monsession
from monsession._durability._retry import MAX_ATTEMPTS, RetryPolicy, retry_policy_of


class FlakyCreator(monsession.SessionCreator):
    """Fails `failures` times with `error`, then creates a real session through `inner`."""

    def __init__(self, failures, error=tf.errors.UnavailableError, policy=None, inner=None):
        self.failures = failures
        self.error = error
        self.calls = []
        self.inner = inner or monsession.ChiefSessionCreator()
        if policy is not None:
            self.retry_policy = policy

    def create_session(self):
        self.calls.append(time.monotonic())
        if len(self.calls) <= self.failures:
            raise self.error(None, None, f"injected failure {len(self.calls)}")
        return self.inner.create_session()


FAST = RetryPolicy(max_attempts=3, initial_backoff_secs=0.1, max_backoff_secs=0.2)


def _retry_warnings(caplog):
    return [
        record
        for record in caplog.records
        if record.name == "monsession" and "creating the session again" in record.getMessage()
    ]


def test_creation_retries_back_off_and_are_logged_at_warning(caplog):
    creator = FlakyCreator(failures=3, policy=FAST)
    with caplog.at_level(logging.INFO, logger="monsession"):
        with monsession.MonitoredSession(session_creator=creator) as sess:
            assert not sess.should_stop()
    assert len(creator.calls) == 4
    warnings = _retry_warnings(caplog)
    assert [record.levelno for record in warnings] == [logging.WARNING] * 3
    # The first retry is immediate, as in TensorFlow; then the wait doubles, up to the cap.
    waits = [record.getMessage().split(" in ")[-1].split(" s ")[0] for record in warnings]
    assert waits == ["0.0", "0.1", "0.2"]
    assert "UnavailableError (injected failure 1)" in warnings[0].getMessage()
    assert "retry 3 of at most 3" in warnings[2].getMessage()


def test_creation_gives_up_after_max_attempts_with_the_same_error_type(caplog):
    creator = FlakyCreator(failures=100, error=tf.errors.AbortedError, policy=FAST)
    with pytest.raises(tf.errors.AbortedError, match=r"3 retries in a row failed") as raised:
        monsession.MonitoredSession(session_creator=creator)
    assert len(creator.calls) == 4
    assert "creating the session failed with AbortedError (injected failure 4)" in str(raised.value)
    assert isinstance(raised.value.__cause__, tf.errors.AbortedError)
    assert len(_retry_warnings(caplog)) == 3


def test_creation_gives_up_once_failures_outlast_max_wait_secs():
    policy = RetryPolicy(max_attempts=1000, deadline_secs=0.3, initial_backoff_secs=0.05)
    creator = FlakyCreator(failures=10_000, policy=policy)
    with pytest.raises(tf.errors.UnavailableError, match=r"longer than max_wait_secs=0.3"):
        monsession.MonitoredSession(session_creator=creator)
    # Bounds from the policy, not from the machine's speed: the first failure
    # starts the streak (0 s: never past the deadline), so it is retried at
    # least once; the deadline, not max_attempts, ended the retries. How many
    # fit in 0.3 s depends on the machine and is not asserted.
    assert 2 <= len(creator.calls) <= policy.max_attempts


def test_the_default_policy_is_bounded_by_the_creators_max_wait_secs():
    assert retry_policy_of(monsession.ChiefSessionCreator()) == RetryPolicy()
    assert RetryPolicy().max_attempts == MAX_ATTEMPTS == 10
    worker = monsession.WorkerSessionCreator(max_wait_secs=42)
    assert worker.retry_policy.deadline_secs == 42
    assert retry_policy_of(worker).deadline_secs == 42
    assert retry_policy_of(FlakyCreator(0, policy=FAST)) is FAST
    # TensorFlow's own creators retry as the default policy says.
    tf_worker = tf.compat.v1.train.WorkerSessionCreator(max_wait_secs=42)
    assert retry_policy_of(tf_worker) == RetryPolicy()


def test_a_step_that_runs_ends_the_streak_of_failures():
    """max_attempts bounds consecutive failures: a session that fails every
    other step goes on, because each successful step starts a new streak."""
    tf.compat.v1.reset_default_graph()  # A fresh global step: earlier tests leave theirs.
    global_step = monsession.get_or_create_global_step()
    one_retry = RetryPolicy(max_attempts=1, initial_backoff_secs=0.01)
    creator = FlakyCreator(failures=0, policy=one_retry)
    failed_at = []

    @tf.function
    def advance():
        return global_step.assign_add(1)

    def step():
        step_now = int(global_step.numpy())
        if step_now % 2 and step_now not in failed_at:
            failed_at.append(step_now)
            raise tf.errors.UnavailableError(None, None, "connection reset")
        return advance()

    with monsession.MonitoredSession(
        session_creator=creator, hooks=[monsession.StopAtStepHook(last_step=6)]
    ) as sess:
        while not sess.should_stop():
            sess.run(step)
    assert failed_at == [1, 3, 5]
    assert len(creator.calls) == 4  # Created once, then once per failure.


def test_consecutive_step_failures_give_up_after_max_attempts():
    one_retry = RetryPolicy(max_attempts=1, initial_backoff_secs=0.01)
    creator = FlakyCreator(failures=0, policy=one_retry)

    def step():
        raise tf.errors.AbortedError(None, None, "always aborted")

    with monsession.MonitoredSession(session_creator=creator) as sess:
        with pytest.raises(
            tf.errors.AbortedError,
            match=r"running a step failed with AbortedError \(always aborted\).*1 retries",
        ):
            sess.run(step)
    assert len(creator.calls) == 2
