"""How many steps a run may skip the hooks for: the cap, the time budget, the plan.

`steps_per_execution` caps the steps of one call (`check_steps_per_execution`);
the hooks' `next_action` answers say when one of them next acts (`plan`);
a fused call also ends after `seconds_per_call()` (`MONSESSION_FUSED_CALL_SECONDS`,
so time-based schedules and Ctrl-C wait no longer). `QuietSteps` holds the
quiet-step rule; `DueHooks` which hooks a step with the hooks calls.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
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

    @property
    def planning(self) -> Sequence[Hashable]:
        """The hooks that run per step and plan ahead, in order."""

    def next_actions(self, global_step: int) -> Sequence[Action]:
        """When each hook that plans ahead (`planning`) next acts, asked with the global step."""

    @property
    def state_writers(self) -> Sequence[Hashable]:
        """The hooks that save the hooks' state (`use_hook_state`)."""

    @property
    def stateful(self) -> Mapping[str, Hashable]:
        """The hooks whose state is saved, by key."""


class FusionPolicy(NamedTuple):
    """What the hooks tell fusion, read once per session from its `HookDispatcher`.

    Attributes:
      blocking: The class names of the hooks that run per step without
        planning ahead (no `next_action`): they act on every step, so no
        run skips the hooks while they are installed.
      next_actions: When each hook that plans ahead next acts, asked with the
        global step (`HookDispatcher.next_actions`).
      planning: Those hooks, in the same order.
      saved_together: The ids of the hooks whose state is saved, called with any
        of those that save it (`writers`), so that the state saved counts every step.
    """

    blocking: tuple[str, ...]
    next_actions: Callable[[int], Sequence[Action]]
    planning: Sequence[Hashable] = ()
    saved_together: frozenset[int] = frozenset()
    writers: frozenset[int] = frozenset()


class Plan(NamedTuple):
    """When a hook next acts: in `steps` runs (this one is 1) or at `at_time`; what to keep;
    each hook's own answer (`actions`, in the hooks' order)."""

    steps: int
    at_time: float | None
    keep: tuple[str, ...]
    actions: Sequence[Action] = ()

    def acts_now(self) -> bool:
        """Whether some hook acts on the coming run (by step, or a time already due)."""
        return self.steps <= 1 or (self.at_time is not None and self.at_time <= time.time())


def plan(policy: FusionPolicy, global_step: int, cap: int) -> Plan:
    """The steps until a hook acts (at most `cap`), the time it acts, the entries to keep."""
    steps = cap
    deadline: float | None = None
    keep: list[str] = []
    actions = policy.next_actions(global_step)
    for action in actions:
        if action.steps is not None:
            steps = min(steps, action.steps)
        if action.at_time is not None:
            deadline = action.at_time if deadline is None else min(deadline, action.at_time)
        for name in action.keep:  # No generator: a call fewer per hook.
            if name not in keep:
                keep.append(name)
    return Plan(steps, deadline, tuple(keep), actions)


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
        self._plan: Plan | None = None  # The plan the quiet steps follow.

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
        coming = self._plan = plan(self._policy, global_step, UNCAPPED)
        if coming.keep or coming.acts_now():
            return False
        self._left, self._until, self._done = coming.steps - 2, coming.at_time, 1
        return True

    def report_later(self, silent: int) -> None:
        """Silent steps of a run that called no hook: the next run that does reports them."""
        self._unreported += silent

    def take(self) -> tuple[int, Plan | None]:
        """The steps since the hooks were last called (for them), and the plan the
        coming step with the hooks follows (`None`: unknown); forgets the plan."""
        done, followed = self._done + self._unreported, self._plan
        if self._unreported:
            followed = None
        self._done = self._left = self._unreported = 0
        self._plan = None
        return done, followed


class _Due(NamedTuple):
    """A hook's last answer, as an `Action` from a later global step."""

    steps: int | None
    at_time: float | None
    keep: tuple[str, ...]


class DueHooks:
    """Which hooks a step with the hooks calls: after a plan, those acting on it (by
    step or time) or keeping outputs. A hook skipped is told, when next called, of
    every step it did not see (its own `SessionRunContext.silent_steps`). A step on
    which a hook saving the hooks' state acts calls every hook whose state is saved.

    Every hook is asked at each plan (`next_actions`), but the answer of one not
    called since its last answer is its last answer, counted down by the global
    steps since: a hook counting its own runs answers from the runs it saw.
    """

    def __init__(self, policy: FusionPolicy) -> None:
        self._hooks = tuple(policy.planning)
        self._ask = policy.next_actions
        self._writers = policy.writers
        self._saved_together = policy.saved_together & frozenset(map(id, self._hooks))
        self._missed = [0] * len(self._hooks)  # Steps each hook did not see beyond the run's.
        self._missing = False  # Whether some count is not 0.
        self._answers: list[tuple[int, Action] | None] = [None] * len(self._hooks)

    def refresh(self) -> None:
        """Takes every hook's next answer (a new session: the global step may go back)."""
        self._answers = [None] * len(self._hooks)

    def next_actions(self, global_step: int) -> Sequence[Action]:
        """When each hook next acts: its answer now, or its last one counted down."""
        actions = list(self._ask(global_step))
        answers = self._answers
        for index, action in enumerate(actions):
            answer = answers[index]
            if answer is None:
                answers[index] = (global_step, action)
                continue
            asked_at, action = answer
            if action.steps is not None:
                steps = max(1, action.steps - (global_step - asked_at))
                action = _Due(steps, action.at_time, action.keep)
            actions[index] = action
        return actions

    def call(
        self,
        coming: Plan | None,
        runs: int,
        chosen: frozenset[int] | None,
        silent: int,
        training: bool,
    ) -> tuple[frozenset[int] | None, dict[Hashable, int] | None]:
        """The ids of the hooks a step calls (`None`: all the call `chosen`), and the
        silent steps each is told (`None`: `silent`, for every hook).

        `coming`: the plan the step follows, of which it is run number `runs`
        (`None`: no plan, every chosen hook is called). The hooks not called
        miss `silent` steps more, and this one if it is a `training` step; the
        ones called answer afresh at the next plan.
        """
        due = None if coming is None or not coming.actions else self._due(coming, runs)
        called = chosen if due is None else due
        if called is None and not self._missing:
            self._answers = [None] * len(self._hooks)
            return None, None
        told: dict[Hashable, int] = {}
        missed, answers = self._missed, self._answers
        for index, hook in enumerate(self._hooks):
            if called is None or id(hook) in called:
                told[hook] = silent + missed[index]
                missed[index] = 0
                answers[index] = None
            else:
                missed[index] += silent + training
        self._missing = any(missed)
        return due, told

    def _due(self, coming: Plan, runs: int) -> frozenset[int] | None:
        """The ids of the hooks acting on the `runs`-th run under `coming` (`None`: all)."""
        now = time.time()
        due = []
        for hook, action in zip(self._hooks, coming.actions, strict=True):
            steps, at_time = action.steps, action.at_time
            if (
                action.keep
                or (steps is not None and steps <= runs)
                or (at_time is not None and at_time <= now)
            ):
                due.append(id(hook))
        if self._writers and not self._writers.isdisjoint(due):
            due.extend(self._saved_together)  # The state saved counts every step.
        chosen = frozenset(due)
        return None if len(chosen) >= len(self._hooks) else chosen
