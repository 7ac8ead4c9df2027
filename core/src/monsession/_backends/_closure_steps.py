"""Under a `ClusterCoordinator`: a global step advanced by the closures is at least once.

TensorFlow's `ClusterCoordinator` runs a closure again, on another worker,
when its worker fails while running it (TensorFlow documents at-least-once
execution). A closure that advances the global step itself
(`global_step.assign_add(1)` in the scheduled function) may then advance it
twice for one step, if the first run's update reached the parameter server.
The session cannot see that per run (closures are in flight); it sees it when
the coordinator is joined (`EagerSession.settle`: before each save, at the
end) and the variable then holds more than the steps it counted. It warns
once per session, naming the step, and takes the variable's value, which is
TensorFlow's global step, from then on. A global step the session owns is
advanced on the coordinator, once per run, and is never run again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import tensorflow as tf

from monsession._api._types import Fetches
from monsession._backends._step_counter import StepCounter

logger = logging.getLogger("monsession")


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
