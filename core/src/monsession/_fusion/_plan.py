"""How many steps a run may skip the hooks for: the cap, the time budget, the plan.

`steps_per_execution` caps the steps of one call (`check_steps_per_execution`);
the hooks' `next_action` answers say when one of them next acts (`plan`);
a fused call also ends after `seconds_per_call()` (`MONSESSION_FUSED_CALL_SECONDS`,
so time-based schedules and Ctrl-C wait no longer). `QuietSteps` holds the
quiet-step rule.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from typing import NamedTuple, Protocol

from monsession._api._types import Unchecked

AUTO = "auto"

ENV_FUSED_CALL_SECONDS = "MONSESSION_FUSED_CALL_SECONDS"
"""The environment variable giving the most seconds one call of fused steps runs (0.5)."""

DEFAULT_SECONDS_PER_CALL = 0.5
"""How long one fused call runs at most, unless `MONSESSION_FUSED_CALL_SECONDS` says."""

UNCAPPED = 2**62
"""The step count of "auto": no cap but time."""

MAX_COUNTED_SILENT_STEPS = 500
"""The most silent steps of one run counted before it (under collective ops, or
scheduled as one closure): a stop signal waits for the end of the run."""


def seconds_per_call() -> float:
    """The time budget of one fused call: `MONSESSION_FUSED_CALL_SECONDS`, or 0.5.

    Raises:
      ValueError: If the variable is set to something other than a positive number.
    """
    value = os.environ.get(ENV_FUSED_CALL_SECONDS, "").strip()
    if not value:
        return DEFAULT_SECONDS_PER_CALL
    try:
        seconds = float(value)
    except ValueError:
        seconds = 0.0
    if not seconds > 0:
        raise ValueError(
            f"{ENV_FUSED_CALL_SECONDS}={value!r}: expected a number of seconds > 0 (how long "
            f"one fused call of steps_per_execution may run; unset, {DEFAULT_SECONDS_PER_CALL})."
        )
    return seconds


def check_steps_per_execution(owner: str, value: Unchecked) -> int | None:
    """Validates `steps_per_execution` (`Mode.check_steps_per_execution`).

    Returns:
      The cap on steps per call, or `None` for `"auto"`.

    Raises:
      TypeError: If `value` is neither an int nor `"auto"`.
      ValueError: If it is smaller than 1.
    """
    if value == AUTO and isinstance(value, str):
        return None
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(
            f"{owner}: steps_per_execution must be an int >= 1 or 'auto'; got {value!r} "
            f"of type {type(value).__name__}."
        )
    if value < 1:
        raise ValueError(
            f"{owner}: steps_per_execution must be an int >= 1 or 'auto'; got {value}."
        )
    return value


class Action(Protocol):
    """When a hook next acts, as its `next_action()` says (a `NextAction`)."""

    @property
    def steps(self) -> int | None:
        """In that many runs (1: the coming one); `None`: at no particular step."""

    @property
    def at_time(self) -> float | None:
        """At the first run at or after this `time.time()`; `None`: at no particular time."""

    @property
    def keep(self) -> tuple[str, ...]:
        """The step outputs the hook needs from every step, silent ones too."""


class PlanningHooks(Protocol):
    """A session's hooks as fusion reads them, once (its `HookDispatcher`)."""

    @property
    def every_step(self) -> Sequence[object]:
        """The hooks that run per step without planning ahead (no `next_action`)."""

    def next_actions(self, global_step: int) -> Sequence[Action]:
        """When each hook that plans ahead next acts, asked with the global step."""


class FusionPolicy(NamedTuple):
    """What the hooks tell fusion, read once per session from its `HookDispatcher`.

    Attributes:
      blocking: The class names of the hooks that run per step without
        planning ahead (no `next_action`): they act on every step, so no
        run skips the hooks while they are installed.
      next_actions: When each hook that plans ahead next acts, asked with the
        global step (`HookDispatcher.next_actions`).
    """

    blocking: tuple[str, ...]
    next_actions: Callable[[int], Sequence[Action]]


class Plan(NamedTuple):
    """When a hook next acts: in `steps` runs (this one is 1) or at `at_time`; what to keep."""

    steps: int
    at_time: float | None
    keep: tuple[str, ...]

    def acts_now(self) -> bool:
        """Whether some hook acts on the coming run (by step, or a time already due)."""
        return self.steps <= 1 or (self.at_time is not None and self.at_time <= time.time())


def plan(policy: FusionPolicy, global_step: int, cap: int) -> Plan:
    """The steps until a hook acts (at most `cap`), the time it acts, the entries to keep."""
    steps = cap
    deadline: float | None = None
    keep: list[str] = []
    for action in policy.next_actions(global_step):
        if action.steps is not None:
            steps = min(steps, action.steps)
        if action.at_time is not None:
            deadline = action.at_time if deadline is None else min(deadline, action.at_time)
        keep.extend(name for name in action.keep if name not in keep)
    return Plan(steps, deadline, tuple(keep))


class QuietSteps:
    """The quiet-step rule: single steps run without the hooks while none acts.

    A run that fuses nothing may run as a quiet step when every hook that
    runs per step plans ahead and none acts on it (by step or time) or keeps
    outputs of silent steps. A quiet step is a silent step of its own: the
    next run that calls the hooks tells them (`SessionRunContext.silent_steps`).
    The hooks are asked once, after they were last called, and the plan
    counted down to the step a hook acts on.
    """

    def __init__(self, policy: FusionPolicy) -> None:
        self._policy = policy
        self.enabled = not policy.blocking
        self._left = 0  # Quiet steps left in the plan after the last one.
        self._until: float | None = None  # The time a hook acts at, if any.
        self._done = 0  # Quiet steps since the hooks were last called.
        self._unreported = 0  # Silent steps of runs without a step with the hooks.

    def next_is_quiet(self, read_step: Callable[[], int | None]) -> bool:
        """Whether the coming single step may skip the hooks.

        `read_step`: the global step before it, if the host knows it (read only
        when the hooks are asked).
        """
        if not self.enabled:
            return False
        if self._done:  # Counting down a plan: quiet until the step a hook acts on.
            if self._left > 0 and (self._until is None or time.time() < self._until):
                self._left -= 1
                self._done += 1
                return True
            return False
        global_step = read_step()
        if global_step is None:
            return False
        coming = plan(self._policy, global_step, UNCAPPED)
        if coming.keep or coming.acts_now():
            return False
        self._left, self._until, self._done = coming.steps - 2, coming.at_time, 1
        return True

    def report_later(self, silent: int) -> None:
        """Silent steps of a run that called no hook: the next run that does reports them."""
        self._unreported += silent

    def take(self) -> int:
        """The steps since the hooks were last called (for them); forgets the plan."""
        done = self._done + self._unreported
        self._done = self._left = self._unreported = 0
        return done
