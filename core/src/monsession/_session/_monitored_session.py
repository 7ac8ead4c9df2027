"""`MonitoredSession` and `SingularMonitoredSession`."""

from __future__ import annotations

import types
from collections.abc import Callable, Iterable
from typing import ParamSpec, TypeVar

import tensorflow as tf

from monsession._api._dispatcher import HookDispatcher
from monsession._api._hook_api import SessionRunHook, check_hooks
from monsession._backends._backend import Session
from monsession._backends._mode import current_mode
from monsession._fusion._fusion import StepVotes
from monsession._session._hooked_session import HookSelection, _HookedSession
from monsession._session._scaffold import Scaffold
from monsession._session._session_creators import (
    ChiefSessionCreator,
    SessionCreator,
    check_creator_arguments,
    check_session_arguments,
    check_step_fn,
)
from monsession._session._session_layers import (
    Feeds,
    Fetches,
    Layer,
    Results,
    RunCall,
    _CoordinatedSession,
    _RecoverableSession,
    _WrappedSession,
)
from monsession._session._session_stack import SessionStack
from monsession._tf_compat import one_line_per_record

__all__ = [  # The private layers are importable from here, as in TensorFlow.
    "MonitoredSession",
    "SingularMonitoredSession",
    "_CoordinatedSession",
    "_HookedSession",
    "_RecoverableSession",
    "_WrappedSession",
]
from monsession._api._step_context import StepContext
from monsession._api._step_context import StepContext as _StepContext

_P = ParamSpec("_P")
_Result = TypeVar("_Result")


class _MonitoredSession:
    """The common part of `MonitoredSession` and `SingularMonitoredSession`."""

    StepContext: type[StepContext] = StepContext

    def __init__(
        self,
        session_creator: SessionCreator | None,
        hooks: Iterable[SessionRunHook] | None,
        should_recover: bool,
        stop_grace_period_secs: float = 120,
        stop_on_signals: bool | Iterable[int] | None = None,
        steps_per_execution: int | str = 1,
    ) -> None:
        one_line_per_record()  # Before TensorFlow's own lines (restoring, ...).
        owner = type(self).__name__
        self._mode = current_mode()
        cap = self._mode.check_steps_per_execution(owner, steps_per_execution)
        self._steps_per_execution = steps_per_execution
        self._hooks = check_hooks(owner, "hooks", hooks)
        self._mode.check_hooks(owner, self._hooks)
        check_session_arguments(owner, session_creator, stop_grace_period_secs)
        self._mode.own_global_step()  # Before the hooks' begin(), which may need it.
        creator = session_creator or ChiefSessionCreator()
        self._stack = SessionStack(
            owner,
            self._mode,
            creator,
            self._hooks,
            cap,
            should_recover,
            stop_grace_period_secs,
            stop_on_signals,
        )
        self._coordinated_creator = self._stack.creator  # Read by TensorFlow's tests.

    @property
    def graph(self) -> tf.Graph | None:
        """The graph launched in this session; `None` in eager mode or once closed."""
        tf_sess = self._tf_sess()
        return None if tf_sess is None else tf_sess.graph

    def run(
        self,
        fetches: Fetches,
        feed_dict: Feeds = None,
        options: tf.compat.v1.RunOptions | None = None,
        run_metadata: tf.compat.v1.RunMetadata | None = None,
        *,
        hooks: Iterable[SessionRunHook] | None = None,
        training: bool | None = None,
    ) -> Results:
        """Runs one step with the hooks (or with the ones chosen by `hooks`).

        Graph mode: exactly `tf.compat.v1.Session.run()`. Eager mode:
        `fetches` is the step, a callable (usually a `tf.function`) or a
        structure of callables, `tf.Variable`s and tensors; `feed_dict`
        entries are passed to the callables as keyword arguments; the step's
        outputs are returned as they are (tensors, nothing copied to host).

        `hooks` (keyword only; not in TensorFlow) runs this call with only
        some of the session's hooks, in the session's order: `hooks=[]` none
        (an evaluation), `hooks=[d_logger]` only that one (a GAN's second
        optimizer). A hook left out of a call does not see it; leave
        `StopAtStepHook` in every training call.

        `training` (keyword only; not in TensorFlow): whether the call is a
        training step; `None` (the default): a call without `hooks=` is one.
        A training step advances an owned global step (eager mode), counts
        the step on the host, and may fuse with `steps_per_execution`. Any
        other call advances nothing and never fuses; hooks read the step
        from the device after it, so step-based hooks are never shifted by
        it. E.g. `sess.run(g_step, hooks=[stop, g_logger], training=True)`.

        If a stop signal arrived (see `stop_on_signals`), `run()` runs no
        step: it closes the session, as `close()` does, and hands the signal
        on.

        Raises:
          RuntimeError: If the session is closed, or a hook requested a stop,
            or it stopped on a signal whose previous handler returned (the
            `with` block then ends cleanly).
          TypeError: If `hooks` is not an iterable of hooks, or `training`
            is not True, False or None.
          ValueError: If `hooks` holds a hook that is not one of the session's.
        """
        call = RunCall(fetches, feed_dict, options, run_metadata)
        if hooks is None and training is None:  # Every step of most loops: nothing to check.
            return self._stack.run(call, None, True)
        self._stack.open("run")
        chosen, training = HookSelection.check(type(self).__name__, hooks, training, self._hooks)
        return self._stack.run(call, chosen, training)

    def call(self, step: Callable[_P, Results], /, *args: _P.args, **kwargs: _P.kwargs) -> Results:
        """Eager mode: runs `step(*args, **kwargs)` with the hooks, as `run(step)` does.

        Hooks name the step's outputs as for `run()`: a mapping's keys, else
        `"output"` (`"output/0"`, ... for a tuple or list). One call is one
        training step with all the hooks (for an evaluation or chosen hooks,
        use `run(step, feed_dict=..., hooks=..., training=...)`).

        Raises:
          RuntimeError: In graph mode (use `run()`), or as `run()` raises.
        """
        return self.run(self._mode.bind_call(type(self).__name__, step, *args, **kwargs))

    def run_step_fn(self, step_fn: Callable[[_StepContext], _Result]) -> _Result:
        """Returns `step_fn(step_context)`, which decides how to run the step.

        `step_fn` takes one argument named `step_context` (or `self` and
        `step_context`); it runs without hooks through `step_context.session`,
        with them through `step_context.run_with_hooks(...)`, and stops with
        `step_context.request_stop()`.

        Raises:
          StopIteration: If `step_fn` called `request_stop()`.
          ValueError: If `step_fn` does not have the arguments above.
        """
        check_step_fn(step_fn)
        return self._stack.run_step_fn(step_fn)

    def should_stop(self) -> bool:
        """True once a hook or the coordinator asked to stop, a stop signal arrived, or closed."""
        return self._stack.should_stop()

    def close(self) -> None:
        """Calls the hooks' `end()`, then closes the session; then hands a stop signal that
        arrived on to the handler installed before the session (see `stop_on_signals`)."""
        self._stack.signals.close(self._stack.close)

    def __enter__(self) -> _MonitoredSession:
        return self

    def __exit__(
        self,
        exception_type: type[BaseException] | None,
        exception_value: BaseException | None,
        traceback: types.TracebackType | None,
    ) -> bool:
        return self._stack.exit(exception_type, exception_value)

    @property
    def _sess(self) -> Layer | None:
        """The outermost layer; `None` once closed."""
        return self._stack.outer

    def _is_closed(self) -> bool:
        """Whether the session is closed (for tests)."""
        return self._stack.raw is None

    def _tf_sess(self) -> Session | None:
        """The raw session; using it from user code invites races."""
        return self._stack.raw

    @property
    def steps_per_execution(self) -> int | str:
        """The session's `steps_per_execution`: 1 (single steps), N or `"auto"`."""
        return self._steps_per_execution

    @property
    def recoveries(self) -> int:
        """How many times a preemption error re-created the session (for `Epochs.run`)."""
        return self._stack.recoveries

    @property
    def dispatcher(self) -> HookDispatcher:
        """The `HookDispatcher` that calls the session's hooks (for `Epochs.run`)."""
        return self._stack.dispatcher

    def agree_with_workers(self, agreement: StepVotes) -> None:
        """Stops on a signal, and fuses steps, only as the workers agree through `agreement`
        (`StepAgreement`, after each step; `MonitoredTrainingSession` under collective ops)."""
        self._stack.signals.agree_with_workers(agreement, self._stack.fusion)


class MonitoredSession(_MonitoredSession):
    """A session-like object that creates, initializes, recovers and runs hooks.

    On creation it calls each hook's `begin()`, finalizes the graph through the scaffold,
    creates the session (initializing the model or restoring the latest checkpoint), starts
    queue runners and calls `after_create_session()`. Each `run()` calls `before_run()`, one
    merged step, `after_run()` and returns the caller's results. `AbortedError` and
    `UnavailableError` re-create the session (restoring the latest checkpoint) and retry.
    `close()` calls `end()` and closes the session; as a context manager it also ends cleanly on
    `OutOfRangeError` and `StopIteration`, and skips `end()` on other errors, calling the hooks'
    optional `on_failure(session, error)` instead. Works in graph mode and, with the same hooks,
    in eager mode (see `run()`).

    On SIGTERM or SIGINT (see `stop_on_signals`) the step in progress finishes, `should_stop()`
    becomes true, and closing calls the hooks' `end()` (a `CheckpointSaverHook` saves) before
    the signal is handed on to the handler installed before the session (`KeyboardInterrupt` for
    SIGINT, the end of the process for SIGTERM).

    Args:
      session_creator: A `SessionCreator`; `ChiefSessionCreator()` by default.
      hooks: An iterable of `SessionRunHook`s, called in order. Instances of
        `tf.compat.v1.train.SessionRunHook` and objects with the five hook
        methods are accepted too.
      stop_grace_period_secs: Seconds given to threads to stop on `close()`.
      stop_on_signals: Keyword only; not in TensorFlow. Whether SIGTERM and SIGINT stop the
        session at a step boundary: `True`, `False`, or an iterable of signal numbers to use
        instead. `None` (the default): `True` when some hook overrides `end()` (has work to do
        at a clean stop, e.g. saving a checkpoint), else `False`.
      steps_per_execution: Keyword only; not in TensorFlow; eager mode. 1 (the default): one
        step per `run(step)`. N > 1: a `run(step)` of a `tf.function` step without feeds runs up
        to N steps, those before the next one at which a hook acts inside one `tf.function`
        without the hooks, then that step as usual. `"auto"`: as many as the hooks allow (at
        most half a second per call). Needs hooks implementing `next_action()` and a step
        advancing the global step by one; else single steps, with one log line saying why.

    Raises:
      TypeError: If `hooks` is not an iterable of hook instances (an item is `None`, a hook
        class, or lacks a hook method; the message names the item's index), `session_creator` is
        not a session creator instance, `stop_grace_period_secs` is not a number, or
        `stop_on_signals` or `steps_per_execution` has the wrong type.
      ValueError: If `stop_on_signals` names no signal that can be caught,
        `stop_grace_period_secs` is negative, or `steps_per_execution` is
        smaller than 1, or not 1 in graph mode.
    """

    def __init__(
        self,
        session_creator: SessionCreator | None = None,
        hooks: Iterable[SessionRunHook] | None = None,
        stop_grace_period_secs: float = 120,
        *,
        stop_on_signals: bool | Iterable[int] | None = None,
        steps_per_execution: int | str = 1,
    ) -> None:
        super().__init__(
            session_creator,
            hooks,
            should_recover=True,
            stop_grace_period_secs=stop_grace_period_secs,
            stop_on_signals=stop_on_signals,
            steps_per_execution=steps_per_execution,
        )


class SingularMonitoredSession(_MonitoredSession):
    """A `MonitoredSession` for one process: always a chief, no recovery, and
    `raw_session()` to run without hooks, save or restore.

    Args:
      hooks: An iterable of `SessionRunHook`s.
      scaffold: A `Scaffold`; a default one when `None`.
      master: The TensorFlow master to connect to (graph mode).
      config: A `tf.compat.v1.ConfigProto` (graph mode).
      checkpoint_dir: Directory whose latest checkpoint is restored.
      stop_grace_period_secs: Seconds given to threads to stop on `close()`.
      checkpoint_filename_with_path: A checkpoint file to restore instead.
      stop_on_signals: Keyword only, as for `MonitoredSession`.
      steps_per_execution: Keyword only, as for `MonitoredSession`.

    Raises:
      TypeError: If `hooks` is not an iterable of hook instances, `scaffold` is not a
        `Scaffold`, `master` not a string, `config` not a `ConfigProto`, `checkpoint_dir` or
        `checkpoint_filename_with_path` not a path, `stop_grace_period_secs` not a number, or
        `stop_on_signals` or `steps_per_execution` has the wrong type.
      ValueError: If `checkpoint_dir` is a file or lies under a file, `stop_grace_period_secs`
        is negative, or `steps_per_execution` is invalid (see `MonitoredSession`).
    """

    def __init__(
        self,
        hooks: Iterable[SessionRunHook] | None = None,
        scaffold: Scaffold | None = None,
        master: str = "",
        config: tf.compat.v1.ConfigProto | None = None,
        checkpoint_dir: str | None = None,
        stop_grace_period_secs: float = 120,
        checkpoint_filename_with_path: str | None = None,
        *,
        stop_on_signals: bool | Iterable[int] | None = None,
        steps_per_execution: int | str = 1,
    ) -> None:
        checked_hooks = check_hooks(type(self).__name__, "hooks", hooks)
        restore = (scaffold, master, config, checkpoint_dir, checkpoint_filename_with_path)
        check_creator_arguments(type(self).__name__, *restore)
        creator = ChiefSessionCreator(*restore)
        super().__init__(
            creator,
            checked_hooks,
            should_recover=False,
            stop_grace_period_secs=stop_grace_period_secs,
            stop_on_signals=stop_on_signals,
            steps_per_execution=steps_per_execution,
        )

    def raw_session(self) -> Session | None:
        """The underlying `tf.compat.v1.Session` (or `EagerSession`)."""
        return self._tf_sess()
