"""`RunTimedHook`: the base of the hooks that act every N of their own runs or N seconds."""

from __future__ import annotations

from typing import Any

from monsession import NextAction, SecondOrStepTimer, SessionRunHook


class RunTimedHook(SessionRunHook):
    """A hook with a `SecondOrStepTimer` over the runs it saw since `begin()`.

    TensorFlow's `LoggingTensorHook` counts its own runs, not the global step
    (unlike `monsession.TimedHook`), and so does `ProgressBarHook`. This base
    keeps that count and the timer over it, and gives the hook's
    `next_action()` and its state (both, saved with each checkpoint, so a
    restarted hook goes on with the schedule it had). A subclass calls
    `_reset_runs()` in `begin()`, `_due(silent_steps)` in `before_run()`,
    `_trigger()` when it acts on its schedule (`_since_trigger()` when it acts
    off it, which leaves the schedule alone) and `_ran()` at the end of
    `after_run()`.

    Args:
      name: The hook's name, for error messages.
      every_secs: Due at most once every this many seconds.
      every_steps: Due every this many runs. With neither, never due.
    """

    def __init__(self, name: str, every_secs: float | None, every_steps: int | None) -> None:
        self._name = name
        self._timer = (
            None
            if every_secs is None and every_steps is None
            else SecondOrStepTimer(every_secs=every_secs, every_steps=every_steps)
        )
        self._runs = 0

    def _reset_runs(self) -> None:
        """Forgets the runs and the last trigger."""
        if self._timer is not None:
            self._timer.reset()
        self._runs = 0

    def _due(self, silent_steps: int) -> bool:
        """Counts the steps that ran silently before the coming run; whether it is due."""
        self._runs += silent_steps
        return self._timer is not None and self._timer.should_trigger_for_step(self._runs)

    def _ran(self) -> None:
        """Counts the run that just finished."""
        self._runs += 1

    def _trigger(self) -> float | None:
        """Records a trigger at the current run; the seconds since the previous one, if any."""
        if self._timer is None:
            return None
        elapsed_secs, _ = self._timer.update_last_triggered_step(self._runs)
        return elapsed_secs

    def _since_trigger(self) -> float | None:
        """The seconds from the last trigger to the current run, recording no trigger."""
        if self._timer is None:
            return None
        elapsed_secs, _ = self._timer.elapsed_since_trigger(self._runs)
        return elapsed_secs

    def next_action(self, global_step: int) -> NextAction:
        """The run at which the hook is next due (for fused steps)."""
        return NextAction() if self._timer is None else self._timer.next_action(self._runs)

    def state_dict(self) -> dict[str, Any]:
        """The runs counted and the timer's last trigger (see `monsession.StatefulHook`)."""
        return {
            "iterations": self._runs,
            "timer": None if self._timer is None else self._timer.state_dict(),
        }

    def load_state_dict(self, state: Any) -> None:
        """Takes back the runs counted and the last trigger.

        Raises:
          ValueError: If `iterations` is not an int >= 0, or the timer's state
            does not fit; nothing is changed then.
        """
        iterations = state["iterations"]
        if isinstance(iterations, bool) or not isinstance(iterations, int) or iterations < 0:
            raise ValueError(f"{self._name}: iterations must be an int >= 0, got {iterations!r}.")
        if self._timer is not None and state["timer"] is not None:
            self._timer.load_state_dict(state["timer"])
        self._runs = iterations
