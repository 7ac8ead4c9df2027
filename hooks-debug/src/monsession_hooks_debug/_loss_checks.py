"""How `NanTensorHook` checks the loss: every step, or kept on the device.

`EveryStepCheck` is TensorFlow's way: the loss is fetched with every run and
checked on the host. In eager mode a step run through `NanTensorHook.watch`
is checked on the device instead: `FlagCheck` (in `_finite_flag`) outside
`tf.distribute` strategies, else `KeptLossCheck`, which keeps each run's
loss tensor without reading it and reads N of them in one transfer. Only
eager steps return device tensors that can be kept unread, so that is the
one place where the hook's work differs by mode; the hook picks its check in
`begin()` and, for a watched step, at the first run.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any, Protocol

import numpy as np
import tensorflow as tf

import monsession
from monsession import NextAction, SessionRunArgs
from monsession.plugins import as_run_context

_HOOK = "NanTensorHook"
_ARGUMENT = "loss_tensor"
_FLOAT_SCALARS = frozenset({float, np.float16, np.float32, np.float64})
EVERY_STEP = NextAction(steps=1)  # What a check of every step plans: built once.


@dataclasses.dataclass(frozen=True)
class Divergence:
    """A bad loss found by a check.

    Args:
      loss: The first bad value.
      step: The global step after the run that produced it, when known.
      detail: More context for the message (starts with a space), or "".
    """

    loss: float
    step: int | None
    detail: str = ""


class WatchedStep:
    """What `NanTensorHook.watch` wraps.

    Args:
      step_fn: The step as the user gave it.
      updating: A `tf.function` calling the step and updating the device flag
        (`FiniteFlag.update`) in the same call, returning the step's outputs
        (what quiet and fused steps run too), or `None` when the step is not
        a `tf.function`.
    """

    def __init__(self, step_fn: Any, updating: Any) -> None:
        self.step_fn = step_fn
        self.updating = updating
        self._traces = monsession.plugins.Traces()

    def call(self, function: Any, args: Any, kwargs: Any) -> Any:
        """`function(*args, **kwargs)`, through its trace as the session calls steps.

        A `tf.function` call binds its arguments and looks its trace up on
        every call; `Traces` calls the trace of the arguments directly.
        """
        if kwargs:
            return function(*args, **kwargs)
        if args:
            return self._traces.call_with(function, args)
        return self._traces.call(function)


class LossCheck(Protocol):
    """One way of checking the loss; the hook calls it around every run."""

    def call(self, step: WatchedStep, args: Any, kwargs: Any) -> Any:
        """Runs a call of the watched step; returns the step's outputs."""

    def before_run(self, run_context: Any) -> SessionRunArgs | None:
        """What the hook asks of this run (`run_context` as the hook got it)."""

    def after_run(self, run_context: Any, results: Any) -> Divergence | None:
        """Checks after a run; `results` are the values of what was asked."""

    def flush(self) -> Divergence | None:
        """Checks what is still kept (new session, or the end)."""

    def next_action(self, global_step: int) -> NextAction:
        """When the check next needs the hook called (for fused steps)."""


def _check_value_type(what: str, dtype: Any, shape: Any) -> None:
    monsession.plugins.check_scalar(_HOOK, _ARGUMENT, what, dtype, shape)


def loss_entry(outputs: Any, name: str) -> Any:
    """The `name` entry of a step's outputs, one value per step (per-replica values merged)."""
    try:
        loss = outputs[name]
    except (KeyError, TypeError, IndexError):
        got = (
            f"entries {sorted(outputs)}"
            if isinstance(outputs, Mapping)
            else f"a {type(outputs).__name__}"
        )
        raise ValueError(
            f"{_HOOK} watches the step's {name!r} entry, but the step returned {got}."
        ) from None
    # A strategy.run output: one loss per step, as a fetch of it is.
    return monsession.plugins.replica_value(loss, f"{_HOOK} watches {name!r}")


class CheckSchedule:
    """When the checks of a watched loss are due: at the global steps that are multiples of N.

    A session restored at any step keeps the schedule of the run it
    continues. Where the global step is unknown, runs are counted instead.

    Args:
      every_n: The global steps between checks.
    """

    def __init__(self, every_n: int) -> None:
        self._every_n = every_n
        self._runs = 0
        self._due: int | None = None  # The global step of the next check, once known.

    def steps_to_check(self, global_step: int) -> int:
        """Runs from now to the run that reaches the next multiple of N."""
        return self._every_n - global_step % self._every_n

    def add_runs(self, runs: int) -> None:
        """Counts steps the session fused (they end at no run of their own)."""
        self._runs += runs

    def due(self, step: int | None) -> bool:
        """Whether a check is due after the run that ended at global step `step`."""
        self._runs += 1
        every_n = self._every_n
        if step is None:
            due = self._runs >= every_n
        else:
            if self._due is None:  # The first multiple of N at or after this step.
                self._due = -(-step // every_n) * every_n
            due = step >= self._due
            if due:
                self._due = (step // every_n + 1) * every_n
        if due:
            self._runs = 0
        return due

    def forget_runs(self) -> None:
        """Starts counting runs again (after a check made out of schedule)."""
        self._runs = 0


class EveryStepCheck:
    """Fetches the loss with every run and checks it on the host.

    Args:
      fetch: The resolved loss fetch.
      detect_inf: Also treat an infinite loss as bad.
    """

    def __init__(self, fetch: Any, detect_inf: bool) -> None:
        self._fetch = fetch
        self._request = SessionRunArgs(fetch)  # The same every run.
        self._detect_inf = detect_inf
        self._value_checked = False

    def call(self, step: WatchedStep, args: Any, kwargs: Any) -> Any:
        return step.step_fn(*args, **kwargs)

    def before_run(self, run_context: Any) -> SessionRunArgs:
        return self._request

    def after_run(self, run_context: Any, results: Any) -> Divergence | None:
        if not self._value_checked:
            array = np.asarray(results)
            _check_value_type(f"the value of {self._fetch!r}", array.dtype, array.shape)
            self._value_checked = True
        # A scalar (what Session.run and numpy() give for a scalar loss)
        # converts directly; a one-element array is reshaped first.
        kind = type(results)
        loss = float(results) if kind in _FLOAT_SCALARS else float(np.reshape(results, ()))
        if math.isnan(loss) or (self._detect_inf and math.isinf(loss)):
            return Divergence(loss, as_run_context(run_context).global_step_after())
        return None

    def flush(self) -> None:
        return None

    def next_action(self, global_step: int) -> NextAction:
        return EVERY_STEP  # The loss of every step is read.


class KeptLossCheck:
    """Eager mode: keeps each run's loss on the device and checks N at once.

    For a watched step run under a `tf.distribute` strategy, whose outputs
    may be per-replica values (`FlagCheck` is used everywhere else). The watch
    wrapper hands each call's outputs to this check; steps fused by the
    session (`steps_per_execution`) hand their losses over stacked, in
    `run_context.silent_outputs`. When a check is due (`CheckSchedule`, and
    in `flush()`) the kept losses are concatenated on the device and read in
    one transfer; the first bad one is reported with the global step after
    the step that produced it, which the step service knows on the host.

    Args:
      name: The loss entry of the mapping the step returns.
      every_n: The global steps between checks.
      detect_inf: Also treat an infinite loss as bad.
    """

    def __init__(self, name: str, every_n: int, detect_inf: bool) -> None:
        self._name = name
        self._schedule = CheckSchedule(every_n)
        self._detect_inf = detect_inf
        self._losses: list[Any] = []  # Vectors of losses, one per step.
        self._steps: list[int | None] = []  # The global step after each kept loss's step.
        self._collecting = False
        self._value_checked = False

    def call(self, step: WatchedStep, args: Any, kwargs: Any) -> Any:
        outputs = step.step_fn(*args, **kwargs)
        if self._collecting:
            loss = loss_entry(outputs, self._name)
            self._keep_losses(loss, loss.shape)
        return outputs

    def _keep_losses(self, losses: Any, shape: Any) -> None:
        """Keeps `losses` (one loss of `shape`, or several stacked) as a vector."""
        if not self._value_checked:
            _check_value_type(f"the step's {self._name!r} entry", losses.dtype, shape)
            self._value_checked = True
        self._losses.append(tf.reshape(losses, [-1]))

    def before_run(self, run_context: Any) -> None:
        run_context = as_run_context(run_context)
        silent = run_context.silent_steps
        if silent:
            # Fused steps: their losses come stacked, after global steps up to this run's.
            before = run_context.global_step
            stacked = run_context.silent_outputs[self._name]
            self._keep_losses(stacked, stacked.shape[1:])
            self._steps.extend(
                [None] * silent if before is None else range(before - silent + 1, before + 1)
            )
            self._schedule.add_runs(silent)
        self._collecting = True
        return None

    def next_action(self, global_step: int) -> NextAction:
        return NextAction(steps=self._schedule.steps_to_check(global_step), keep=(self._name,))

    def after_run(self, run_context: Any, results: Any) -> Divergence | None:
        self._collecting = False
        step = as_run_context(run_context).global_step_after()  # Known on the host: no read.
        kept = sum(int(losses.shape[0]) for losses in self._losses)
        self._steps.extend([step] * (kept - len(self._steps)))
        if self._schedule.due(step):
            return self.flush()
        return None

    def flush(self) -> Divergence | None:
        self._collecting = False
        self._schedule.forget_runs()
        losses, steps = self._losses, self._steps
        self._losses, self._steps = [], []
        if not losses:
            return None
        values = tf.concat(losses, 0).numpy()  # The one read of a check.
        bad = ~np.isfinite(values) if self._detect_inf else np.isnan(values)
        if not bad.any():
            return None
        index = int(bad.argmax())
        known = [step for step in steps if step is not None]
        detail = f" (found by the check at global step {known[-1]})" if known else ""
        step = steps[index] if index < len(steps) else None
        return Divergence(float(values[index]), step, detail)
