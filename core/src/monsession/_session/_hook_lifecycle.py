"""`HookLifecycle`: the one order in which every driver takes its hooks through a run.

`begin()` once; `created(...)` each time a session is created (the hooks'
saved state restored, then `after_create_session`); `before_run` /
`after_run` around each step (`before_run` straight through the
dispatcher); then `end(session)` after a clean stop (the
steps in flight settled first) or `failed(session, error)` instead. The
monitored session (through its `SessionStack` and `_HookedSession`) and
drivers outside one (the Keras family's `HooksCallback`) call these phases;
what happens inside each, and in which order, is decided here.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from monsession._api._dispatcher import HookDispatcher
from monsession._api._hook_api import SessionRunHook
from monsession._api._run_context import SessionRunContext
from monsession._api._types import SessionLike
from monsession._backends._pending import settle
from monsession._durability._hook_state import HookStates, attach

if TYPE_CHECKING:
    import tensorflow as tf

    from monsession._backends._backend import HookResults


class HookLifecycle:
    """Takes one driver's hooks through their lifecycle, through one `HookDispatcher`.

    Args:
      hooks: The hooks, in order.
      owner: The session's (or driver's) class name, for messages.

    Raises:
      TypeError: If a stateful hook's `state_key` is not a non-empty string.
      ValueError: If two stateful hooks have the same key.
    """

    def __init__(self, hooks: Iterable[SessionRunHook], owner: str = "MonitoredSession") -> None:
        self.dispatcher = HookDispatcher(hooks, owner)
        """The `HookDispatcher` that calls the hooks (`before_run` goes straight to it)."""
        self._hook_states = HookStates(self.dispatcher)
        self._keeps_state = bool(self._hook_states.keys)

    def begin(self) -> None:
        """Calls every hook's `begin()`."""
        self.dispatcher.begin()

    def created(
        self,
        session: SessionLike,
        coord: tf.train.Coordinator | None,
        restored_from: str | None,
    ) -> None:
        """A session was created: restores the hooks' state, then calls `after_create_session`.

        Args:
          session: The session the hooks are given (its checkpoints get their state).
          coord: The session's coordinator (graph mode), or `None`.
          restored_from: The checkpoint the session was restored from, or `None`:
            the hooks' state saved beside it is loaded first (a restored
            timer decides whether they act on the first step).
        """
        attach(session, self._hook_states)
        if restored_from is not None:
            self._hook_states.restore(restored_from)
        self.dispatcher.after_create_session(session, coord)

    def after_run(
        self,
        run_context: SessionRunContext,
        hook_results: HookResults,
        run_options: tf.compat.v1.RunOptions | None,
        run_metadata: tf.compat.v1.RunMetadata | None,
        chosen: frozenset[int] | None = None,
    ) -> None:
        """Calls `after_run`; a hook state written meanwhile is rewritten once all returned."""
        if not self._keeps_state:
            self.dispatcher.after_run(run_context, hook_results, run_options, run_metadata, chosen)
            return
        with self._hook_states.after_run_calls():
            self.dispatcher.after_run(run_context, hook_results, run_options, run_metadata, chosen)

    def end(self, session: SessionLike) -> None:
        """A clean stop: waits for the steps in flight (`settle`), then every hook's `end()`."""
        settle(session)  # Hooks end on the steps counted.
        self.dispatcher.end(session)

    def failed(self, session: SessionLike, error: BaseException) -> None:
        """The run failed: `on_failure(session, error)` of the hooks that override it."""
        self.dispatcher.on_failure(session, error)
