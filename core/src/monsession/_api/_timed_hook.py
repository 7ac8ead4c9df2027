"""`TimedHook`: the base of hooks that act on a `SecondOrStepTimer` schedule of global steps."""

from __future__ import annotations

from typing import Any

from monsession._api._hook_api import NextAction, SessionRunHook
from monsession._api._timer import SecondOrStepTimer


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
