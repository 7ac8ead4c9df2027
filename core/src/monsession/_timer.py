"""`SecondOrStepTimer`: the "is it time yet?" logic shared by periodic hooks."""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from typing import Any

from monsession._arguments import check_schedule
from monsession._hook_api import NextAction


class SecondOrStepTimer:
    """Triggers at most once every N seconds or once every N steps.

    Args:
      every_secs: Trigger when this many seconds passed since the last trigger.
      every_steps: Trigger when the step advanced this much since the last
        trigger.

    As TensorFlow's, it accepts 0 (trigger on every new step). Hooks that
    want a positive interval check it with `monsession.check_schedule` first.

    Its state (the last trigger's step and wall-clock time) can be saved
    with `state_dict()` and put back with `load_state_dict()`: a hook saves
    it with each checkpoint so that, after a restart, the first trigger comes
    `every_steps` steps or `every_secs` wall-clock seconds after the last
    one before the checkpoint, not a whole period after the restart.

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
            assert self._last_triggered_time is not None
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
        if last_step is None or last_time is None:
            return NextAction(steps=1)
        if self._every_secs is not None:
            return NextAction(at_time=last_time + self._every_secs)
        assert self._every_steps is not None
        return NextAction(steps=max(1, last_step + self._every_steps - step + 1))

    def update_last_triggered_step(self, step: int) -> tuple[float | None, int | None]:
        """Records a trigger at `step`.

        Returns:
          `(elapsed_secs, elapsed_steps)` since the previous trigger, or
          `(None, None)` for the first one.
        """
        now = time.time()
        if self._last_triggered_time is None or self._last_triggered_step is None:
            elapsed: tuple[float | None, int | None] = (None, None)
        else:
            elapsed = (now - self._last_triggered_time, step - self._last_triggered_step)
        self._last_triggered_time = now
        self._last_triggered_step = step
        return elapsed

    def last_triggered_step(self) -> int | None:
        """The step of the last trigger, or `None`."""
        return self._last_triggered_step

    def state_dict(self) -> dict[str, Any]:
        """The last trigger, as plain values.

        Returns:
          ``{"last_triggered_step": int or None, "last_triggered_time": float
          or None}``; the time is wall-clock (`time.time()`, seconds since the
          epoch), so it keeps its meaning in another process.
        """
        return {
            "last_triggered_step": self._last_triggered_step,
            "last_triggered_time": self._last_triggered_time,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Puts back a state from `state_dict()`.

        Raises:
          ValueError: If `state` does not hold a step (int or None) and a
            time (finite number or None), both given or both None. Nothing
            is changed then.
        """
        if not isinstance(state, Mapping):
            raise ValueError(f"SecondOrStepTimer state must be a mapping, got {state!r}.")
        step = state.get("last_triggered_step")
        when = state.get("last_triggered_time")
        if step is not None and (isinstance(step, bool) or not isinstance(step, int)):
            raise ValueError(
                f"SecondOrStepTimer: last_triggered_step must be an int, got {step!r}."
            )
        if when is not None and (
            isinstance(when, bool) or not isinstance(when, (int, float)) or not math.isfinite(when)
        ):
            raise ValueError(
                f"SecondOrStepTimer: last_triggered_time must be a finite number, got {when!r}."
            )
        if (step is None) != (when is None):
            raise ValueError(
                "SecondOrStepTimer: last_triggered_step and last_triggered_time must both be "
                f"set or both be None, got {step!r} and {when!r}."
            )
        self._last_triggered_step = step
        self._last_triggered_time = None if when is None else float(when)
