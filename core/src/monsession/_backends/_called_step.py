"""Eager mode: a run given a step's outputs instead of the step (`sess.run(train_step())`).

In eager mode `MonitoredSession.run(fetches)` calls the step. Fetches that
hold only tensors, with no callable and no `tf.Variable`, run nothing:
they are values computed before the run, and the run returns them as they
are. That is almost always `sess.run(train_step())` for
`sess.run(train_step)`: the model trains outside the session, and the step
service counts no step. It is certainly a mistake, so an error, when:

* the session owns the global step (the program made none): it advances only
  with the steps the session calls, so it would never move, and no
  step-based hook (`StopAtStepHook`, savers) would ever act; or
* the program's global step moved since the last run ended: a step ran
  outside the session, and every hook would see the wrong step.

Otherwise (no global step, or one that did not move: a program may fetch a
tensor it computed itself to drive its hooks) a WARNING says the same, once
per session. Runs that call a step or read a variable are never checked, so
a valid step costs nothing here; the check itself runs for the first such
run of a session only.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import tensorflow as tf

from monsession._api._types import Fetches

logger = logging.getLogger("monsession")

FIX = "pass the step itself: sess.run(train_step), not sess.run(train_step())"


def graph_fetch_error(fetches: Fetches) -> TypeError | None:
    """The error for fetches holding a `tf.Operation` or tensor of a graph, else `None`.

    An eager session (created outside ``with graph.as_default():``) cannot
    run what was built in a graph; the fix is where the session is created.
    """
    for leaf in tf.nest.flatten(fetches):
        if isinstance(leaf, tf.Operation):
            kind = "tf.Operation"
        elif isinstance(leaf, tf.Variable) and tf.is_symbolic_tensor(leaf.handle):
            kind = "variable"
        elif isinstance(leaf, tf.Tensor) and tf.is_symbolic_tensor(leaf):
            kind = "tensor"
        else:
            continue
        return TypeError(
            f"MonitoredSession.run() was given the {kind} {leaf.name!r} of a tf.Graph, but "
            "the session was created in eager mode, outside `with graph.as_default():`, so "
            "it runs eager steps and cannot run graph ops. Create the session inside the "
            "graph's block: `with graph.as_default(): with MonitoredSession(...) as sess: "
            "sess.run(train_op)`."
        )
    return None


def only_values(fetches: Fetches) -> bool:
    """Whether `fetches` (a run calling no step) holds tensors and nothing to run or read."""
    leaves = tf.nest.flatten(fetches)
    return bool(leaves) and all(isinstance(leaf, tf.Tensor) for leaf in leaves)


def _described(fetches: Fetches) -> str:
    if isinstance(fetches, tf.Tensor):
        return "a tensor"
    count = len(tf.nest.flatten(fetches))
    return f"a {type(fetches).__name__} of {count} tensor{'s' if count != 1 else ''}"


def check_value_run(
    fetches: Fetches, owned: bool, counted_step: int | None, read_step: Callable[[], int] | None
) -> None:
    """Raises or warns for a run whose fetches are only values (see the module docstring).

    Args:
      fetches: The run's fetches: only tensors (`only_values`).
      owned: Whether the session owns the global step.
      counted_step: The step service's global step before this run, or `None`.
      read_step: Reads the global step variable (a device read), or `None`
        when it must not be read now.

    Raises:
      TypeError: When a run of these fetches can only be a mistake (also
        when they come from a graph: `graph_fetch_error`).
    """
    graph_error = graph_fetch_error(fetches)
    if graph_error is not None:
        raise graph_error
    given = (
        f"MonitoredSession.run() was given {_described(fetches)}, values already computed, "
        "instead of a step to run: in eager mode run() calls the step"
    )
    if owned:
        raise TypeError(
            f"{given}; {FIX}. This run calls nothing, and the global step, which the session "
            f"advances for each step it calls, would stay at {counted_step}: StopAtStepHook and "
            "every step-based hook would never act."
        )
    if counted_step is not None and read_step is not None:
        actual = read_step()
        if actual != counted_step:
            raise TypeError(
                f"{given}; {FIX}. The global step moved from {counted_step} to {actual} outside "
                "the session, so a step ran outside it: its hooks would see the wrong steps."
            )
    logger.warning(
        "%s, so this run calls nothing and advances no step. If you wrote "
        "sess.run(train_step()), %s. (Logged once per session.)",
        given,
        FIX,
    )
