"""The layers of one monitored session, built, created and closed together (`SessionStack`),
and what a stop signal does to them (`SignalLayer`)."""

from __future__ import annotations

import logging
import signal
from collections.abc import Callable, Iterable, Sequence
from contextlib import ExitStack
from typing import TypeVar

import tensorflow as tf

from monsession._api._hook_api import SessionRunHook
from monsession._backends._backend import Session
from monsession._backends._mode import Mode
from monsession._durability._signal_stop import SignalStop, resolve_stop_signals
from monsession._fusion._fusion import Fusion, StepVotes
from monsession._session._hook_lifecycle import HookLifecycle
from monsession._session._hooked_session import HookSelection
from monsession._session._session_creators import CoordinatedSessionCreator, SessionCreator
from monsession._session._session_layers import (
    Layer,
    Results,
    RunCall,
    StepFn,
    TFSessionCreator,
    _RecoverableSession,
)

_R = TypeVar("_R")
logger = logging.getLogger("monsession")


class StoppedOnSignalError(RuntimeError):
    """`run()` after the session closed on a signal whose previous handler returned."""


class SignalLayer:
    """Stops a session at a step boundary on a signal, and hands the signal on once closed.

    `has_end_work`: whether some hook has work to do in `end()` (decides `stop_on_signals=None`).
    """

    def __init__(
        self,
        stop_on_signals: bool | Iterable[int] | None,
        has_end_work: Callable[[], bool],
        owner: str,
    ) -> None:
        self._owner = owner
        self.stop = SignalStop(resolve_stop_signals(stop_on_signals, has_end_work, owner), owner)
        self.agreement: StepVotes | None = None  # Of the session's strategy.
        self._fusion: Fusion | None = None  # The session's, told the silent steps agreed.
        self.closed_on_signal = False

    def install(self) -> None:
        """Installs the handlers: from now on a signal stops the session at a step boundary."""
        self.stop.install()

    def agree_with_workers(self, agreement: StepVotes, fusion: Fusion | None = None) -> None:
        """Stops on a signal only once the workers agree through `agreement` after each step;
        `fusion` (if any) fuses the silent steps agreed in the same all-reduce."""
        # Every worker takes part, even one whose handlers could not be
        # installed (it never votes): the all-reduce needs all of them.
        self.stop.require_agreement()
        self.agreement = agreement
        self._fusion = fusion
        if fusion is not None:
            fusion.agree_with_workers()

    def stop_requested(self) -> bool:
        """Whether a signal stopped the session (agreed by the workers, if required)."""
        return self.stop.stop_requested()

    def before_step(self, method: str, close: Callable[[], None]) -> None:
        """Before a step, once a signal stopped the session: closes it with `close`, hands
        the signal on, and raises `StoppedOnSignalError` if the previous handler returned."""
        if not self.stop.stop_requested():
            return
        signum = self.stop.stopped_on
        assert signum is not None
        name = signal.Signals(signum).name
        self.closed_on_signal = True
        self.close(close)
        raise StoppedOnSignalError(
            f"{self._owner}.{method}() called after the session stopped on {name}: "
            "it is closed. Check should_stop() before each step."
        )

    def after_step(self) -> None:
        """After a step, under a multi-worker strategy: did some worker receive a signal, and
        how many silent steps may the next run fuse (the fewest any worker allows)?"""
        if self.agreement is None or self.stop.stopped_on is not None:
            return
        planned = 0 if self._fusion is None else self._fusion.next_silent_steps()
        agreed, silent_steps = self.agreement.agree(self.stop.received, planned)
        if self._fusion is not None:
            self._fusion.agreed(silent_steps)
        if agreed is not None:
            self.stop.agree(agreed)

    def close(self, close: Callable[[], None], failed: bool = False) -> None:
        """Closes the session with `close`, then hands a pending signal on (unless closing
        raised, or `failed`: the session's own error propagates instead)."""
        try:
            close()
        except BaseException:
            if self.stop.release() is not None:
                logger.warning(
                    "%s: closing failed; the error propagates instead of the stop signal.",
                    self._owner,
                )
            raise
        self.stop.stop_requested()  # Logs a signal that arrived while closing.
        pending = self.stop.release()
        if pending is None:
            return
        name = signal.Signals(pending).name
        if failed:
            logger.warning(
                "%s: a %s arrived, but the session failed; the error propagates instead.",
                self._owner,
                name,
            )
            return
        logger.info("%s: closed; handing %s on.", self._owner, name)
        try:
            self.stop.deliver(pending)
        except BaseException as raised:
            raised.__suppress_context__ = True  # Whatever was being handled is not its cause.
            raise


class SessionStack:
    """The layers of one monitored session, what they share, and the hooks' lifecycle.

    Built once the arguments are checked: the hooks `begin()`, then the layers around the raw
    session, inside out: hooked and coordinated (made by `CoordinatedSessionCreator`, again at
    each re-creation), then recoverable. Each step passes the signal layer, then the layers;
    closing ends the hooks (or tells them the session failed), then closes every layer. `cap`:
    the most steps per call (`steps_per_execution`), `None` for "auto".
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
        self.fusion = mode.fusion(owner, cap, self.dispatcher)
        self.creator = CoordinatedSessionCreator(
            session_creator, mode, lifecycle, stop_grace_period_secs, self.fusion, self.selection
        )
        self.outer: Layer | None
        if should_recover:
            policy = self.creator.retry_policy
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
        sess, signals = self.outer, self.signals
        if sess is None or signals.stop.stopped_on is not None:  # Attribute reads every step.
            sess = self._step("run")
        if chosen is None and training:
            results = sess.run_call(call)
        else:
            with self.selection.choose(chosen, training):
                results = sess.run_call(call)
        if signals.agreement is not None:
            signals.after_step()
        return results

    def run_step_fn(self, step_fn: StepFn[_R]) -> _R:
        """Runs `step_fn` with a `StepContext` of the raw session and the layers."""
        sess = self._step("run_step_fn")
        results = sess.run_step_fn(step_fn, self.raw, run_with_hooks=None)
        self.signals.after_step()
        return results

    def _step(self, method: str) -> Layer:
        """The outermost layer before a step (raises once closed, see `SignalLayer.before_step`)."""
        sess = self.open(method)
        self.signals.before_step(method, self.close)
        return sess

    def should_stop(self) -> bool:
        """True once a hook or the coordinator asked to stop, a stop signal arrived, or closed."""
        sess = self.outer
        return sess is None or self.signals.stop_requested() or sess.should_stop()

    def exit(self, exception_type: type[BaseException] | None, error: BaseException | None) -> bool:
        """Closes the session at the end of its `with` block (the ends of the data cleanly,
        another error through the hooks' `on_failure`); whether the error is handled."""
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
        """Calls the hooks' `end()` (after a clean exit), then closes every layer, then
        unfinalizes the graph; each part runs even if the one before raised."""
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
