"""`SecondOrStepTimer`: the "is it time yet?" logic shared by periodic hooks.

`TimedHook` is the base of hooks that act on its schedule of global steps.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from typing import Any, TypeGuard

from monsession._api._hook_api import NextAction, SessionRunHook
from monsession._api._types import Unchecked, check_schedule


class SecondOrStepTimer:
    """Triggers at most once every N seconds or once every N steps.

    Args:
      every_secs: Trigger when this many seconds passed since the last trigger.
      every_steps: Trigger when the step advanced this much since the last
        trigger.

    As TensorFlow's, it accepts 0 (trigger on every new step). Its
    `state_dict()` loads back in another process: a step schedule continues
    exactly, and the time between the two processes does not count.

    Raises:
      ValueError: If both or neither of `every_secs` and `every_steps` are
        given, or if the given one is negative or NaN.
      TypeError: If the given one is not a number (`every_steps`: an int).
    """

    def __init__(self, every_secs: float | None = None, every_steps: int | None = None) -> None:
        check_schedule(
            "SecondOrStepTimer",
            "every_steps",
            every_steps,
            "every_secs",
            every_secs,
            allow_zero=True,
        )
        self._every_secs = every_secs
        self._every_steps = every_steps
        self.reset()

    def reset(self) -> None:
        """Forgets the last trigger, so the next step triggers."""
        self._last_triggered_step: int | None = None
        self._last_triggered_time: float | None = None

    def should_trigger_for_step(self, step: int) -> bool:
        """Whether to trigger at `step`: first call, or the interval passed (never twice a step)."""
        last_step = self._last_triggered_step
        if last_step is None:
            return True
        if last_step == step:
            return False
        if self._every_secs is not None:
            if self._last_triggered_time is None:  # Loaded without a time.
                return True
            return time.time() >= self._last_triggered_time + self._every_secs
        assert self._every_steps is not None
        return step >= last_step + self._every_steps

    def next_action(self, step: int) -> NextAction:
        """When the timer next triggers, for `SessionRunHook.next_action()`.

        `step` is the step the hook tests at the coming run (e.g. the global
        step after it).
        """
        last_step, last_time = self._last_triggered_step, self._last_triggered_time
        if last_step is None:
            return NextAction(steps=1)
        if self._every_secs is not None:
            if last_time is None:
                return NextAction(steps=1)
            return NextAction(at_time=last_time + self._every_secs)
        assert self._every_steps is not None
        return NextAction(steps=max(1, last_step + self._every_steps - step + 1))

    def update_last_triggered_step(self, step: int) -> tuple[float | None, int | None]:
        """Records a trigger at `step`; returns `(elapsed_secs, elapsed_steps)` since the last.

        `(None, None)` for the first one (and after loading a state without a time).
        """
        now = time.time()
        elapsed = self._elapsed(step, now)
        self._last_triggered_time = now
        self._last_triggered_step = step
        return elapsed

    def elapsed_since_trigger(self, step: int) -> tuple[float | None, int | None]:
        """`(elapsed_secs, elapsed_steps)` since the last trigger, recording nothing.

        For an action off the schedule (e.g. at `end()`), which must not move
        the next trigger.
        """
        return self._elapsed(step, time.time())

    def _elapsed(self, step: int, now: float) -> tuple[float | None, int | None]:
        if self._last_triggered_time is None:
            return (None, None)
        assert self._last_triggered_step is not None
        return (now - self._last_triggered_time, step - self._last_triggered_step)

    def last_triggered_step(self) -> int | None:
        """The step of the last trigger, or `None`."""
        return self._last_triggered_step

    def state_dict(self) -> dict[str, Any]:
        """``{"last_triggered_step": int | None, "secs_since_trigger": float | None}``.

        Seconds since the trigger, not a clock time: the time until the load does not count.
        """
        since = None
        if self._last_triggered_time is not None:
            since = max(0.0, time.time() - self._last_triggered_time)
        return {"last_triggered_step": self._last_triggered_step, "secs_since_trigger": since}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Puts back a state from `state_dict()`, its time `secs_since_trigger` before now.

        Raises:
          ValueError: If `state` does not hold a step (int or None) and
            seconds (a finite number >= 0, or None; None with no step);
            nothing is changed then.
        """
        step, since = _checked_state(state)
        self._last_triggered_step = step
        self._last_triggered_time = None if since is None else time.time() - since


def _checked_state(state: Mapping[str, Unchecked]) -> tuple[int | None, float | None]:
    """The last trigger's step and seconds since it, from a `state_dict()`; else `ValueError`."""
    if not isinstance(state, Mapping):
        raise ValueError(f"SecondOrStepTimer state must be a mapping, got {state!r}.")
    step = state.get("last_triggered_step")
    since = state.get("secs_since_trigger")
    if step is not None and not _is_int(step):
        raise ValueError(f"SecondOrStepTimer: last_triggered_step must be an int, got {step!r}.")
    if since is not None and not _is_seconds(since):
        raise ValueError(
            f"SecondOrStepTimer: secs_since_trigger must be a finite number >= 0, got {since!r}."
        )
    if step is None and since is not None:
        raise ValueError(
            "SecondOrStepTimer: secs_since_trigger needs a last_triggered_step, got "
            f"{since!r} without one."
        )
    return step, None if since is None else float(since)


def _is_int(value: Unchecked) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_seconds(value: Unchecked) -> TypeGuard[int | float]:
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value >= 0
    )


class TimedHook(SessionRunHook):
    """A hook that acts every N global steps or every N seconds.

    Holds a `SecondOrStepTimer` as `self._timer`, and gives `next_action`
    (the run at which the global step after it triggers, so eager sessions
    fuse the steps before) and `state_dict`/`load_state_dict` (the timer's
    last trigger, so a restarted job triggers at the uninterrupted one's
    steps; see `monsession.StatefulHook`). A subclass tests the global step
    with `self._timer.should_trigger_for_step` (``run_context.global_step + 1``
    in `before_run`, ``run_context.global_step_after(...)`` in `after_run`)
    and records each trigger with `self._timer.update_last_triggered_step`:

    ```python
    class EveryNStepsHook(monsession.TimedHook):
        def __init__(self, every_n_steps):
            monsession.plugins.check_interval("EveryNStepsHook", "every_n_steps",
                                              every_n_steps, "steps")
            super().__init__(every_steps=every_n_steps)

        def after_run(self, run_context, run_values):
            run_context = monsession.plugins.as_run_context(run_context)
            step = run_context.global_step_after(self._timer.should_trigger_for_step)
            if step is not None:
                self._timer.update_last_triggered_step(step)
                print("acting at step", step)
    ```

    A hook that counts something else (e.g. its own runs) overrides
    `next_action`, or uses `SecondOrStepTimer` directly. Arguments and
    errors are `SecondOrStepTimer`'s.
    """

    def __init__(self, every_secs: float | None = None, every_steps: int | None = None) -> None:
        self._timer = SecondOrStepTimer(every_secs=every_secs, every_steps=every_steps)

    def next_action(self, global_step: int) -> NextAction:
        """The run at which the global step after it next triggers the timer."""
        return self._timer.next_action(global_step + 1)

    def state_dict(self) -> dict[str, Any]:
        """The timer's last trigger (see `monsession.StatefulHook`)."""
        return {"timer": self._timer.state_dict()}

    def load_state_dict(self, state: Any) -> None:
        """Takes back the last trigger: the next one comes one period after it."""
        self._timer.load_state_dict(state["timer"])
