"""The outer layers of a monitored session, each with one job, for graph and eager sessions:
inside `_HookedSession` (`_hooked_session`), `_CoordinatedSession` stops threads through a
coordinator, `_RecoverableSession` re-creates everything after a preemption error.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator
from typing import Generic, NamedTuple, Protocol, TypeVar

import tensorflow as tf

from monsession._api._step_context import StepContext
from monsession._api._types import FeedDict
from monsession._api._types import Fetches as Fetches  # The layers' vocabulary, for them.
from monsession._api._types import Results as Results
from monsession._backends._backend import Session
from monsession._backends._mode import Mode
from monsession._durability._retry import (
    PREEMPTION_ERRORS,
    RetryBudget,
    RetryPolicy,
    answers_within,
    close_within,
)

logger = logging.getLogger("monsession")


class TFSessionCreator(Protocol):
    """A session creator of TensorFlow's (`tf.compat.v1.train.SessionCreator`)."""

    def create_session(self) -> Session:
        """A ready session."""


Feeds = FeedDict | None
"""A run's `feed_dict`: graph feeds, or the step's keyword arguments (eager)."""


class RunCall(NamedTuple):
    """The arguments of one `run()`, passed through the layers as one value."""

    fetches: Fetches
    feed_dict: Feeds = None
    options: tf.compat.v1.RunOptions | None = None
    run_metadata: tf.compat.v1.RunMetadata | None = None


RunWithHooks = Callable[
    [Fetches, Feeds, tf.compat.v1.RunOptions | None, tf.compat.v1.RunMetadata | None], Results
]
"""`run` of a session layer: what `StepContext.run_with_hooks` calls."""


_Inner = TypeVar("_Inner", bound=Session, covariant=True)
_R = TypeVar("_R")
StepFn = Callable[[StepContext], _R]
"""A `step_fn` of `run_step_fn`: given a `StepContext`, returns what `run_step_fn` does."""


class _WrappedSession(Generic[_Inner]):
    """Forwards to a wrapped session (raw, or a layer); adds `should_stop` and a quiet `close`."""

    def __init__(self, sess: _Inner) -> None:
        self._sess: _Inner | None = sess

    def _inner(self) -> _Inner:
        """The wrapped session; raises once this layer is closed."""
        if self._sess is None:
            raise RuntimeError("Session is already closed.")
        return self._sess

    @property
    def graph(self) -> tf.Graph | None:
        return self._inner().graph

    @property
    def sess_str(self) -> str:
        return self._inner().sess_str

    def should_stop(self) -> bool:
        """True when this layer or a wrapped one wants to stop, or after close."""
        if self._check_stop():
            return True
        sess = self._sess
        if sess:
            return isinstance(sess, _WrappedSession) and sess.should_stop()
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

    def run(
        self,
        fetches: Fetches,
        feed_dict: Feeds = None,
        options: tf.compat.v1.RunOptions | None = None,
        run_metadata: tf.compat.v1.RunMetadata | None = None,
    ) -> Results:
        """`tf.compat.v1.Session.run()` through this layer (see `run_call`)."""
        return self.run_call(RunCall(fetches, feed_dict, options, run_metadata))

    def run_call(self, call: RunCall) -> Results:
        """Runs `call` through this layer and the ones inside (a layer takes it whole, a raw
        session as arguments); a layer's own job goes here."""
        sess = self._inner()
        return sess.run_call(call) if isinstance(sess, _WrappedSession) else sess.run(*call)

    def run_step_fn(
        self, step_fn: StepFn[_R], raw_session: Session | None, run_with_hooks: RunWithHooks | None
    ) -> _R:
        return step_fn(StepContext(raw_session, run_with_hooks or self.run))


Layer = _WrappedSession[Session]
"""A session layer around another layer or a raw session."""


class LayerCreator(Protocol):
    """Creates the layers a `_RecoverableSession` wraps (`_session_stack`'s creator)."""

    def create_session(self) -> Layer:
        """The inner layers around a new raw session."""


class _RecoverableSession(_WrappedSession[Layer]):
    """Re-creates the wrapped session (`sess_creator`) when a step raises a preemption error,
    within the bounds of `policy` (see `_retry`); `mode` says which runs are run again."""

    def __init__(
        self, sess_creator: LayerCreator, policy: RetryPolicy, owner: str, mode: Mode
    ) -> None:
        self._sess_creator = sess_creator
        self._mode = mode
        self._target = ""  # The master of the session's TF1 cluster, if any.
        self._budget = RetryBudget(policy, owner, self._lost_task_answers)
        self.recoveries = 0  # How many times a preemption error re-created the session.
        super().__init__(self._create_session())

    def _create_session(self) -> Layer:
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

    def run_call(self, call: RunCall) -> Results:
        while True:
            try:
                sess = self._sess
                if not sess:
                    sess = self._sess = self._create_session()
                results = sess.run_call(call)
            except PREEMPTION_ERRORS as error:
                self._recover(error)
                if not self._mode.reruns_after_recovery(call.fetches):
                    # Its input was taken before the restore (see StepSource).
                    self._sess = self._create_session()
                    return None
            else:
                if self._budget.failures:  # The end of a streak (read, not called, every step).
                    self._budget.succeeded()
                return results

    def run_step_fn(
        self, step_fn: StepFn[_R], raw_session: Session | None, run_with_hooks: RunWithHooks | None
    ) -> _R:
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


class _CoordinatedSession(_WrappedSession[Layer]):
    """Reports step errors to `coord` and joins its threads on close (for at most
    `stop_grace_period_secs`)."""

    def __init__(
        self, sess: Layer, coord: tf.train.Coordinator, stop_grace_period_secs: float = 120
    ) -> None:
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
        """Closes the session; within `_retry.CLOSE_SECS` once a preemption error broke it."""
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

    def run_call(self, call: RunCall) -> Results:
        # Plain handlers, not `_breaking()`, and `run_call` inlined: this is every step's path.
        try:
            sess = self._sess
            if sess is None:
                raise RuntimeError("Session is already closed.")
            return sess.run_call(call) if isinstance(sess, _WrappedSession) else sess.run(*call)
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

    def run_step_fn(
        self, step_fn: StepFn[_R], raw_session: Session | None, run_with_hooks: RunWithHooks | None
    ) -> _R:
        with self._breaking():  # The step may run the raw session itself.
            return super().run_step_fn(step_fn, raw_session, run_with_hooks)
