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

    As TensorFlow's, it accepts 0 (trigger on every new step). Hooks that
    want a positive interval check it with `monsession.plugins.check_schedule` first.

    Its state can be saved with `state_dict()` and put back with
    `load_state_dict()` in another process: a step-based schedule continues
    exactly, and the time between the two processes counts for nothing.

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
        """Returns whether the timer should trigger at `step`.

        True on the first call, never twice for the same step, and otherwise
        when `every_secs` seconds or `every_steps` steps have passed since the
        last trigger.
        """
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

        Args:
          step: The step the hook will test at the coming run (e.g. the
            global step after it).

        Returns:
          A `NextAction`: the coming run before the first trigger, else the
          run at which the step reaches `every_steps` past the last trigger,
          or the time `every_secs` after it.
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
        """Records a trigger at `step`.

        Returns:
          `(elapsed_secs, elapsed_steps)` since the previous trigger, or
          `(None, None)` for the first one (and after loading a state that
          has no time). After `load_state_dict()` the seconds exclude the
          time between the save and the load.
        """
        now = time.time()
        elapsed = self._elapsed(step, now)
        self._last_triggered_time = now
        self._last_triggered_step = step
        return elapsed

    def elapsed_since_trigger(self, step: int) -> tuple[float | None, int | None]:
        """`(elapsed_secs, elapsed_steps)` from the last trigger to `step`, recording nothing.

        For an action off the schedule (e.g. a hook's last action at
        `end()`), which must not move the next trigger: a job restarted
        from a state saved after it acts at the uninterrupted run's steps.
        `(None, None)` as `update_last_triggered_step` returns it.
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
        """The last trigger, as plain values that keep their meaning in another process.

        Returns:
          ``{"last_triggered_step": int or None, "secs_since_trigger": float
          or None}``: the step of the last trigger, and the seconds from it
          to now (not a clock time: the time until the state is loaded
          again does not count).
        """
        since = None
        if self._last_triggered_time is not None:
            since = max(0.0, time.time() - self._last_triggered_time)
        return {"last_triggered_step": self._last_triggered_step, "secs_since_trigger": since}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Puts back a state from `state_dict()`.

        The last trigger's step is taken as it is; its time is set
        `secs_since_trigger` seconds before now (an `every_secs` timer with
        no time triggers at the next step), so elapsed times leave out the
        time between the save and the load.

        Raises:
          ValueError: If `state` does not hold a step (int or None) and
            seconds (a finite number >= 0, or None; None with no step).
            Nothing is changed then.
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

    Holds the hook's `SecondOrStepTimer` as `self._timer` and gives, once,
    the three methods every such hook would otherwise write the same way:

    * `next_action(global_step)`: the run at which the global step after it
      reaches the timer's next trigger, so eager sessions can fuse the steps
      before it (`steps_per_execution`);
    * `state_dict()` / `load_state_dict(state)`: the timer's last trigger,
      ``{"timer": ...}``, saved with each checkpoint (see
      `monsession.StatefulHook`), so a restarted job triggers at the steps the
      uninterrupted one would have, and elapsed seconds leave out the time it
      was down.

    A subclass checks its own arguments, calls `super().__init__()` with the
    schedule, tests the global step after each run with
    `self._timer.should_trigger_for_step` (``run_context.global_step + 1`` in
    `before_run`, ``run_context.global_step_after(...)`` in `after_run`) and
    records each trigger with `self._timer.update_last_triggered_step`:

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

    A hook that counts something else than the global step (e.g. its own
    runs) overrides `next_action`, or uses `SecondOrStepTimer` directly.

    Args:
      every_secs: Trigger at most once every this many seconds.
      every_steps: Trigger once every this many global steps.

    Raises:
      ValueError, TypeError: As `SecondOrStepTimer` (exactly one of the two,
        a number >= 0).
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
