"""Re-creating a session after a preemption error, within bounds.

`_RecoverableSession` follows a `RetryPolicy`: the first re-creation after an
`AbortedError` or `UnavailableError` is immediate, as in TensorFlow; each
further failure of a streak waits twice as long (1 s, 2 s, ... at most 30 s),
up to `max_attempts` or the creator's `max_wait_secs`. Each retry is a
WARNING. A lost parameter server of a TF1 cluster is waited for at most
`lost_server_secs` (20 s), asking it whether it answers; under
`ParameterServerStrategy` it cannot come back (its variables are gone), so
such an error raises at once, naming it (`why_not_retried`).
"""

from __future__ import annotations

import dataclasses
import logging
import re
import time
from collections.abc import Callable
from typing import NoReturn, Protocol, runtime_checkable

import tensorflow as tf

from monsession._tf_compat import parameter_server_unavailable_error

logger = logging.getLogger("monsession")

# What `_RecoverableSession` catches to re-create the session, as in TensorFlow.
PREEMPTION_ERRORS = (tf.errors.AbortedError, tf.errors.UnavailableError)

# gRPC adds this line to an error for each remote task that did not answer.
# TensorFlow gives the failed task in no structured field: its own
# `ClusterCoordinator` tells parameter server failures from worker failures
# by this same text. The multi-process test of examples/distributed kills a
# parameter server and checks that its name is found here.
_FROM_PARAMETER_SERVER = re.compile(
    r"GRPC error information from remote target (/job:ps/replica:\d+/task:\d+)"
)

# A parameter server task named in the text of a `PSUnavailableError`.
_PARAMETER_SERVER_TASK = re.compile(r"/job:ps/replica:\d+/task:\d+")


def lost_parameter_servers(error: Exception) -> list[str]:
    """The parameter server tasks that a preemption error says did not answer.

    Args:
      error: Any exception.

    Returns:
      Sorted task names such as ``"/job:ps/replica:0/task:0"``; the job,
      ``"/job:ps"``, when a `PSUnavailableError` names no task (TensorFlow's
      coordination service reports a parameter server failure so); empty
      for any other error.
    """
    if not isinstance(error, PREEMPTION_ERRORS):
        return []
    names = sorted(set(_FROM_PARAMETER_SERVER.findall(str(error))))
    if not names and isinstance(error, parameter_server_unavailable_error()):
        return sorted(set(_PARAMETER_SERVER_TASK.findall(str(error)))) or ["/job:ps"]
    return names


def why_not_retried(error: Exception) -> str | None:
    """Why re-creating the session cannot cure `error`: a parameter server is lost; else `None`."""
    lost = lost_parameter_servers(error)
    if not lost:
        return None
    return (
        f"under ParameterServerStrategy it means that parameter server {', '.join(lost)} "
        "was lost, and the variables it held with it; TensorFlow cannot reconnect this "
        "coordinator to it. Restart the whole job (parameter servers, workers and this "
        "coordinator): it resumes from the latest checkpoint"
    )


def why_lost_server_not_retried(lost: list[str], secs: float) -> str:
    """Why the session is not created again after parameter servers `lost` stayed away `secs`."""
    return (
        f"parameter server {', '.join(lost)} was lost and did not answer again within "
        f"{secs:g} s; the variables it held were lost with it. Restart the whole job "
        "(parameter servers and workers): it resumes from the latest checkpoint"
    )


MAX_ATTEMPTS = 10
INITIAL_BACKOFF_SECS = 1.0
MAX_BACKOFF_SECS = 30.0
LOST_SERVER_SECS = 20.0

# Asks whether a lost task answers again, waiting at most the seconds given:
# True or False, or None where the session cannot ask (no TF1 cluster).
Answers = Callable[[str, float], "bool | None"]


@dataclasses.dataclass(frozen=True)
class RetryPolicy:
    """Bounds on re-creating a session after consecutive preemption errors.

    Args:
      max_attempts: Consecutive failures tolerated; `0` never retries.
      deadline_secs: How long a streak of failures may last, or `None`.
      initial_backoff_secs: The wait before the second retry of a streak.
      max_backoff_secs: The longest wait between two retries.
      no_retry_reason: Why `max_attempts` is 0, for the error message.
      cannot_retry: Given a preemption error, why re-creating the session
        cannot succeed after it (for the error message), or `None` when it
        may; such an error raises at once, whatever the other bounds.
      lost_server_secs: How long a streak of errors naming a lost parameter
        server may last, from the first of them, or `None` for no bound
        other than the others.
    """

    max_attempts: int = MAX_ATTEMPTS
    deadline_secs: float | None = None
    initial_backoff_secs: float = INITIAL_BACKOFF_SECS
    max_backoff_secs: float = MAX_BACKOFF_SECS
    no_retry_reason: str = ""
    cannot_retry: Callable[[Exception], str | None] | None = None
    lost_server_secs: float | None = LOST_SERVER_SECS


class RetryBudget:
    """Counts one streak of consecutive failures against a `RetryPolicy`.

    Args:
      policy: The bounds.
      owner: The session's class name, for messages.
      answers: Asks a lost parameter server whether it answers again (see
        `Answers`), or `None`.
    """

    def __init__(self, policy: RetryPolicy, owner: str, answers: Answers | None = None) -> None:
        self._policy = policy
        self._owner = owner
        self._answers = answers
        self._failures = 0
        self._first_failure = 0.0
        self._first_lost_server: float | None = None

    def succeeded(self) -> None:
        """A step ran: the streak is over."""
        self._failures = 0
        self._first_lost_server = None

    def failed(self, error: Exception, while_doing: str, since: float | None = None) -> None:
        """Records a failure (at `since`, `time.monotonic()`, if before this call), then
        waits before the retry; raises the type of `error`, saying why, once a bound is reached.
        """
        now = time.monotonic() if since is None else since
        if self._failures == 0:
            self._first_failure = now
        self._failures += 1
        policy = self._policy
        elapsed = now - self._first_failure
        reason = self._why_no_retry(error, elapsed)
        if reason:
            self._give_up(error, while_doing, reason)
        backoff = self._backoff(elapsed, self._lost_servers_back(error, while_doing, now))
        logger.warning(
            "%s: %s failed with %s (%s); creating the session again from the latest "
            "checkpoint in %.1f s (retry %d of at most %d).",
            self._owner,
            while_doing,
            type(error).__name__,
            error_summary(error),
            backoff,
            self._failures,
            policy.max_attempts,
        )
        if backoff:
            time.sleep(backoff)

    def _why_no_retry(self, error: Exception, elapsed: float) -> str | None:
        """Which of the policy's bounds the streak reached, `elapsed` seconds long, if any."""
        policy = self._policy
        hopeless = policy.cannot_retry(error) if policy.cannot_retry else None
        if hopeless:
            return hopeless
        if policy.max_attempts <= 0:
            return policy.no_retry_reason or "retries are off"
        if self._failures > policy.max_attempts:
            return f"{policy.max_attempts} retries in a row failed within {elapsed:.1f} s"
        if policy.deadline_secs is not None and elapsed > policy.deadline_secs:
            return (
                f"failures lasted {elapsed:.1f} s, longer than max_wait_secs="
                f"{policy.deadline_secs:g}"
            )
        return None

    def _backoff(self, elapsed: float, lost_server_wait: float | None) -> float:
        """The wait before the retry: none before the first, then doubling up to the bounds."""
        policy = self._policy
        if self._failures <= 1:
            return 0.0
        backoff: float = min(
            policy.initial_backoff_secs * 2 ** (self._failures - 2), policy.max_backoff_secs
        )
        if policy.deadline_secs is not None:
            backoff = min(backoff, max(0.0, policy.deadline_secs - elapsed))
        if lost_server_wait is not None:
            backoff = min(backoff, lost_server_wait)
        return backoff

    def _lost_servers_back(self, error: Exception, while_doing: str, now: float) -> float | None:
        """For an error naming lost parameter servers: waits, within the bound, for them.

        Returns `None` if it names none (or there is no bound), else the longest
        wait before the retry (0 once all answered); raises once the bound is spent.
        """
        lost, bound = lost_parameter_servers(error), self._policy.lost_server_secs
        if not lost or bound is None:
            return None
        if self._first_lost_server is None:
            self._first_lost_server = now
        wait = self._ask_lost_servers(error, while_doing, lost, bound, self._first_lost_server)
        if wait is None:
            self._give_up(error, while_doing, why_lost_server_not_retried(lost, bound))
        return wait

    def _ask_lost_servers(
        self, error: Exception, while_doing: str, lost: list[str], bound: float, since: float
    ) -> float | None:
        """Asks each of the `lost` servers in turn whether it answers, `bound` seconds from `since`.

        Returns:
          0 once every one answered; the time left when there is no cluster
          to ask; `None` when the time is spent or one did not answer.
        """
        for task in lost:
            left = bound - (time.monotonic() - since)
            if left <= 0:
                return None
            if task == lost[0]:
                logger.warning(
                    "%s: %s failed with %s: parameter server %s did not answer (%s); waiting "
                    "at most %.1f s for it to come back.",
                    self._owner,
                    while_doing,
                    type(error).__name__,
                    ", ".join(lost),
                    error_summary(error),
                    left,
                )
            answered = None if self._answers is None else self._answers(task, left)
            if answered is None:
                return left  # No cluster to ask: the bound is the only rule.
            if not answered:
                return None
        return 0.0

    def _give_up(self, error: Exception, while_doing: str, reason: str) -> NoReturn:
        message = (
            f"{self._owner}: {while_doing} failed with {type(error).__name__} "
            f"({error_summary(error)}), and the session is not created again: {reason}."
        )
        logger.error("%s", message)
        raise _same_type(error, message) from error


def error_summary(error: Exception) -> str:
    """The line of a TensorFlow error message that says what happened.

    A `tf.function`'s error starts with "Graph execution error:" and the
    Python stack of the op; the cause is the first line after them.
    """
    text = str(getattr(error, "message", None) or error)
    for line in text.splitlines():
        if not any(char.isalnum() for char in line) or line[0].isspace():
            continue  # Blank, indented (a stack), or a rule of "=====".
        if line.startswith(("Graph execution error", "Detected at node")):
            continue
        return line.strip()
    return type(error).__name__


def _same_type(error: Exception, message: str) -> Exception:
    """`error`'s TensorFlow error type with `message` (callers catching it still do)."""
    try:
        return type(error)(None, None, message)
    except TypeError:
        return RuntimeError(message)


def in_current_strategy(policy: RetryPolicy) -> RetryPolicy:
    """`policy`, under which a lost parameter server raises at once if the current
    strategy (the one whose `scope()` the session is created in) is a
    `ParameterServerStrategy`; else `policy` unchanged."""
    if not tf.distribute.has_strategy() or not isinstance(
        tf.distribute.get_strategy(), tf.distribute.experimental.ParameterServerStrategy
    ):
        return policy
    return dataclasses.replace(policy, cannot_retry=why_not_retried)


@runtime_checkable
class RetriesUnder(Protocol):
    """A session creator that says how its sessions' preemption errors are retried."""

    retry_policy: RetryPolicy


def retry_policy_of(creator: RetriesUnder | tf.compat.v1.train.SessionCreator) -> RetryPolicy:
    """The retry policy of `creator` (the default for TensorFlow's creators) created now.

    Inside the scope of a `ParameterServerStrategy` a lost parameter server
    is not retried (see `why_not_retried`).
    """
    policy = creator.retry_policy if isinstance(creator, RetriesUnder) else RetryPolicy()
    return in_current_strategy(policy)
