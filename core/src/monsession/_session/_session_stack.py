"""The layers of one monitored session: built, created and closed together.

`SessionStack` builds them around the raw session its creator makes, from
the inside out: the hooked layer, the fused layer (eager mode), the
coordinated layer and, when the session recovers, the recoverable layer
(see `_session_layers`). `_CoordinatedSessionCreator` makes the inner
three again each time the recoverable layer re-creates the session.
"""

from __future__ import annotations

from contextlib import ExitStack

import tensorflow as tf

from monsession._api._dispatcher import HookDispatcher
from monsession._backends._fusion import Fusion
from monsession._backends._mode import CreatedSession, Mode, Session
from monsession._backends._pending import settle
from monsession._durability._hook_state import HookStates, attach
from monsession._durability._retry import retry_policy_of
from monsession._session._fused_session import _FusedSession
from monsession._session._hooked_session import HookSelection, _HookedSession
from monsession._session._session_creators import SessionCreator
from monsession._session._session_layers import (
    Layer,
    TFSessionCreator,
    _CoordinatedSession,
    _RecoverableSession,
)


class _CoordinatedSessionCreator(SessionCreator):
    """Creates the raw session, restores the hooks' state, starts queue runners, tells the hooks.

    Args:
      session_creator: Makes the raw session (ours, or one of TensorFlow's).
      mode: The session's `Mode`.
      dispatcher: The session's `HookDispatcher`.
      stop_grace_period_secs: How long closing waits for the coordinator's threads.
      fusion: The session's `Fusion` (eager mode), or `None`.
      hook_states: The session's `HookStates`, or `None`.
      selection: The session's `HookSelection`, or `None`.
    """

    def __init__(
        self,
        session_creator: SessionCreator | TFSessionCreator,
        mode: Mode,
        dispatcher: HookDispatcher,
        stop_grace_period_secs: float,
        fusion: Fusion | None = None,
        hook_states: HookStates | None = None,
        selection: HookSelection | None = None,
    ) -> None:
        self._session_creator = session_creator
        self._mode = mode
        self._dispatcher = dispatcher
        self._stop_grace_period_secs = stop_grace_period_secs
        self._fusion = fusion
        self._hook_states = hook_states
        self._selection = selection
        self.coord: tf.train.Coordinator | None = None
        self.tf_sess: Session | None = None

    def create_session(self) -> _CoordinatedSession:
        creator = self._session_creator
        if isinstance(creator, SessionCreator):
            created = creator.create_restored()
        else:  # TensorFlow's own creators.
            created = CreatedSession(creator.create_session(), None)
        self.tf_sess = created.session
        if self._hook_states is not None:
            # Before after_create_session: a restored timer decides whether
            # the hooks act on the first step.
            attach(self.tf_sess, self._hook_states)
            if created.restored_from is not None:
                self._hook_states.restore(created.restored_from)
        self.coord = tf.train.Coordinator(clean_stop_exception_types=[])
        self._mode.start_queue_runners(self.tf_sess, self.coord)
        self._dispatcher.after_create_session(self.tf_sess, self.coord)
        hooked = _HookedSession(
            self.tf_sess, self._dispatcher, self._selection, self._hook_states, self._mode
        )
        layer: Layer = hooked
        if self._fusion is not None and self._fusion.skips_hooks():
            layer = _FusedSession(hooked, self._fusion, self._selection or HookSelection())
        return _CoordinatedSession(layer, self.coord, self._stop_grace_period_secs)


class SessionStack:
    """The layers of one monitored session and what they share.

    Args:
      owner: The session's class name, for messages.
      mode: The session's `Mode`.
      session_creator: Makes the raw session.
      dispatcher: The session's `HookDispatcher`, whose hooks began.
      cap: The most steps per call (`steps_per_execution`), `None` for "auto".
      should_recover: Whether a preemption error re-creates the session.
      stop_grace_period_secs: How long closing waits for the coordinator's threads.
    """

    def __init__(
        self,
        owner: str,
        mode: Mode,
        session_creator: SessionCreator | TFSessionCreator,
        dispatcher: HookDispatcher,
        cap: int | None,
        should_recover: bool,
        stop_grace_period_secs: float,
    ) -> None:
        self.selection = HookSelection()
        self.hook_states = HookStates(dispatcher)
        # Eager mode: fused steps (a cap above 1) and quiet single steps.
        self.fusion = Fusion(owner, cap, dispatcher) if mode.fuses_steps else None
        self._dispatcher = dispatcher
        self.creator = _CoordinatedSessionCreator(
            session_creator,
            mode,
            dispatcher,
            stop_grace_period_secs,
            self.fusion,
            self.hook_states,
            self.selection,
        )
        self.outer: Layer | None
        if should_recover:
            policy = retry_policy_of(session_creator)
            self.outer = _RecoverableSession(self.creator, policy, owner, mode)
        else:
            self.outer = self.creator.create_session()

    @property
    def raw(self) -> Session | None:
        """The raw session; `None` once closed."""
        return self.creator.tf_sess

    @property
    def recoveries(self) -> int:
        """How many times a preemption error re-created the session."""
        return self.outer.recoveries if isinstance(self.outer, _RecoverableSession) else 0

    def notify_failure(self, error: BaseException) -> None:
        """Calls `on_failure(session, error)` of the hooks that override it, if still open."""
        if self.outer is not None and self.raw is not None:
            self._dispatcher.on_failure(self.raw, error)

    def close(self, clean: bool) -> None:
        """Calls the hooks' `end()` (after a clean exit), then closes every layer.

        Each part runs even if the one before raised; the last error propagates.
        Hooks end once: closing a closed session only raises.
        """
        raw = self.raw
        with ExitStack() as closing:  # Runs the callbacks last first.
            closing.callback(self._forget)
            closing.callback(self._close_layers)
            if clean and raw is not None:
                settle(raw)  # Hooks end on the steps counted.
                self._dispatcher.end(raw)

    def _close_layers(self) -> None:
        if self.outer is None:
            raise RuntimeError("Session is already closed.")
        self.outer.close()

    def _forget(self) -> None:
        self.outer = None
        self.creator.tf_sess = None
        self.creator.coord = None
