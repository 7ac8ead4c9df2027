"""Preemption errors: re-creating the session within bounds, and bounded waits on dead tasks.

`_RecoverableSession` follows a `RetryPolicy`: the first re-creation after an `AbortedError` or
`UnavailableError` is immediate, as in TensorFlow; each further failure of a streak waits twice
as long (1 s, 2 s, ... at most 30 s), up to `max_attempts` or the creator's `max_wait_secs`. A
lost parameter server of a TF1 cluster is waited for at most `lost_server_secs` (20 s); under
`ParameterServerStrategy` it cannot come back, so such an error raises at once
(`why_not_retried`).

TensorFlow can also wait for ever on a dead task: `Session.close()` (tensorflow#21745), a new
session until every task answers, and the `ParameterServerStrategy` coordinator's closures.
`close_within`, `answers_within` and `join_unless_lost` bound those waits.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import socket
import threading
import time
from collections.abc import Callable
from typing import NoReturn, Protocol, runtime_checkable

import tensorflow as tf

from monsession._tf_compat import cluster_spec_of, parameter_server_unavailable_error

logger = logging.getLogger("monsession")

# What `_RecoverableSession` catches to re-create the session, as in TensorFlow.
PREEMPTION_ERRORS = (tf.errors.AbortedError, tf.errors.UnavailableError)

# gRPC's line for each remote task that did not answer: TensorFlow has no structured
# field for it (its own `ClusterCoordinator` reads this text too).
_FROM_PARAMETER_SERVER = re.compile(
    r"GRPC error information from remote target (/job:ps/replica:\d+/task:\d+)"
)

_PARAMETER_SERVER_TASK = re.compile(r"/job:ps/replica:\d+/task:\d+")


def lost_parameter_servers(error: Exception) -> list[str]:
    """The parameter server tasks (``"/job:ps/replica:0/task:0"``) that a preemption error
    says did not answer, sorted; ``"/job:ps"`` for a `PSUnavailableError` naming none."""
    if not isinstance(error, PREEMPTION_ERRORS):
        return []
    names = sorted(set(_FROM_PARAMETER_SERVER.findall(str(error))))
    if not names and isinstance(error, parameter_server_unavailable_error()):
        return sorted(set(_PARAMETER_SERVER_TASK.findall(str(error)))) or ["/job:ps"]
    return names


def why_not_retried(error: Exception) -> str | None:
    """Why re-creating the session cannot cure `error` (a lost parameter server), or `None`."""
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

# Whether a lost task answers again within the seconds given; None: cannot ask (no TF1 cluster).
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
      cannot_retry: Why re-creating the session cannot cure a preemption
        error, or `None`; such an error raises at once.
      lost_server_secs: How long a streak of errors naming a lost parameter
        server may last, or `None` for no such bound.
    """

    max_attempts: int = MAX_ATTEMPTS
    deadline_secs: float | None = None
    initial_backoff_secs: float = INITIAL_BACKOFF_SECS
    max_backoff_secs: float = MAX_BACKOFF_SECS
    no_retry_reason: str = ""
    cannot_retry: Callable[[Exception], str | None] | None = None
    lost_server_secs: float | None = LOST_SERVER_SECS


class RetryBudget:
    """Counts one streak of consecutive failures against a `RetryPolicy`; `owner` names the
    session in messages, `answers` asks a lost parameter server (see `Answers`)."""

    def __init__(self, policy: RetryPolicy, owner: str, answers: Answers | None = None) -> None:
        self._policy = policy
        self._owner = owner
        self._answers = answers
        self.failures = 0  # Of the current streak.
        self._first_failure = 0.0
        self._first_lost_server: float | None = None

    def succeeded(self) -> None:
        """A step ran: the streak is over."""
        self.failures = 0  # Of the current streak.
        self._first_lost_server = None

    def failed(self, error: Exception, while_doing: str, since: float | None = None) -> None:
        """Records a failure (at `since`, if earlier), then waits before the retry; raises
        the type of `error`, saying why, once a bound is reached."""
        now = time.monotonic() if since is None else since
        if self.failures == 0:
            self._first_failure = now
        self.failures += 1
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
            self.failures,
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
        if self.failures > policy.max_attempts:
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
        if self.failures <= 1:
            return 0.0
        backoff: float = min(
            policy.initial_backoff_secs * 2 ** (self.failures - 2), policy.max_backoff_secs
        )
        if policy.deadline_secs is not None:
            backoff = min(backoff, max(0.0, policy.deadline_secs - elapsed))
        if lost_server_wait is not None:
            backoff = min(backoff, lost_server_wait)
        return backoff

    def _lost_servers_back(self, error: Exception, while_doing: str, now: float) -> float | None:
        """The longest wait before the retry while lost parameter servers come back (0 once
        all answered; `None` if `error` names none); raises once the bound is spent."""
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
        """Asks each of the `lost` servers whether it answers, `bound` seconds from `since`:
        0 once all did; the time left with no cluster to ask; `None` if one did not."""
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
    """The first line of a TensorFlow error message after the "Graph execution error:" header
    and the op's stack: what happened."""
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
    """`policy`, made to raise at once on a lost parameter server under a current
    `ParameterServerStrategy`."""
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
    """The retry policy of `creator` (the default for TensorFlow's), in the current strategy."""
    policy = creator.retry_policy if isinstance(creator, RetriesUnder) else RetryPolicy()
    return in_current_strategy(policy)


CLOSE_SECS = 5.0  # Closing a session broken by a preemption error (else milliseconds).
PS_REFUSED_SECS = 3.0  # How long a parameter server may refuse connections while closures wait.


def close_within(close: Callable[[], None], what: str, secs: float | None = None) -> bool:
    """Calls `close()` in a daemon thread for at most `secs` (`CLOSE_SECS`): True once it
    ended (or raises what it raised); else leaves the thread (which keeps the session, so
    no `__del__` closes it twice), warns naming `what`, and returns False."""
    secs = CLOSE_SECS if secs is None else secs
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            close()
        except BaseException as error:
            outcome.append(error)
        else:
            outcome.append(None)

    thread = threading.Thread(target=run, name="monsession-close", daemon=True)
    thread.start()
    thread.join(secs)
    if not outcome:
        logger.warning(
            "Closing %s did not end within %g s: a task of its cluster probably died, and "
            "TensorFlow waits for it (tensorflow#21745). It is left to a background thread; "
            "the session goes on without it.",
            what,
            secs,
        )
        return False
    if outcome[0] is not None:
        raise outcome[0]
    return True


def answers_within(target: str, task: str, secs: float) -> bool:
    """Whether `task` (``"/job:ps/replica:0/task:0"``) of the TF1 cluster behind `target`
    (``"grpc://..."``) runs a no-op within `secs`."""
    graph = tf.Graph()
    with graph.as_default(), graph.device(task):
        no_op = tf.no_op()
    config = tf.compat.v1.ConfigProto(
        device_filters=[task], operation_timeout_in_ms=max(1, int(secs * 1000))
    )
    config.rpc_options.use_rpc_for_inprocess_master = True
    session = tf.compat.v1.Session(target, graph=graph, config=config)
    try:
        session.run(no_op)
    except (tf.errors.DeadlineExceededError, tf.errors.UnavailableError, tf.errors.AbortedError):
        return False
    finally:
        close_within(session.close, f"the session that asked {task} for a no-op")
    return True


def refuses_connections(address: str, secs: float = 1.0) -> bool:
    """Whether `address` (``"host:port"``) refuses connections: a task that is gone (a
    timeout or another error proves nothing: False)."""
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=secs):
            return False
    except ConnectionRefusedError:
        return True
    except OSError:
        return False


def join_unless_lost(wait: Callable[[float], bool], parameter_servers: dict[str, str]) -> None:
    """Calls `wait(secs)` (whether the scheduled closures all ran) until True; raises
    TensorFlow's `PSUnavailableError` once one of `parameter_servers` (address by task
    name) refused connections for `PS_REFUSED_SECS`."""
    refused_since: dict[str, float] = {}
    while not wait(1.0):
        now = time.monotonic()
        for task, address in parameter_servers.items():
            if not refuses_connections(address):
                refused_since.pop(task, None)
            elif now - refused_since.setdefault(task, now) >= PS_REFUSED_SECS:
                raise parameter_server_unavailable_error()(
                    tf.errors.UnavailableError(
                        None,
                        None,
                        f"parameter server {task} ({address}) refuses connections: it is gone, "
                        "and the closures scheduled wait for it (TensorFlow's coordinator "
                        "waits for the workers to come back instead of raising)",
                    )
                )


def parameter_server_tasks(strategy: tf.distribute.Strategy) -> dict[str, str]:
    """The address of each parameter server task of `strategy`'s cluster, by task name."""
    spec = cluster_spec_of(strategy)
    if "ps" not in spec.jobs:
        return {}
    return {
        f"/job:ps/replica:0/task:{index}": spec.task_address("ps", index)
        for index in spec.task_indices("ps")
    }
