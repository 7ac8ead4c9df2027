"""The outer layers of a monitored session, each with one job.

From the inside out: `_HookedSession` runs the hooks around each step
(`_hooked_session`), `_FusedSession` runs the steps on which no hook acts
before it (`_fused_session`, eager mode), `_CoordinatedSession` stops
threads through a coordinator, and `_RecoverableSession` re-creates
everything after a preemption error. A
session that a preemption error went through is closed within a bound
(`_lost_tasks.close_within`): TensorFlow's close can wait for ever on a
task that died. They work the same on a graph-mode `tf.compat.v1.Session` and on the eager
backend's `EagerSession`: `_HookedSession` speaks only to the `Backend`
protocol (see `_backend`).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator
from typing import Any, Protocol

from monsession._api._step_context import StepContext
from monsession._backends._backend import FeedDict
from monsession._backends._mode import Mode, Session, current_mode
from monsession._durability._lost_tasks import answers_within, close_within
from monsession._durability._preemption_errors import PREEMPTION_ERRORS
from monsession._durability._retry import RetryBudget, RetryPolicy
from monsession._session._session_creators import retry_policy_of

logger = logging.getLogger("monsession")


class TFSessionCreator(Protocol):
    """A session creator of TensorFlow's (`tf.compat.v1.train.SessionCreator`)."""

    def create_session(self) -> Session:
        """A ready session."""


Feeds = FeedDict | None
"""A run's `feed_dict`: graph feeds, or the step's keyword arguments (eager)."""


class _WrappedSession:
    """Forwards to a wrapped session; adds `should_stop` and a quiet `close`."""

    def __init__(self, sess: Any) -> None:
        self._sess = sess
        self._wrapped_is_stoppable = isinstance(sess, _WrappedSession)

    @property
    def graph(self) -> Any:
        return self._sess.graph

    @property
    def sess_str(self) -> Any:
        return self._sess.sess_str

    def should_stop(self) -> bool:
        """True when this layer or a wrapped one wants to stop, or after close."""
        if self._check_stop():
            return True
        if self._sess:
            return self._wrapped_is_stoppable and self._sess.should_stop()
        return True

    def _check_stop(self) -> bool:
        """This layer's own stop condition."""
        return False

    def close(self) -> None:
        if self._sess:
            try:
                self._sess.close()
            except PREEMPTION_ERRORS as error:
                logger.error("Closing the session failed, probably through a preemption: %s", error)
            finally:
                self._sess = None

    def run(self, *args: Any, **kwargs: Any) -> Any:
        return self._sess.run(*args, **kwargs)

    def run_step_fn(self, step_fn: Any, raw_session: Any, run_with_hooks: Any) -> Any:
        return step_fn(StepContext(raw_session, run_with_hooks or self.run))


class _RecoverableSession(_WrappedSession):
    """Re-creates the wrapped session when a step raises a preemption error.

    Retries are bounded and back off (see `_retry`): a streak of consecutive
    failures ends in the preemption error once the policy's bounds are
    reached; under a policy without retries the first one raises. A lost
    parameter server of the session's cluster is asked, within the bound,
    whether it answers again.

    Args:
      sess_creator: A `SessionCreator` whose `create_session()` gives the
        session to wrap; called again after each preemption.
      policy: The `RetryPolicy`; by default the creator's (`retry_policy_of`).
      owner: The session's class name, for messages.
      mode: The session's `Mode`: it says which runs are run again after a
        recovery; by default the current one.
    """

    def __init__(
        self,
        sess_creator: Any,
        policy: RetryPolicy | None = None,
        owner: str = "MonitoredSession",
        mode: Mode | None = None,
    ) -> None:
        self._sess_creator = sess_creator
        self._mode = mode or current_mode()
        self._target = ""  # The master of the session's TF1 cluster, if any.
        self._budget = RetryBudget(
            policy or retry_policy_of(sess_creator), owner, self._lost_task_answers
        )
        self.recoveries = 0  # How many times a preemption error re-created the session.
        super().__init__(self._create_session())

    def _create_session(self) -> Any:
        while True:
            try:
                session = self._sess_creator.create_session()
            except PREEMPTION_ERRORS as error:
                self._budget.failed(error, "creating the session")
            else:
                self._target = session.sess_str
                return session

    def _lost_task_answers(self, task: str, secs: float) -> bool | None:
        """Whether `task` of the session's cluster answers within `secs`; None: no cluster."""
        if not self._target:
            return None
        return answers_within(self._target, task, secs)

    def _recover(self, error: Exception) -> None:
        failed_at = time.monotonic()
        try:
            self.close()
        finally:
            self._sess = None
        self._budget.failed(error, "running a step", since=failed_at)
        self.recoveries += 1

    def _check_stop(self) -> bool:
        try:
            if self._sess:
                return self._sess._check_stop()
            return True
        except PREEMPTION_ERRORS as error:
            self._recover(error)
            self._sess = self._create_session()
            return False
        except Exception:
            return True

    def run(
        self, fetches: Any, feed_dict: Any = None, options: Any = None, run_metadata: Any = None
    ) -> Any:
        while True:
            try:
                if not self._sess:
                    self._sess = self._create_session()
                results = self._sess.run(fetches, feed_dict, options, run_metadata)
            except PREEMPTION_ERRORS as error:
                self._recover(error)
                if not self._mode.reruns_after_recovery(fetches):
                    # Its input was taken before the restore (see StepSource).
                    self._sess = self._create_session()
                    return None
            else:
                self._budget.succeeded()
                return results

    def run_step_fn(self, step_fn: Any, raw_session: Any, run_with_hooks: Any) -> Any:
        while True:
            try:
                if not self._sess:
                    self._sess = self._create_session()
                results = self._sess.run_step_fn(step_fn, raw_session, self._sess.run)
            except PREEMPTION_ERRORS as error:
                self._recover(error)
            else:
                self._budget.succeeded()
                return results


class _CoordinatedSession(_WrappedSession):
    """Reports step errors to a coordinator and joins its threads on close.

    Args:
      sess: The session to wrap.
      coord: A `tf.train.Coordinator`.
      stop_grace_period_secs: Seconds given to threads to stop on `close()`.
    """

    def __init__(self, sess: Any, coord: Any, stop_grace_period_secs: float = 120) -> None:
        super().__init__(sess)
        self._coord = coord
        self._stop_grace_period_secs = stop_grace_period_secs
        self._broken_by: Exception | None = None  # The preemption error that went through.

    def _check_stop(self) -> bool:
        # A coordinator asked to stop with an error has its stop event set
        # too, so the lock of raise_requested_exception() is taken only then.
        if not self._coord.should_stop():
            return False
        with self._breaking():
            self._coord.raise_requested_exception()
        return True

    @contextlib.contextmanager
    def _breaking(self) -> Iterator[None]:
        """Notes a preemption error raised in the block: the session is broken."""
        try:
            yield
        except PREEMPTION_ERRORS as error:
            self._broken_by = error
            raise

    def close(self) -> None:
        """Closes the session; within `_lost_tasks.CLOSE_SECS` once a preemption error broke it."""
        if self._broken_by is None:
            self._close_now()
            return
        what = f"the session after {type(self._broken_by).__name__}"
        close_within(self._close_now, what)

    def _close_now(self) -> None:
        self._coord.request_stop()
        try:
            self._coord.join(
                stop_grace_period_secs=self._stop_grace_period_secs, ignore_live_threads=True
            )
        finally:
            try:
                super().close()
            except Exception:
                pass

    def run(
        self, fetches: Any, feed_dict: Any = None, options: Any = None, run_metadata: Any = None
    ) -> Any:
        # Plain handlers, not `_breaking()`: this is every step's path.
        try:
            return self._sess.run(fetches, feed_dict, options, run_metadata)
        except PREEMPTION_ERRORS as error:
            self._broken_by = error
            raise
        except Exception as step_error:
            # A thread's error explains a failed step better than the step's
            # own error, unless the thread's error is itself not recoverable.
            try:
                self._coord.raise_requested_exception()
            except PREEMPTION_ERRORS as error:
                self._broken_by = error
                raise
            except Exception:
                raise step_error from None
            raise

    def run_step_fn(self, step_fn: Any, raw_session: Any, run_with_hooks: Any) -> Any:
        with self._breaking():  # The step may run the raw session itself.
            return super().run_step_fn(step_fn, raw_session, run_with_hooks)
