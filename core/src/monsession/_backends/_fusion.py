"""Fused steps (eager mode): the steps before the next hook action, in one call.

With `steps_per_execution` other than 1, each `run(step)` first asks every
hook when it next acts (`SessionRunHook.next_action`), then runs the steps
before that inside one `tf.function` built here (the *silent* steps: no hook
is called), then the step at which some hook acts as usual. The loop takes
its step count and deadline as tensors, so it is traced once per step
function, never per count. Steps that run one per call (a cap of 1, or a
step that cannot be fused) skip the hooks in the same way while none acts
(`Fusion.quiet`).

Under collective ops (`MultiWorkerMirroredStrategy`) every worker must run
the same steps, so a worker's hooks and clock cannot decide alone: after
each run every worker says how many silent steps its hooks allow in the
next one (`Fusion.next_silent_steps`), the workers agree on the fewest
(`_distribution._peers.StepAgreement`, the same all-reduce that agrees on
stop signals), and the next run fuses exactly that many
(`Fusion.agreed`), with no clock inside the loop. A worker's time budget
and time-based schedules become a step count at the pace of its last runs.

Under a `ClusterCoordinator` (`ParameterServerStrategy`) the silent steps
are one closure, scheduled on a worker and counted on the host when
scheduled (`Backend.schedules_steps`): their number is decided on the host
in the same way, from the pace of the session's runs, never by a clock in
the loop.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, NamedTuple

from monsession._api._dispatcher import HookDispatcher
from monsession._backends._backend import Backend, FeedDict, StepSource

if TYPE_CHECKING:
    import tensorflow as tf

logger = logging.getLogger("monsession")

AUTO = "auto"

# How long one fused call may run: time-based schedules and Ctrl-C wait no longer.
MAX_SECONDS_PER_CALL = 0.5

# The step count of "auto": no cap but time.
_UNCAPPED = 2**62

# The most silent steps of one run counted before it (under collective ops, or
# scheduled as one closure): a stop signal waits for the end of the run.
MAX_COUNTED_SILENT_STEPS = 500


def check_steps_per_execution(owner: str, value: object, fuses_steps: bool) -> int | None:
    """Validates `steps_per_execution`.

    `fuses_steps`: whether the mode may run several steps per call
    (`Mode.fuses_steps`: eager mode).

    Returns:
      The cap on steps per call, or `None` for `"auto"`.

    Raises:
      TypeError: If `value` is neither an int nor `"auto"`.
      ValueError: If it is smaller than 1, or other than 1 in graph mode.
    """
    if value == AUTO and isinstance(value, str):
        cap = None
    elif isinstance(value, int) and not isinstance(value, bool):
        if value < 1:
            raise ValueError(
                f"{owner}: steps_per_execution must be an int >= 1 or 'auto'; got {value}."
            )
        cap = value
    else:
        raise TypeError(
            f"{owner}: steps_per_execution must be an int >= 1 or 'auto'; got {value!r} "
            f"of type {type(value).__name__}."
        )
    if cap != 1 and not fuses_steps:
        raise ValueError(
            f"{owner}: steps_per_execution={value!r} fuses the steps of a TF2 (eager) loop; "
            "in graph mode each Session.run() is one step: leave it at 1."
        )
    return cap


class _Plan(NamedTuple):
    """When a hook next acts: in `steps` runs (this one is 1) or at `at_time`; what to keep."""

    steps: int
    at_time: float | None
    keep: tuple[str, ...]

    def acts_now(self) -> bool:
        """Whether some hook acts on the coming run (by step, or a time already due)."""
        return self.steps <= 1 or (self.at_time is not None and self.at_time <= time.time())


class Fusion:
    """Plans and runs the silent steps of one monitored session.

    Args:
      owner: The session's class name, for log lines.
      cap: The most steps per call (silent ones plus the last), or `None`.
      hooks: The session's `HookDispatcher`: its hooks that run per step all
        plan ahead (`next_action`), or fusion is off.
    """

    def __init__(self, owner: str, cap: int | None, hooks: HookDispatcher) -> None:
        self._owner = owner
        self._cap = _UNCAPPED if cap is None else cap
        self._hooks = hooks
        blocking = [type(hook).__name__ for hook in hooks.every_step]
        self._enabled = self._cap > 1
        self._explained = False  # Whether a call that cannot be fused was explained.
        # Single steps run without calling the hooks while none acts (`quiet`).
        self._quiet_enabled = not blocking
        self._quiet_left = 0  # Quiet steps left in the plan after the last one.
        self._quiet_until: float | None = None  # The time a hook acts at, if any.
        self._quiet_done = 0  # Quiet steps since the hooks were last called.
        self._unreported = 0  # Silent steps of runs without a step with the hooks.
        # Under collective ops: the silent steps the workers agreed on (see module docstring).
        self._peers = False
        self._backend: Backend | None = None  # The backend of the current session.
        self._agreed = 0
        self._agreed_keep: tuple[str, ...] = ()
        self._paced_from: tuple[int, float] | None = None  # (global step, time) last asked.
        self._loop_pace: float | None = None  # Seconds per step of the last fused loop.
        if blocking:
            self._stop_fusing(
                logging.INFO,
                f"{', '.join(blocking)} must act on every step (no next_action() method)",
            )

    def skips_hooks(self) -> bool:
        """Whether some run may skip the hooks (fused or quiet steps); once false, always false."""
        return self._enabled or self._quiet_enabled

    def run_silent_steps(
        self, fetches: object, feed_dict: FeedDict | None, backend: Backend
    ) -> tuple[int, Mapping[str, tf.Tensor]]:
        """Runs the silent steps before the coming run, if any.

        Returns:
          How many steps ran, and the entries hooks asked to keep.
        """
        if not self._enabled:
            return 0, {}
        if self._peers or backend.schedules_steps():
            counted = self._agreed if self._peers else self.next_silent_steps()
            self._agreed = 0
            return self._run_counted_steps(fetches, feed_dict, backend, counted)
        step, why_not, limit = backend.fusable_step(fetches, feed_dict)
        if step is None:
            if why_not is not None:
                self._explain(why_not)
            return 0, {}
        if not backend.counts_steps():
            self._stop_fusing(
                logging.INFO,
                "the step does not advance the global step by exactly one (or there is none)",
            )
            return 0, {}
        global_step = backend.global_step_after()
        assert global_step is not None
        cap = self._cap
        if limit is not None:  # A step source's steps, its last input too if it ends silently.
            ends = isinstance(fetches, StepSource) and fetches.ends_silently
            cap = min(cap, limit + 1 + ends)
        plan = self._plan(global_step, cap)
        if plan.acts_now():
            return 0, {}
        silent = plan.steps - 1
        if plan.keep and limit is not None:
            silent = min(silent, limit)  # Kept outputs go to the hooks of a step after them.
        done, kept = backend.run_silent(step, plan.keep, silent, plan.at_time)
        if not backend.counts_steps():
            self._stop_fusing(logging.WARNING, "the global step did not advance once per step")
        return done, kept

    def agree_with_workers(self) -> None:
        """Fuses only the silent steps the workers agreed on (`agreed`), never by the clock."""
        self._peers = True

    def attach(self, backend: Backend) -> None:
        """The backend of the session just created (`next_silent_steps` reads its global step)."""
        self._backend = backend
        self._agreed, self._paced_from, self._loop_pace = 0, None, None

    def next_silent_steps(self) -> int:
        """Under collective ops, after each run: the silent steps this worker allows next.

        As many as its hooks allow, and as its time budget
        (`MAX_SECONDS_PER_CALL`, or the time a hook acts at) allows at the
        pace of the last fused loop (before the first one, of the runs since
        it was last asked; none before a pace is known).
        """
        self._agreed = 0
        backend = self._backend
        if not self._enabled or backend is None or not backend.counts_steps():
            return 0
        global_step = backend.global_step_after()
        assert global_step is not None
        now = time.time()
        paced_from, self._paced_from = self._paced_from, (global_step, now)
        seconds_per_step = self._loop_pace
        if seconds_per_step is None:
            if paced_from is None or global_step <= paced_from[0]:
                return 0
            seconds_per_step = (now - paced_from[1]) / (global_step - paced_from[0])
        plan = self._plan(global_step, self._cap)
        budget = (
            MAX_SECONDS_PER_CALL
            if plan.at_time is None
            else min(MAX_SECONDS_PER_CALL, plan.at_time - now)
        )
        self._agreed_keep = plan.keep
        return max(0, min(plan.steps - 1, int(budget / max(seconds_per_step, 1e-9))))

    def agreed(self, silent_steps: int) -> None:
        """The silent steps every worker agreed on for the next run."""
        self._agreed = silent_steps

    def _run_counted_steps(
        self, fetches: object, feed_dict: FeedDict | None, backend: Backend, counted: int
    ) -> tuple[int, Mapping[str, tf.Tensor]]:
        """Exactly `counted` silent steps, no clock: agreed by the workers, or one closure."""
        counted = min(counted, MAX_COUNTED_SILENT_STEPS)
        if counted < 1:
            return 0, {}
        # Whether the call fuses is the same on every worker (the same program).
        step, why_not, limit = backend.fusable_step(fetches, feed_dict)
        if step is None:
            if why_not is not None:
                self._explain(why_not)
            return 0, {}
        silent = counted if limit is None else min(counted, limit)
        started = time.perf_counter()
        done, kept = backend.run_silent(step, self._agreed_keep, silent, None, timed=False)
        if done and not backend.schedules_steps():  # A closure is scheduled, not yet run.
            self._loop_pace = (time.perf_counter() - started) / done
        if not backend.counts_steps():
            self._stop_fusing(logging.WARNING, "the global step did not advance once per step")
        return done, kept

    def quiet(self, backend: Backend) -> bool:
        """Whether the coming single step may run without calling the hooks.

        It may when every hook that runs per step plans ahead and none acts
        on it (by step or time) or keeps outputs of silent steps. A quiet
        step is a silent step of its own: the next run that calls the hooks
        tells them (`SessionRunContext.silent_steps`). The hooks are asked
        once, after they were last called, and the plan counted down to the
        step a hook acts on.
        """
        if not self._quiet_enabled:
            return False
        if self._quiet_done:  # Counting down a plan: quiet until the step a hook acts on.
            if self._quiet_left > 0 and (
                self._quiet_until is None or time.time() < self._quiet_until
            ):
                self._quiet_left -= 1
                self._quiet_done += 1
                return True
            return False
        global_step = backend.global_step_after() if backend.counts_steps() else None
        if global_step is None:
            return False
        plan = self._plan(global_step, _UNCAPPED)
        if plan.keep or plan.acts_now():
            return False
        self._quiet_left, self._quiet_until, self._quiet_done = plan.steps - 2, plan.at_time, 1
        return True

    def report_later(self, silent: int) -> None:
        """Silent steps of a run that called no hook: the next run that does reports them."""
        self._unreported += silent

    def take_quiet_steps(self) -> int:
        """The steps since the hooks were last called (for them); forgets the plan.

        The quiet steps, and the silent steps of runs without the hooks (`report_later`).
        """
        done = self._quiet_done + self._unreported
        self._quiet_done = self._quiet_left = self._unreported = 0
        return done

    def _plan(self, global_step: int, cap: int) -> _Plan:
        """The steps until a hook acts (at most `cap`), the time it acts, the entries to keep."""
        steps = cap
        deadline: float | None = None
        keep: list[str] = []
        for action in self._hooks.next_actions(global_step):
            if action.steps is not None:
                steps = min(steps, action.steps)
            if action.at_time is not None:
                deadline = action.at_time if deadline is None else min(deadline, action.at_time)
            keep.extend(name for name in action.keep if name not in keep)
        return _Plan(steps, deadline, tuple(keep))

    def _explain(self, why_not: str) -> None:
        """Says once per session why a call of a step runs one step, though fusion is on."""
        if self._explained:
            return
        self._explained = True
        logger.warning(
            "%s: steps_per_execution runs this step one step per call: %s.",
            self._owner,
            why_not,
        )

    def _stop_fusing(self, level: int, reason: str) -> None:
        if self._enabled:
            logger.log(level, "%s: steps_per_execution runs single steps: %s.", self._owner, reason)
        self._enabled = False
