"""The one interface between the session layers and an execution backend.

A backend runs one merged step (the caller's fetches and the hooks'), and
knows the global step of every run on the host: that is the *step service*
hooks read through `SessionRunContext.global_step` and
`SessionRunContext.global_step_after()`. The graph backend
(`_graph_backend`) wraps a `tf.compat.v1.Session`, the eager backend
(`_eager_backend`) an `EagerSession`; `_session_layers` speaks only to this
`Backend` protocol and never asks which mode it is in.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol

import tensorflow as tf

from monsession._api._types import FeedKey, FeedValue, Fetches, Results

FeedDict = Mapping[tf.Tensor | str, FeedValue]
"""A run's feeds: tensors (or their names) to values in graph mode, the step's keywords in eager."""

HookResults = dict[object, Results]
"""What each hook that asked for something fetches, or got, keyed by the hook (any hook object)."""


class StepSource:
    """Fetches that take their input just before they run (an `Epochs` loop's steps).

    The hooked session calls `bind(silent)` after the silent steps of a run
    (see `_fusion`), before the hooks' `before_run` (or, for a quiet step,
    without the hooks): it takes the input and returns the fetches to run.
    Silent steps pull their input inside `fused`, a `tf.function` without
    arguments (`None` when the step cannot be fused), at most `silent_limit`
    of them; a quiet step only while `silent_limit` is at least 1 (the step
    after it may still take the last input the hooks must see), unless
    `ends_silently`: then the silent (or quiet) steps may take the last
    input too, `silent_limit + 1` of them, and `bind` returns `None` (the
    run has no step with the hooks). A step source is not run again after a
    preemption error: its input was taken before the restore.
    """

    fused: tf.types.experimental.PolymorphicFunction | None = None
    silent_limit = 0
    ends_silently = False

    def bind(self, silent: int) -> Fetches | None:
        """The fetches to run now, `silent` steps after the ones the last bind knew of.

        `None` when the silent steps took the last input (`ends_silently`).
        """
        raise NotImplementedError


class Backend(Protocol):
    """Runs steps and knows the global step, in one execution mode."""

    def start_run(self) -> None:
        """Called before the hooks' `before_run` of every run."""

    def forget_step(self) -> None:
        """The current run is not a training step: it may not add one to the global step.

        Called after `start_run`: the step before the run stays known, but the
        step after it is read from the device when a hook asks, and the next
        run starts from the value read rather than from a count.
        """

    def global_step_before(self) -> int | None:
        """The global step before the current run, or `None` (see `SessionRunContext`)."""

    def global_step_after(self, reaching: Callable[[int], bool] | None = None) -> int | None:
        """The global step after the last run, or `None` (see `SessionRunContext`)."""

    def run(
        self,
        fetches: Fetches,
        hook_fetches: HookResults,
        feed_dict: FeedDict | None,
        options: tf.compat.v1.RunOptions | None,
        run_metadata: tf.compat.v1.RunMetadata | None,
        feed_owners: Mapping[FeedKey, str],
    ) -> tuple[Results, HookResults]:
        """Runs one step with the hooks' fetches.

        Args:
          fetches: The caller's fetches (graph) or step (eager).
          hook_fetches: Each hook that asked for something, to its fetches.
          feed_dict: The merged feeds, or `None`.
          options: Merged `RunOptions`, or `None` when nobody asked for any.
          run_metadata: A `RunMetadata` to fill, or `None`.
          feed_owners: The hook that fed each key, for error messages.

        Returns:
          `(caller_results, {hook: hook_results})`.
        """

    def loop_runner(self) -> LoopRunner | None:
        """What runs this backend's fused loops (see `_fusion`); `None`: it runs single steps."""


class LoopRunner(Protocol):
    """The backend side of fused steps (eager mode): what `_fusion` runs its loops with."""

    def known_step(self) -> int | None:
        """The global step after the last run, if the host counts it (no device read)."""

    def schedules_steps(self) -> bool:
        """Whether steps run later, as closures on workers (a `ClusterCoordinator`).

        A loop then runs exactly the steps asked for, counted when it is scheduled.
        """

    def calls_a_step(self, fetches: Fetches) -> bool:
        """Whether running `fetches` calls a step (a callable, not only values)."""

    def loop_variables(self) -> tuple[tf.Variable, tf.Variable | None]:
        """The global step a loop reads after its steps, and the one each fused
        step must advance (the session owns it, and no closure advances it), if any."""

    def run_loop(
        self,
        loop: tf.types.experimental.PolymorphicFunction,
        max_steps: int,
        deadline: float,
        keeps: bool,
    ) -> tuple[int, Mapping[str, tf.Tensor]]:
        """Runs `loop(max_steps, deadline)` and advances the host step by the steps it ran.

        `keeps`: whether the loop keeps outputs (a scheduled loop's are then waited for).

        Returns:
          How many steps ran (or were scheduled), and the kept outputs, stacked.
        """
