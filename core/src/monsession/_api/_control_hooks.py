"""Core's timed and control hooks: `SecondOrStepTimer`, `TimedHook`; stop, feed, final ops, wait."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeGuard

from monsession import tf_logging
from monsession._api._hook_api import NextAction, SessionRunHook
from monsession._api._run_context import (
    SessionRunArgs,
    SessionRunContext,
    SessionRunValues,
    as_run_context,
)
from monsession._api._types import (
    Fetches,
    SessionLike,
    Unchecked,
    check_interval,
    check_schedule,
    read_global_step,
    require_global_step,
)

if TYPE_CHECKING:
    import tensorflow as tf


class SecondOrStepTimer:
    """Triggers at most once every `every_secs` seconds or once every `every_steps` steps.

    Exactly one is given, a number >= 0 (0: every new step, as TensorFlow's),
    else `ValueError` or `TypeError`. Its `state_dict()` loads back in another
    process: a step schedule continues exactly; the time between does not count.
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
        """Whether to trigger at `step`: first call, or the interval passed (never twice a step)."""
        last_step = self._last_triggered_step
        if last_step is None:
            return True
        if last_step == step:
            return False
        if self._every_secs is not None:
            if self._last_triggered_time is None:  # Loaded without a time.
                return True
            return time.time() >= self._last_triggered_time + self._every_secs
        assert self._every_steps is not None
        return step >= last_step + self._every_steps

    def next_action(self, step: int) -> NextAction:
        """When the timer next triggers, given the step tested at the coming run."""
        last_step, last_time = self._last_triggered_step, self._last_triggered_time
        if last_step is None:
            return NextAction(steps=1)
        if self._every_secs is not None:
            if last_time is None:
                return NextAction(steps=1)
            return NextAction(at_time=last_time + self._every_secs)
        assert self._every_steps is not None
        return NextAction(steps=max(1, last_step + self._every_steps - step + 1))

    def update_last_triggered_step(self, step: int) -> tuple[float | None, int | None]:
        """Records a trigger at `step`; returns `(elapsed_secs, elapsed_steps)` since the last.

        `(None, None)` for the first one (and after loading a state without a time).
        """
        now = time.time()
        elapsed = self._elapsed(step, now)
        self._last_triggered_time = now
        self._last_triggered_step = step
        return elapsed

    def elapsed_since_trigger(self, step: int) -> tuple[float | None, int | None]:
        """`(elapsed_secs, elapsed_steps)` since the last trigger, for an action off schedule."""
        return self._elapsed(step, time.time())

    def _elapsed(self, step: int, now: float) -> tuple[float | None, int | None]:
        if self._last_triggered_time is None:
            return (None, None)
        assert self._last_triggered_step is not None
        return (now - self._last_triggered_time, step - self._last_triggered_step)

    def last_triggered_step(self) -> int | None:
        """The step of the last trigger, or `None`."""
        return self._last_triggered_step

    def state_dict(self) -> dict[str, Any]:
        """``{"last_triggered_step": int | None, "secs_since_trigger": float | None}``.

        Seconds since the trigger, not a clock time: the time until the load does not count.
        """
        since = None
        if self._last_triggered_time is not None:
            since = max(0.0, time.time() - self._last_triggered_time)
        return {"last_triggered_step": self._last_triggered_step, "secs_since_trigger": since}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Puts back a `state_dict()`, timed `secs_since_trigger` before now; else `ValueError`."""
        step, since = _checked_state(state)
        self._last_triggered_step = step
        self._last_triggered_time = None if since is None else time.time() - since


def _checked_state(state: Mapping[str, Unchecked]) -> tuple[int | None, float | None]:
    """The last trigger's step and seconds since it, from a `state_dict()`; else `ValueError`."""
    if not isinstance(state, Mapping):
        raise ValueError(f"SecondOrStepTimer state must be a mapping, got {state!r}.")
    step = state.get("last_triggered_step")
    since = state.get("secs_since_trigger")
    if step is not None and not _is_int(step):
        raise ValueError(f"SecondOrStepTimer: last_triggered_step must be an int, got {step!r}.")
    if since is not None and not _is_seconds(since):
        raise ValueError(
            f"SecondOrStepTimer: secs_since_trigger must be a finite number >= 0, got {since!r}."
        )
    if step is None and since is not None:
        raise ValueError(
            "SecondOrStepTimer: secs_since_trigger needs a last_triggered_step, got "
            f"{since!r} without one."
        )
    return step, None if since is None else float(since)


def _is_int(value: Unchecked) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_seconds(value: Unchecked) -> TypeGuard[int | float]:
    return (_is_int(value) or isinstance(value, float)) and math.isfinite(value) and value >= 0


class TimedHook(SessionRunHook):
    """A hook that acts every N global steps or every N seconds.

    Holds a `SecondOrStepTimer` as `self._timer`, and gives `next_action` (the run at which the
    global step after it triggers, so eager sessions fuse the steps before) and
    `state_dict`/`load_state_dict` (the timer's last trigger, so a restarted job triggers at the
    uninterrupted one's steps; see `monsession.StatefulHook`). A subclass tests the global step
    with `self._timer.should_trigger_for_step` (``run_context.global_step + 1`` in `before_run`,
    ``run_context.global_step_after(...)`` in `after_run`) and records each trigger with
    `self._timer.update_last_triggered_step`:

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

    A hook that counts something else overrides `next_action`, or uses
    `SecondOrStepTimer` directly. Arguments and errors are the timer's.
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


def _check_non_negative(hook: str, name: str, value: Unchecked) -> None:
    if value is not None:
        check_interval(hook, name, value, "steps", allow_zero=True)


class StopAtStepHook(SessionRunHook):
    """Requests a stop after `num_steps` steps, or once the global step reaches `last_step`.

    Exactly one is given, an int >= 0, else `ValueError` or `TypeError`.
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
        require_global_step("StopAtStepHook")

    def after_create_session(
        self, session: SessionLike, coord: tf.train.Coordinator | None
    ) -> None:
        if self._last_step is None:
            assert self._num_steps is not None
            self._last_step = read_global_step(session) + self._num_steps

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

    `feed_fn` takes no argument and returns a step's `feed_dict` (tensors, or
    in eager mode argument names, to values); `TypeError` if not callable.
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
        eager mode also variables or zero-argument callables); else `TypeError`.
      final_ops_feed_dict: The `feed_dict` for evaluating them: a mapping or `None`.
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

    Starts workers gradually, e.g. ``wait_until_step=int(K * log(task_id + 1))``;
    0 starts at once. `TypeError` if not an int, `ValueError` if negative.
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
        require_global_step("GlobalStepWaiterHook")

    def before_run(self, run_context: SessionRunContext) -> None:
        run_context = as_run_context(run_context)
        if self._worker_is_started:
            return None
        if self._wait_until_step <= 0 or (run_context.global_step or 0) >= self._wait_until_step:
            self._worker_is_started = True
            return None
        tf_logging.info(
            "Waiting for global step %d before starting training.", self._wait_until_step
        )
        last_logged_step = 0
        while True:
            current_step = read_global_step(run_context.session)
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
