"""The steps the eager backend does not call one by one: fused loops and closures.

`EagerLoops` is the backend's `LoopRunner`: the host count adopts the global step a loop returns
(drifting if a step does not advance it by exactly one). Under a `ClusterCoordinator` the loop
is one closure, scheduled and counted at once; a closure run again on another worker may advance
a global step it owns twice, which `ClosureSteps` notices at each join. A global step the
session owns is advanced on the coordinator, once per run.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping
from typing import Any

import tensorflow as tf

from monsession._api._types import Fetches, Results
from monsession._backends._backend import StepCounter
from monsession._backends._eager import EagerSession, to_numpy
from monsession._backends._eager_calls import CONTAINERS, advancing, is_step_callable

logger = logging.getLogger("monsession")


def _calls_a_step(fetches: Fetches) -> bool:
    """Whether running `fetches` calls at least one callable."""
    if isinstance(fetches, CONTAINERS):
        return any(is_step_callable(leaf) for leaf in tf.nest.flatten(fetches))
    return is_step_callable(fetches)


class EagerLoops:
    """Runs fused loops in an `EagerSession` and advances the host step (`LoopRunner`).

    Args:
      sess: The session.
      counter: The backend's `StepCounter`.
      variable: The global step, or `None` (no step is then known: nothing fuses).
    """

    def __init__(
        self, sess: EagerSession, counter: StepCounter, variable: tf.Variable | None
    ) -> None:
        self._sess = sess
        self._counter = counter
        self._variable = variable
        self.last_fetches: Fetches = None  # What `calls_a_step` remembers (the backend reads it).
        self.last_calls = False

    def known_step(self) -> int | None:
        return None if self._counter.drifted else self._counter.after

    def schedules_steps(self) -> bool:
        return self._sess.coordinator is not None

    def calls_a_step(self, fetches: Fetches) -> bool:
        """Whether running `fetches` calls a step (remembered for the last step object)."""
        if fetches is self.last_fetches:
            return self.last_calls
        calls = _calls_a_step(fetches)
        if not isinstance(fetches, CONTAINERS):  # A container may change between runs.
            self.last_fetches, self.last_calls = fetches, calls
        return calls

    def loop_step(
        self, step: tf.types.experimental.PolymorphicFunction
    ) -> tuple[tf.types.experimental.PolymorphicFunction, tf.Variable]:
        assert self._variable is not None
        # A scheduled closure never advances an owned global step: `_schedule` does.
        owned = None if self.schedules_steps() else self._sess.owned_global_step
        return (step if owned is None else advancing(step, owned)), self._variable

    def run_loop(
        self,
        loop: tf.types.experimental.PolymorphicFunction,
        max_steps: int,
        deadline: float,
        keeps: bool,
    ) -> tuple[int, Mapping[str, tf.Tensor]]:
        """Runs the fused loop, and advances the host step (see `LoopRunner`); on an error (the end
        of the data ends the loop after the last full step), reads it back first."""
        coordinator = self._sess.coordinator
        if coordinator is not None:  # Closures in flight.
            return self._schedule(coordinator, loop, max_steps, keeps)
        counter = self._counter
        try:
            counts, kept = self._sess.traces.call(
                loop, tf.constant(max_steps, tf.int64), tf.constant(deadline, tf.float64)
            )
            done, after = (int(value) for value in to_numpy(counts))
        except Exception:
            counter.refresh()
            raise
        assert counter.after is not None
        if after != counter.after + done:
            counter.drift(
                "The global step is %d after %d fused steps, but the session counted %d: "
                "the step does not advance the global step by exactly one. Hooks now read it "
                "from the device after every run (slower).",
                after,
                done,
                counter.after + done,
            )
        counter.adopt(after)
        return done, kept

    def _schedule(
        self,
        coordinator: tf.distribute.experimental.coordinator.ClusterCoordinator,
        loop: tf.types.experimental.PolymorphicFunction,
        steps: int,
        keeps: bool,
    ) -> tuple[int, Mapping[str, tf.Tensor]]:
        """Schedules `steps` silent steps as one closure, counted now; an owned global step is
        advanced here, never in the closure (it may run twice). Kept entries wait for it."""
        remote = coordinator.schedule(
            loop, args=(tf.constant(steps, tf.int64), tf.constant(math.inf, tf.float64))
        )
        owned = self._sess.owned_global_step
        if owned is not None:
            owned.assign_add(steps)
        self._counter.advance(steps)
        if not keeps:
            return steps, {}
        self._sess.wait_for_closures()
        kept: Mapping[str, Results] = remote.fetch()[1]
        return steps, {name: tf.convert_to_tensor(value) for name, value in kept.items()}


class ClosureSteps:
    """After each join of the coordinator: the global step against the session's count.

    Args:
      counter: The session's step counter.
      read: Reads the global step variable (the coordinator is joined).
      step_name: Names the step of the last run that called one.
    """

    def __init__(
        self, counter: StepCounter, read: Callable[[], int], step_name: Callable[[], str]
    ) -> None:
        self._counter = counter
        self._read = read
        self._step_name = step_name
        self.warned = False

    def after_join(self) -> None:
        """Compares once every closure scheduled so far has run; warns once if ahead."""
        counted = self._counter.after
        if counted is None or self._counter.stale:
            return  # Nothing counted to compare with (a run that was not a step).
        value = self._read()
        if value <= counted:
            return
        if not self.warned:
            self.warned = True
            logger.warning(
                "The global step is %d once the closures scheduled so far have run, but the "
                "session ran %d steps: a closure of the step %s advanced it more than once. "
                "Under ParameterServerStrategy the ClusterCoordinator runs a closure again on "
                "another worker when its worker fails, so a global step advanced inside the "
                "scheduled function counts such a step at least once, not exactly once (as "
                "TensorFlow documents). Hooks now see the variable's value; the checkpoint "
                "saved now holds a step ahead of its name. For steps counted exactly once, "
                "let the session own the global step: create none, and do not advance it in "
                "the closure.",
                value,
                counted,
                self._step_name(),
            )
        self._counter.adopt(value)


def step_names(
    fetches: Fetches, is_step: Callable[[Any], bool], describe: Callable[[Any], str]
) -> str:
    """The names of the steps `fetches` calls, quoted, for a message."""
    names = [repr(describe(leaf)) for leaf in tf.nest.flatten(fetches) if is_step(leaf)]
    return ", ".join(names) or "(unknown)"
