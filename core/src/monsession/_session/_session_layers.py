"""The layers of a monitored session, each with one job.

From the inside out: `_HookedSession` runs the hooks around each step,
`_CoordinatedSession` stops threads through a coordinator, and
`_RecoverableSession` re-creates everything after a preemption error. A
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
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import tensorflow as tf

from monsession._api._dispatcher import HookDispatcher
from monsession._api._hook_api import SessionRunArgs, SessionRunContext, finish_run
from monsession._api._step_context import StepContext
from monsession._backends._backend import make_backend
from monsession._backends._eager import PullingStep, retried
from monsession._durability._file_errors import file_error_behind
from monsession._durability._lost_tasks import answers_within, close_within
from monsession._durability._preemption_errors import PREEMPTION_ERRORS
from monsession._durability._retry import RetryBudget, RetryPolicy, policy_for

logger = logging.getLogger("monsession")


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
      policy: The `RetryPolicy`; by default the creator's (`_retry.policy_for`).
      owner: The session's class name, for messages.
    """

    def __init__(
        self, sess_creator: Any, policy: RetryPolicy | None = None, owner: str = "MonitoredSession"
    ) -> None:
        self._sess_creator = sess_creator
        self._target = ""  # The master of the session's TF1 cluster, if any.
        self._budget = RetryBudget(
            policy or policy_for(sess_creator), owner, self._lost_task_answers
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
                if not retried(fetches):
                    # Its arguments were taken before the restore (see BoundStep).
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


class HookSelection:
    """What the current `run()` is: the hooks it calls (`None`: all), and whether it trains.

    Shared by the monitored session and every `_HookedSession` it creates,
    so a call retried after a preemption runs with the same choice.
    """

    def __init__(self) -> None:
        self.hooks: frozenset[int] | None = None  # ids of the chosen hooks.
        self.training = True  # Whether the call is a training step (adds one).

    @contextlib.contextmanager
    def choose(self, hooks: Sequence[Any] | None, training: bool) -> Iterator[None]:
        """Within the block, runs call only `hooks` (all when `None`), as training steps or not."""
        previous = self.hooks, self.training
        self.hooks = None if hooks is None else frozenset(map(id, hooks))
        self.training = training
        try:
            yield
        finally:
            self.hooks, self.training = previous


class _HookedSession(_WrappedSession):
    """Calls the hooks around each step and merges their requests into it.

    The session's `HookDispatcher` calls the hooks: only those that
    override `before_run` (or `after_run`) are called for it, so a hook that
    overrides neither costs nothing per step.

    Args:
      sess: A `tf.compat.v1.Session`, an `EagerSession` or a wrapped session.
      hooks: The session's `HookDispatcher` (or the hooks, in order, to build one).
      fusion: A `_fusion.Fusion` that runs the steps before the next hook
        action silently, or `None`.
      selection: A `HookSelection` naming the hooks of the current call, if any.
      hook_states: The session's `HookStates`, rewritten after a step whose
        hooks saved a checkpoint, or `None`.
    """

    def __init__(
        self,
        sess: Any,
        hooks: HookDispatcher | Iterable[Any],
        fusion: Any = None,
        selection: HookSelection | None = None,
        hook_states: Any = None,
    ) -> None:
        super().__init__(sess)
        self._fusion = fusion
        self._hook_states = hook_states
        self._selection = selection or HookSelection()
        self._dispatcher = hooks if isinstance(hooks, HookDispatcher) else HookDispatcher(hooks)
        self._calls_after_run = bool(self._dispatcher.after_run_hooks)
        self._should_stop = False
        self._backend = make_backend(sess, bool(self._dispatcher.per_step))
        if fusion is not None:
            fusion.attach(self._backend)

    def _check_stop(self) -> bool:
        return self._should_stop

    def run(
        self, fetches: Any, feed_dict: Any = None, options: Any = None, run_metadata: Any = None
    ) -> Any:
        if self._should_stop or self.should_stop():
            raise RuntimeError("Run called even after should_stop requested.")
        chosen, training = self._selection.hooks, self._selection.training
        silent, kept = (0, None)
        pulling = isinstance(fetches, PullingStep)
        if self._fusion is not None and chosen is None and training:
            silent, kept = self._fusion.run_silent_steps(fetches, feed_dict, self._backend)
            # An input pulled for an epoch's last step goes to the hooks (they see
            # that step before the epoch ends), as after silent steps.
            if not silent and not (pulling and fetches.silent_limit < 1):
                if self._fusion.quiet(self._backend):
                    if pulling:
                        fetches = fetches.bind(0)
                    return self._run_quiet(fetches, feed_dict, options, run_metadata)
        if pulling:
            fetches = fetches.bind(silent)
        if self._fusion is not None:
            silent += self._fusion.take_quiet_steps()
        self._backend.start_run()
        if not training:
            # Not a training step (an evaluation, a second optimizer): it may
            # not add one to the global step, which is read again when needed.
            self._backend.forget_step()
        run_context = SessionRunContext(
            SessionRunArgs(fetches, feed_dict), self._sess, self._backend, silent, kept
        )
        hook_fetches, feed_dict, options, feed_owners = self._dispatcher.before_run(
            run_context, feed_dict, options, chosen
        )
        if options is not None and run_metadata is None:
            run_metadata = self._backend.new_run_metadata()
        caller_results, hook_results = self._run_backend(
            fetches, hook_fetches, feed_dict, options, run_metadata, feed_owners
        )
        finish_run(run_context)
        if self._calls_after_run:
            if self._hook_states is None:
                self._call_after_run(run_context, hook_results, options, run_metadata, chosen)
            else:
                with self._hook_states.after_run_calls():
                    self._call_after_run(run_context, hook_results, options, run_metadata, chosen)
        self._should_stop = run_context.stop_requested
        return caller_results

    def _run_quiet(self, fetches: Any, feed_dict: Any, options: Any, run_metadata: Any) -> Any:
        """Runs a training step on which no hook acts, without calling the hooks."""
        self._backend.start_run()
        return self._run_backend(fetches, {}, feed_dict, options, run_metadata, {})[0]

    def _run_backend(self, *args: Any) -> tuple[Any, dict[Any, Any]]:
        """`Backend.run`; a file error behind an `OutOfRangeError` is raised as itself."""
        try:
            return self._backend.run(*args)
        except tf.errors.OutOfRangeError as error:
            file_error = file_error_behind(error)
            if file_error is None:
                raise  # The end of the input data.
            raise file_error from error

    def _call_after_run(
        self,
        run_context: SessionRunContext,
        hook_results: Any,
        options: Any,
        run_metadata: Any,
        chosen: frozenset[int] | None = None,
    ) -> None:
        # Hooks that asked for no options see empty protos, as in TensorFlow,
        # allocated once per session rather than on every step.
        empty_options, empty_metadata = self._backend.empty_run_protos()
        run_options = empty_options if options is None else options
        metadata = empty_metadata if run_metadata is None else run_metadata
        self._dispatcher.after_run(run_context, hook_results, run_options, metadata, chosen)
