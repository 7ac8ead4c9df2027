"""Fused steps (eager mode): which runs skip the hooks, and how many steps they run.

With `steps_per_execution` other than 1, a training `run(step)` with all the hooks
(`Fusion.prepare`) asks every hook when it next acts (`next_action`, `_plan.plan`), runs the
steps before that in one `tf.function` (*silent* steps, no hook called; `_loop`), then the step
at which a hook acts, calling only the hooks acting there (`_plan.DueHooks`), each told how many
steps ran without it (`SessionRunContext.silent_steps`). A run that fuses nothing may run
*quiet*, without the hooks, while none acts (`_plan.QuietSteps`).

A run does not fuse (`_loop.why_not_fused` says why, once per session) when
given a `feed_dict`, called with arguments, scheduling its closure itself, or
not a `tf.function`; fusion stops for good when a hook acts on every step (no
`next_action`) or the step does not advance the global step by exactly one.

Under collective ops (`MultiWorkerMirroredStrategy`) every worker runs the same steps: after
each run each says how many silent steps its hooks allow next (`Fusion.next_silent_steps`), all
fuse the fewest (`StepVotes`, the all-reduce that agrees on stop signals; `Fusion.agreed`), with
no clock in the loop: time budgets become step counts at the pace of the last runs. Under a
`ClusterCoordinator` the silent steps are one closure, counted on the host when scheduled
(`LoopRunner.schedules_steps`), their number decided the same way.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Hashable, Mapping
from typing import NamedTuple, Protocol

import tensorflow as tf

from monsession._api._types import FeedDict, Fetches
from monsession._fusion._loop import (
    LoopRunner,
    RunsLoops,
    StepSource,
    fused_function,
    loop_for,
    why_not_fused,
)
from monsession._fusion._plan import (
    MAX_COUNTED_SILENT_STEPS,
    UNCAPPED,
    DueHooks,
    FusionPolicy,
    Plan,
    PlanningHooks,
    QuietSteps,
    plan,
    seconds_per_call,
)

logger = logging.getLogger("monsession")

Kept = Mapping[str, tf.Tensor]
"""The outputs hooks keep from every silent step, stacked, by name."""
_NOTHING: Kept = {}  # Kept when no step ran silently (never written to).


class Selection(Protocol):
    """The hooks the current call runs (`None`: all), and whether it is a training step."""

    hooks: frozenset[int] | None
    training: bool


class Call(NamedTuple):
    """What a `run()` runs once its silent steps ran (`Fusion.prepare`).

    `fetches`: what to run, a step source's input taken (`None`: the silent steps took its last
    one, nothing is left to run); `quiet`: run it without the hooks; else with them, told of the
    `silent` steps before it and the outputs `kept` from them. `due`: the ids of the hooks to
    call (`None`: all the call chose); `told`: the silent steps each is told, when they differ.
    """

    fetches: Fetches | None
    quiet: bool = False
    silent: int = 0
    kept: Kept | None = None
    due: frozenset[int] | None = None
    told: dict[Hashable, int] | None = None


class StepVotes(Protocol):
    """The workers' agreement after each run under collective ops (`StepAgreement`)."""

    def agree(self, received: int | None, silent_steps: int = 0) -> tuple[int | None, int]:
        """Every worker calls this once per run with the signal it received and the silent
        steps it allows; returns the lowest signal received (or `None`), and the fewest
        steps allowed (at most `MAX_COUNTED_SILENT_STEPS`)."""


def fusion_for(owner: str, cap: int | None, hooks: PlanningHooks) -> Fusion | None:
    """An eager session's `Fusion` (`EagerMode.fusion`), or `None` where no run skips the hooks.

    Args:
      owner: The session's class name, for messages.
      cap: The checked `steps_per_execution` (`Mode.check_steps_per_execution`).
      hooks: The session's hooks (`HookDispatcher`), whose `FusionPolicy` is read once.
    """
    blocking = tuple(type(hook).__name__ for hook in hooks.every_step)
    saved = frozenset(map(id, hooks.stateful.values()))
    policy = FusionPolicy(
        blocking, hooks.next_actions, hooks.planning, saved, frozenset(map(id, hooks.state_writers))
    )
    fusion = Fusion(owner, cap, policy)
    return fusion if fusion.skips_hooks() else None


class Fusion:
    """Decides and runs the silent and quiet steps of one monitored session: `owner`
    names it in log lines, `cap` is the most steps per call (`None`: no cap), `policy`
    the hooks' `FusionPolicy`."""

    def __init__(self, owner: str, cap: int | None, policy: FusionPolicy) -> None:
        self._owner = owner
        self._cap = UNCAPPED if cap is None else cap
        # With one hook that plans ahead, a step with the hooks calls it: nothing to choose.
        self._due = DueHooks(policy) if len(policy.planning) > 1 else None
        if self._due is not None:
            policy = policy._replace(next_actions=self._due.next_actions)
        self._policy = policy
        self._seconds = seconds_per_call()
        self._enabled = self._cap > 1
        self._explained = False  # Whether a call that cannot be fused was explained.
        self._quiet = QuietSteps(policy)
        self._runner: LoopRunner | None = None  # Of the current session.
        self._read_step = self._known  # The runner's `known_step` once attached.
        self._quiet_fetches = _QuietFetches(None)
        # Under collective ops: the silent steps the workers agreed on (module docstring).
        self._peers = False
        self._agreed = 0
        self._agreed_keep: tuple[str, ...] = ()
        self._paced_from: tuple[int, float] | None = None  # (global step, time) last asked.
        self._loop_pace: float | None = None  # Seconds per step of the last fused loop.
        if policy.blocking:
            reason = "must act on every step (no next_action() method)"
            self._stop_fusing(logging.INFO, f"{', '.join(policy.blocking)} {reason}")

    def skips_hooks(self) -> bool:
        """Whether some run may skip the hooks (fused or quiet steps)."""
        return self._enabled or self._quiet.enabled

    def attach(self, backend: RunsLoops) -> None:
        """The backend of the session just created, which runs the loops."""
        self._runner = backend.loop_runner()
        assert self._runner is not None, "attached to a backend that runs no loops"
        self._read_step, self._quiet_fetches = self._runner.known_step, _QuietFetches(self._runner)
        self._agreed, self._paced_from, self._loop_pace = 0, None, None
        if self._due is not None:
            self._due.refresh()

    def prepare(self, fetches: Fetches, feed_dict: FeedDict | None, selection: Selection) -> Call:
        """Runs the silent steps of a `run()`, then says how to run the rest (`Call`).

        Only a training call with all the hooks skips them.
        """
        silent, kept, coming, quiet_plan = 0, None, None, False
        if selection.hooks is None and selection.training:
            if self._enabled:
                silent, kept, coming = self._run_silent_steps(fetches, feed_dict)
            quiet = self._quiet
            if coming is None and not silent and quiet.enabled:  # Maybe a quiet step.
                if not isinstance(fetches, StepSource) or _may_run_quiet(fetches):
                    if quiet.next_is_quiet(self._read_step):
                        return Call(self._quiet_fetches(fetches), quiet=True)
                    quiet_plan = True  # This step follows the quiet steps' plan.
        bound = fetches.bind(silent) if isinstance(fetches, StepSource) else fetches
        if bound is None:  # The silent steps took a step source's last input.
            self._quiet.report_later(silent)
            return Call(None)
        # Quiet steps before this run count as silent ones for its hooks.
        quiet_steps, followed = self._quiet.take()
        runs = silent + 1
        if quiet_plan:
            coming, runs = followed, quiet_steps + 1
        silent += quiet_steps
        if self._due is None:
            return Call(bound, silent=silent, kept=kept)
        due, told = self._due.call(coming, runs, selection.hooks, silent, selection.training)
        return Call(bound, silent=silent, kept=kept, due=due, told=told)

    def agree_with_workers(self) -> None:
        """Fuses only the silent steps the workers agreed on (`agreed`), never by the clock."""
        self._peers = True

    def next_silent_steps(self) -> int:
        """Under collective ops, after each run: the silent steps this worker allows next,
        by its hooks, and by its time budget at the pace of the last fused loop (or of
        the runs since it was last asked; none before a pace is known)."""
        self._agreed = 0
        global_step = self._known()
        if not self._enabled or global_step is None:
            return 0
        now = time.time()
        paced_from, self._paced_from = self._paced_from, (global_step, now)
        seconds_per_step = self._loop_pace
        if seconds_per_step is None:
            if paced_from is None or global_step <= paced_from[0]:
                return 0
            seconds_per_step = (now - paced_from[1]) / (global_step - paced_from[0])
        coming = plan(self._policy, global_step, self._cap)
        budget = (
            self._seconds if coming.at_time is None else min(self._seconds, coming.at_time - now)
        )
        self._agreed_keep = coming.keep
        return max(0, min(coming.steps - 1, int(budget / max(seconds_per_step, 1e-9))))

    def agreed(self, silent_steps: int) -> None:
        """The silent steps every worker agreed on for the next run."""
        self._agreed = silent_steps

    def _known(self) -> int | None:
        """The global step after the last run, if the host knows it."""
        return None if self._runner is None else self._runner.known_step()

    def _run_silent_steps(
        self, fetches: Fetches, feed_dict: FeedDict | None
    ) -> tuple[int, Kept, Plan | None]:
        """Runs the silent steps before the coming run, if any: how many ran, what was
        kept, and the plan they followed (`None`: the hooks were not asked)."""
        runner = self._runner
        if runner is None:
            return 0, {}, None
        if self._peers or runner.schedules_steps():
            counted = self._agreed if self._peers else self.next_silent_steps()
            self._agreed = 0
            return *self._run_counted_steps(fetches, feed_dict, runner, counted), None
        step, limit = self._fusable(fetches, feed_dict, runner)
        if step is None:
            return 0, {}, None
        global_step = self._known()
        if global_step is None:
            reason = "the step does not advance the global step by exactly one (or there is none)"
            self._stop_fusing(logging.INFO, reason)
            return 0, {}, None
        cap = self._cap
        ends = isinstance(fetches, StepSource) and fetches.ends_silently
        if limit is not None:  # A step source's steps, its last input too if it ends silently.
            cap = min(cap, limit + 1 + ends)
        coming = plan(self._policy, global_step, cap)
        silent, kept = 0, _NOTHING
        if not coming.acts_now():
            silent = coming.steps - 1
            if coming.keep and limit is not None:
                silent = min(silent, limit)  # Kept outputs go to the hooks of a step after them.
            silent, kept = self._run_loop(runner, step, coming.keep, silent, coming.at_time)
        if limit is not None and silent == limit and not ends:
            return silent, kept, None  # A step source's last input goes to every hook.
        return silent, kept, coming

    def _run_counted_steps(
        self, fetches: Fetches, feed_dict: FeedDict | None, runner: LoopRunner, counted: int
    ) -> tuple[int, Kept]:
        """Exactly `counted` silent steps, no clock: agreed by the workers, or one closure."""
        counted = min(counted, MAX_COUNTED_SILENT_STEPS)
        if counted < 1:
            return 0, {}
        # Whether the call fuses is the same on every worker (the same program).
        step, limit = self._fusable(fetches, feed_dict, runner)
        if step is None:
            return 0, {}
        silent = counted if limit is None else min(counted, limit)
        started = time.perf_counter()
        done, kept = self._run_loop(runner, step, self._agreed_keep, silent, None, timed=False)
        if done and not runner.schedules_steps():  # A closure is scheduled, not yet run.
            self._loop_pace = (time.perf_counter() - started) / done
        return done, kept

    def _run_loop(
        self,
        runner: LoopRunner,
        step: tf.types.experimental.PolymorphicFunction,
        keep: tuple[str, ...],
        silent: int,
        at_time: float | None,
        timed: bool = True,
    ) -> tuple[int, Kept]:
        """Up to `silent` steps in the fused loop, before `at_time` if given, and within the
        time budget if `timed` (the workers' agreed steps and closures are not)."""
        loop = loop_for(step, keep, runner)  # Traced before the clock starts.
        deadline = time.time() + self._seconds if timed else math.inf
        if at_time is not None:
            deadline = min(deadline, at_time)
        done, kept = runner.run_loop(loop, silent, deadline, bool(keep))
        if runner.known_step() is None:
            self._stop_fusing(logging.WARNING, "the global step did not advance once per step")
        return done, kept

    def _fusable(
        self, fetches: Fetches, feed_dict: FeedDict | None, runner: LoopRunner
    ) -> tuple[tf.types.experimental.PolymorphicFunction | None, int | None]:
        """The `tf.function` to fuse and the cap on its silent steps; says once why not fused."""
        limit = fetches.silent_limit if isinstance(fetches, StepSource) else None
        step = None if feed_dict else fused_function(fetches)
        if step is None and not self._explained:
            if limit is not None or runner.calls_a_step(fetches):
                self._explained = True
                why_not = why_not_fused(fetches, feed_dict, runner.schedules_steps())
                message = "%s: steps_per_execution runs this step one step per call: %s."
                logger.warning(message, self._owner, why_not)
        return step, limit

    def _stop_fusing(self, level: int, reason: str) -> None:
        if self._enabled:
            logger.log(level, "%s: steps_per_execution runs single steps: %s.", self._owner, reason)
        self._enabled = False


def _quiet_step(fetches: Fetches, runner: LoopRunner | None) -> Fetches:
    """What a quiet step runs: the `tf.function` a fused loop would run (that a wrapper names
    in its `monsession_fused_step`), but a step that schedules closures as it is."""
    step = fused_function(fetches)
    if step is None or step is fetches or (runner is not None and runner.schedules_steps()):
        return fetches
    return step


class _QuietFetches:
    """What a quiet step runs for a run's fetches (`_quiet_step`), kept for the same fetches."""

    def __init__(self, runner: LoopRunner | None) -> None:
        self._runner = runner
        self._for: tuple[Fetches, Fetches] = (None, None)

    def __call__(self, fetches: Fetches) -> Fetches:
        if isinstance(fetches, StepSource):  # Takes its input now: nothing to keep.
            return _quiet_step(fetches.bind(0), self._runner)
        if fetches is not self._for[0]:
            self._for = (fetches, _quiet_step(fetches, self._runner))
        return self._for[1]


def _may_run_quiet(fetches: StepSource) -> bool:
    """Whether a step source's run may skip the hooks: not when it takes its last input (an
    epoch's last batch), unless the source `ends_silently` (no hook acts at the epoch's end)."""
    return fetches.silent_limit >= 1 or fetches.ends_silently
