"""The layers of one monitored session: built, created and closed together.

`SessionStack` builds them around the raw session its creator makes, from
the inside out: the hooked layer (with the session's `Fusion`, eager mode), the
coordinated layer and, when the session recovers, the recoverable layer
(see `_session_layers`). `_CoordinatedSessionCreator` makes the inner
three again each time the recoverable layer re-creates the session.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from contextlib import ExitStack
from typing import TypeVar

import tensorflow as tf

from monsession._api._hook_api import SessionRunHook
from monsession._backends._mode import CreatedSession, Mode, Session
from monsession._durability._retry import retry_policy_of
from monsession._fusion._fusion import Fusion, fusion_for
from monsession._session._hook_lifecycle import HookLifecycle
from monsession._session._hooked_session import HookSelection, _HookedSession
from monsession._session._session_creators import SessionCreator
from monsession._session._session_layers import (
    Layer,
    Results,
    RunCall,
    StepFn,
    TFSessionCreator,
    _CoordinatedSession,
    _RecoverableSession,
)
from monsession._session._signal_layer import SignalLayer, StoppedOnSignalError

_R = TypeVar("_R")


@dataclasses.dataclass(eq=False)
class _CoordinatedSessionCreator(SessionCreator):
    """Creates the raw session, starts queue runners, tells the hooks (`HookLifecycle.created`).

    Args:
      session_creator: Makes the raw session (ours, or one of TensorFlow's).
      mode: The session's `Mode`.
      lifecycle: The session's `HookLifecycle`.
      stop_grace_period_secs: How long closing waits for the coordinator's threads.
      fusion: The session's `Fusion` (eager mode, when runs may skip the hooks), or `None`.
      selection: The session's `HookSelection`.
    """

    session_creator: SessionCreator | TFSessionCreator
    mode: Mode
    lifecycle: HookLifecycle
    stop_grace_period_secs: float
    fusion: Fusion | None
    selection: HookSelection
    coord: tf.train.Coordinator | None = dataclasses.field(default=None, init=False)
    tf_sess: Session | None = dataclasses.field(default=None, init=False)

    def create_session(self) -> _CoordinatedSession:
        creator = self.session_creator
        if isinstance(creator, SessionCreator):
            created = creator.create_restored()
        else:  # TensorFlow's own creators.
            created = CreatedSession(creator.create_session(), None)
        self.tf_sess = created.session
        self.coord = tf.train.Coordinator(clean_stop_exception_types=[])
        self.mode.start_queue_runners(self.tf_sess, self.coord)
        self.lifecycle.created(self.tf_sess, self.coord, created.restored_from)
        hooked = _HookedSession(
            self.tf_sess, self.lifecycle, self.selection, self.mode, self.fusion
        )
        return _CoordinatedSession(hooked, self.coord, self.stop_grace_period_secs)


class SessionStack:
    """The layers of one monitored session, what they share, and the hooks' lifecycle.

    Built once the session's arguments are checked, it takes the hooks
    through their `HookLifecycle`: `begin()`, then the session created (the
    hooks' state restored, `after_create_session`); each step passes the
    signal layer, then the layers; closing ends the hooks (or tells them
    the session failed), then closes every layer.

    Args:
      owner: The session's class name, for messages.
      mode: The session's `Mode`.
      session_creator: Makes the raw session.
      hooks: The session's hooks, in order: they begin here.
      cap: The most steps per call (`steps_per_execution`), `None` for "auto".
      should_recover: Whether a preemption error re-creates the session.
      stop_grace_period_secs: How long closing waits for the coordinator's threads.
      stop_on_signals: The session's `stop_on_signals` argument (`SignalLayer`).
    """

    def __init__(
        self,
        owner: str,
        mode: Mode,
        session_creator: SessionCreator | TFSessionCreator,
        hooks: Sequence[SessionRunHook],
        cap: int | None,
        should_recover: bool,
        stop_grace_period_secs: float,
        stop_on_signals: bool | Iterable[int] | None,
    ) -> None:
        self._owner = owner
        lifecycle = HookLifecycle(hooks, owner)
        self.dispatcher = lifecycle.dispatcher
        self._restore_graph_finalization = mode.keep_graph_finalization()
        self.signals = SignalLayer(stop_on_signals, lambda: self.dispatcher.has_end_work, owner)
        self.selection = HookSelection()
        self._lifecycle = lifecycle
        lifecycle.begin()
        mode.prepare_graph()
        self.fusion = fusion_for(owner, cap, self.dispatcher, mode.fuses_steps)
        self.creator = _CoordinatedSessionCreator(
            session_creator, mode, lifecycle, stop_grace_period_secs, self.fusion, self.selection
        )
        self.outer: Layer | None
        if should_recover:
            policy = retry_policy_of(session_creator)
            self.outer = _RecoverableSession(self.creator, policy, owner, mode)
        else:
            self.outer = self.creator.create_session()
        # Only now: a signal during creation (a worker may wait for hours for
        # its chief) acts at once, as without monsession.
        self.signals.install()

    @property
    def raw(self) -> Session | None:
        """The raw session; `None` once closed."""
        return self.creator.tf_sess

    @property
    def recoveries(self) -> int:
        """How many times a preemption error re-created the session."""
        return self.outer.recoveries if isinstance(self.outer, _RecoverableSession) else 0

    def open(self, method: str) -> Layer:
        """The outermost layer, for a call of `method`; raises once closed."""
        if self.outer is None:
            raise RuntimeError(f"{self._owner}.{method}() called after close().")
        return self.outer

    def run(
        self, call: RunCall, chosen: Iterable[SessionRunHook] | None, training: bool
    ) -> Results:
        """Runs `call` through every layer, with the `chosen` hooks (`None`: all)."""
        sess = self._step("run")
        if chosen is None and training:
            results = sess.run_call(call)
        else:
            with self.selection.choose(chosen, training):
                results = sess.run_call(call)
        self.signals.after_step()
        return results

    def run_step_fn(self, step_fn: StepFn[_R]) -> _R:
        """Runs `step_fn` with a `StepContext` of the raw session and the layers."""
        sess = self._step("run_step_fn")
        results = sess.run_step_fn(step_fn, self.raw, run_with_hooks=None)
        self.signals.after_step()
        return results

    def _step(self, method: str) -> Layer:
        """The outermost layer before a step; once a signal stopped the session, none runs.

        Raises:
          RuntimeError: If the session is closed.
          StoppedOnSignalError: If it closed now on a signal whose previous
            handler returned.
        """
        sess = self.open(method)
        self.signals.before_step(method, self.close)
        return sess

    def should_stop(self) -> bool:
        """True once a hook or the coordinator asked to stop, a stop signal arrived, or closed."""
        sess = self.outer
        return sess is None or self.signals.stop_requested() or sess.should_stop()

    def exit(self, exception_type: type[BaseException] | None, error: BaseException | None) -> bool:
        """Closes the session at the end of its `with` block; whether the error is handled.

        The ends of the data close it cleanly; another error calls the hooks'
        `on_failure` instead of `end`.
        """
        if self.outer is None and self.signals.closed_on_signal:
            # run() already closed the session and handed the signal on.
            return exception_type is StoppedOnSignalError
        if exception_type in (tf.errors.OutOfRangeError, StopIteration):
            exception_type = error = None
        if error is not None and self.outer is not None and self.raw is not None:
            self._lifecycle.failed(self.raw, error)
        clean = exception_type is None
        self.signals.close(lambda: self.close(clean), failed=not clean)
        return clean

    def close(self, clean: bool = True) -> None:
        """Calls the hooks' `end()` (after a clean exit), then closes every layer.

        Each part runs even if the one before raised; the last error propagates.
        Hooks end once: closing a closed session only raises. The graph is
        unfinalized last.
        """
        raw = self.raw
        with ExitStack() as closing:  # Runs the callbacks last first.
            closing.callback(self._restore_graph_finalization)
            closing.callback(self._forget)
            closing.callback(self._close_layers)
            if clean and raw is not None:
                self._lifecycle.end(raw)

    def _close_layers(self) -> None:
        if self.outer is None:
            raise RuntimeError("Session is already closed.")
        self.outer.close()

    def _forget(self) -> None:
        self.outer = None
        self.creator.tf_sess = None
        self.creator.coord = None
