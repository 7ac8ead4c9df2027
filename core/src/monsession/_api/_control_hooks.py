"""Control hooks shipped with core: stop, feed, final ops, staggered start."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from monsession import tf_logging
from monsession._api._hook_api import NextAction, SessionRunHook
from monsession._api._run_context import (
    SessionRunArgs,
    SessionRunContext,
    SessionRunValues,
    as_run_context,
)
from monsession._api._types import Fetches, SessionLike, Unchecked, check_interval

if TYPE_CHECKING:
    import tensorflow as tf


def _check_non_negative(hook: str, name: str, value: Unchecked) -> None:
    if value is not None:
        check_interval(hook, name, value, "steps", allow_zero=True)


def _require_global_step(hook: str) -> None:
    from monsession._api._global_step import require_global_step

    require_global_step(hook)


def _read_global_step(session: SessionLike) -> int:
    from monsession._api._global_step import read_global_step

    return read_global_step(session)


class StopAtStepHook(SessionRunHook):
    """Requests a stop after a number of steps, or once a last step is reached.

    Args:
      num_steps: Steps to run after the session is created.
      last_step: The global step after which to stop.

    Raises:
      ValueError: If both or neither are given, or the given one is negative.
      TypeError: If the given one is not an int.
    """

    def __init__(self, num_steps: int | None = None, last_step: int | None = None) -> None:
        got = f"got num_steps={num_steps!r} and last_step={last_step!r}"
        if num_steps is None and last_step is None:
            raise ValueError(
                f"StopAtStepHook: One of num_steps or last_step must be specified; {got}."
            )
        if num_steps is not None and last_step is not None:
            raise ValueError(
                f"StopAtStepHook: Only one of num_steps or last_step can be specified; {got}."
            )
        _check_non_negative("StopAtStepHook", "num_steps", num_steps)
        _check_non_negative("StopAtStepHook", "last_step", last_step)
        self._num_steps = num_steps
        self._last_step = last_step

    @property
    def last_step(self) -> int | None:
        """The global step this hook stops at (known once the session exists)."""
        return self._last_step

    def begin(self) -> None:
        _require_global_step("StopAtStepHook")

    def after_create_session(
        self, session: SessionLike, coord: tf.train.Coordinator | None
    ) -> None:
        if self._last_step is None:
            assert self._num_steps is not None
            self._last_step = _read_global_step(session) + self._num_steps

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        run_context = as_run_context(run_context)
        if run_context.global_step_after(self._reached) is not None:
            run_context.request_stop()

    def next_action(self, global_step: int) -> NextAction:
        assert self._last_step is not None, "after_create_session() sets it"
        return NextAction(steps=self._last_step - global_step)

    def _reached(self, step: int) -> bool:
        assert self._last_step is not None, "after_create_session() sets it"
        return step >= self._last_step


class FeedFnHook(SessionRunHook):
    """Feeds `feed_fn()` into every step.

    Args:
      feed_fn: A function of no arguments returning the `feed_dict` for a step
        (tensors to values in graph mode, argument names to values in eager).

    Raises:
      TypeError: If `feed_fn` is not callable.
    """

    def __init__(self, feed_fn: Callable[[], Mapping[Any, Any] | None]) -> None:
        if not callable(feed_fn):
            raise TypeError(f"FeedFnHook: feed_fn must be callable, got {feed_fn!r}.")
        self.feed_fn = feed_fn

    def before_run(self, run_context: SessionRunContext) -> SessionRunArgs:
        return SessionRunArgs(fetches=None, feed_dict=self.feed_fn())


def _fetchable(leaf: Unchecked) -> bool:
    """Whether `session.run` can evaluate `leaf`, in either mode."""
    if isinstance(leaf, type):
        return False
    if isinstance(leaf, str) or callable(leaf):
        return True  # A tensor name (graph mode); a function of no arguments (eager).
    # Tensors, operations, variables, sparse and ragged tensors.
    return hasattr(leaf, "dtype") or hasattr(leaf, "graph")


def _check_final_ops(final_ops: Unchecked) -> None:
    if final_ops is None:
        return
    import tensorflow as tf

    for leaf in tf.nest.flatten(final_ops, expand_composites=False):
        if not _fetchable(leaf):
            raise TypeError(
                "FinalOpsHook: final_ops must be a tensor, an operation, a variable (or in "
                "eager mode a function of no arguments), or a list or dict of them; it holds "
                f"{leaf!r} of type {type(leaf).__name__}."
            )


class FinalOpsHook(SessionRunHook):
    """Evaluates tensors once at the end of the session.

    Args:
      final_ops: A tensor, a list of tensors or a dict of names to tensors (in
        eager mode also variables or zero-argument callables).
      final_ops_feed_dict: The `feed_dict` for evaluating them: a mapping or `None`.

    Raises:
      TypeError: If `final_ops` holds something that cannot be evaluated (a
        number, `None` in a list, a class...), or `final_ops_feed_dict` is
        not a mapping.
    """

    def __init__(
        self, final_ops: Fetches, final_ops_feed_dict: Mapping[Any, Any] | None = None
    ) -> None:
        _check_final_ops(final_ops)
        if final_ops_feed_dict is not None and not isinstance(final_ops_feed_dict, Mapping):
            raise TypeError(
                "FinalOpsHook: final_ops_feed_dict must be a dict (tensors, or in eager mode "
                "argument names, to values) or None, got "
                f"{final_ops_feed_dict!r} of type {type(final_ops_feed_dict).__name__}."
            )
        self._final_ops = final_ops
        self._final_ops_feed_dict = final_ops_feed_dict
        self._final_ops_values: Any = None

    @property
    def final_ops_values(self) -> Any:
        """The values of `final_ops`, once `end()` ran."""
        return self._final_ops_values

    def end(self, session: SessionLike) -> None:
        if self._final_ops is None:
            return
        from tensorflow import errors

        try:
            self._final_ops_values = session.run(
                self._final_ops, feed_dict=self._final_ops_feed_dict
            )
        except (errors.OutOfRangeError, StopIteration):
            tf_logging.warning(
                "FinalOpsHook: evaluating final_ops raised OutOfRangeError or StopIteration: "
                "the final ops have a dependency back to some input source (for example a "
                "metric's update op instead of its value op). They should only read variables."
            )
            raise


class GlobalStepWaiterHook(SessionRunHook):
    """Holds the first step until the global step reaches `wait_until_step`.

    Used to start workers gradually, e.g. ``wait_until_step=int(K * log(task_id + 1))``.

    Args:
      wait_until_step: The global step to wait for; 0 starts at once.

    Raises:
      TypeError: If `wait_until_step` is not an int.
      ValueError: If `wait_until_step` is negative.
    """

    def __init__(self, wait_until_step: int) -> None:
        check_interval(
            "GlobalStepWaiterHook",
            "wait_until_step",
            wait_until_step,
            "steps",
            allow_zero=True,
            expected="a non-negative int global step (0: start at once)",
        )
        self._wait_until_step = wait_until_step

    def begin(self) -> None:
        self._worker_is_started = False
        _require_global_step("GlobalStepWaiterHook")

    def before_run(self, run_context: SessionRunContext) -> None:
        run_context = as_run_context(run_context)
        if self._worker_is_started:
            return None
        if self._wait_until_step <= 0:
            self._worker_is_started = True
            return None
        if (run_context.global_step or 0) >= self._wait_until_step:
            self._worker_is_started = True
            return None
        tf_logging.info(
            "Waiting for global step %d before starting training.", self._wait_until_step
        )
        last_logged_step = 0
        while True:
            current_step = _read_global_step(run_context.session)
            if current_step >= self._wait_until_step:
                self._worker_is_started = True
                return None
            if current_step - last_logged_step > 1000:
                tf_logging.info(
                    "Waiting for global step %d before starting training. Current step is %d.",
                    self._wait_until_step,
                    current_step,
                )
                last_logged_step = current_step
            time.sleep(0.5)

    def next_action(self, global_step: int) -> NextAction:
        if self._worker_is_started:
            return NextAction()
        return NextAction(steps=1)
