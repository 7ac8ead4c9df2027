"""What a loop that drives a monitored session uses of it."""

from __future__ import annotations

from typing import Protocol

from monsession._api._dispatcher import HookDispatcher
from monsession._api._session_like import SessionLike


class LoopSession(SessionLike, Protocol):
    """The part of a monitored session that `Epochs.run` drives (eager mode).

    Its `run` runs one step with the hooks: here a `StepSource` that takes its batch.
    """

    @property
    def dispatcher(self) -> HookDispatcher:
        """Calls the session's hooks: a loop calls their epoch methods through it."""

    @property
    def steps_per_execution(self) -> int | str:
        """1 (single steps), N or `"auto"`: whether the loop builds a fused step."""

    @property
    def recoveries(self) -> int:
        """How many times a preemption error re-created the session."""

    def should_stop(self) -> bool:
        """Whether a hook, a signal or the coordinator asked to stop, or it is closed."""
