"""How often, and how patiently, a session is re-created after a preemption error.

`_RecoverableSession` follows a `RetryPolicy`: the first re-creation after a
preemption error (`AbortedError`, `UnavailableError`) is immediate, as in
TensorFlow; each further consecutive failure waits twice as long as the one
before (1 s, 2 s, 4 s, ... at most 30 s), and after `max_attempts`
consecutive failures, or once failures have lasted longer than the session
creator's `max_wait_secs`, the session gives up and raises. A step that runs
ends the streak. Every retry is logged at WARNING. An error that a retry
cannot cure (the policy's `cannot_retry` says why) raises at once.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from typing import Any

from monsession._durability._preemption_errors import in_current_strategy

logger = logging.getLogger("monsession")

MAX_ATTEMPTS = 10
INITIAL_BACKOFF_SECS = 1.0
MAX_BACKOFF_SECS = 30.0


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
    """

    max_attempts: int = MAX_ATTEMPTS
    deadline_secs: float | None = None
    initial_backoff_secs: float = INITIAL_BACKOFF_SECS
    max_backoff_secs: float = MAX_BACKOFF_SECS
    no_retry_reason: str = ""
    cannot_retry: Callable[[Exception], str | None] | None = None


def policy_for(session_creator: Any) -> RetryPolicy:
    """The policy of a session creator created now.

    Its own, or the default bounded by its `max_wait_secs`; inside the scope
    of a `ParameterServerStrategy`, a lost parameter server is not retried
    (see `_preemption_errors`).
    """
    own = getattr(session_creator, "_retry_policy", None)
    if isinstance(own, RetryPolicy):
        return in_current_strategy(own)
    max_wait_secs = getattr(session_creator, "_max_wait_secs", None)
    if isinstance(max_wait_secs, (int, float)) and max_wait_secs > 0:
        return in_current_strategy(RetryPolicy(deadline_secs=float(max_wait_secs)))
    return in_current_strategy(RetryPolicy())


class RetryBudget:
    """Counts one streak of consecutive failures against a `RetryPolicy`.

    Args:
      policy: The bounds.
      owner: The session's class name, for messages.
    """

    def __init__(self, policy: RetryPolicy, owner: str) -> None:
        self._policy = policy
        self._owner = owner
        self._failures = 0
        self._first_failure = 0.0

    def succeeded(self) -> None:
        """A step ran: the streak is over."""
        self._failures = 0

    def failed(self, error: Exception, while_doing: str) -> None:
        """Records a failure, then waits before the retry, or raises if there is none.

        Args:
          error: The preemption error.
          while_doing: ``"creating the session"`` or ``"running a step"``.

        Raises:
          The type of `error`, with a message saying why there is no retry, if
          the policy's bounds are reached.
        """
        now = time.monotonic()
        if self._failures == 0:
            self._first_failure = now
        self._failures += 1
        policy = self._policy
        elapsed = now - self._first_failure
        hopeless = policy.cannot_retry(error) if policy.cannot_retry else None
        if hopeless:
            self._give_up(error, while_doing, hopeless)
        if policy.max_attempts <= 0:
            self._give_up(error, while_doing, policy.no_retry_reason or "retries are off")
        if self._failures > policy.max_attempts:
            self._give_up(
                error,
                while_doing,
                f"{policy.max_attempts} retries in a row failed within {elapsed:.1f} s",
            )
        if policy.deadline_secs is not None and elapsed > policy.deadline_secs:
            self._give_up(
                error,
                while_doing,
                f"failures lasted {elapsed:.1f} s, longer than max_wait_secs="
                f"{policy.deadline_secs:g}",
            )
        backoff = 0.0
        if self._failures > 1:
            backoff = min(
                policy.initial_backoff_secs * 2 ** (self._failures - 2), policy.max_backoff_secs
            )
            if policy.deadline_secs is not None:
                backoff = min(backoff, max(0.0, policy.deadline_secs - elapsed))
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

    def _give_up(self, error: Exception, while_doing: str, reason: str) -> None:
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
