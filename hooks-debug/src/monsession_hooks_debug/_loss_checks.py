"""How `NanTensorHook` checks the loss: every step, or kept on the device.

`EveryStepCheck` is TensorFlow's way: the loss is fetched with every run and
checked on the host. `KeptLossCheck` (eager mode, every N runs) keeps each
run's loss tensor without reading it and reads N of them in one transfer.
Only eager steps return device tensors that can be kept unread, so that is
the one place where the hook's work differs by mode; the hook picks one
check in `begin()`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any, Protocol

import numpy as np
import tensorflow as tf

import monsession
from monsession import NextAction, SessionRunArgs, SessionRunContext

_HOOK = "NanTensorHook"
_ARGUMENT = "loss_tensor"
_FLOAT_SCALARS = frozenset({float, np.float16, np.float32, np.float64})


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


class LossCheck(Protocol):
    """One way of checking the loss; the hook calls it around every run."""

    def keep(self, outputs: Any) -> None:
        """Called by `NanTensorHook.watch` with the outputs of each step call."""

    def before_run(self, run_context: SessionRunContext) -> SessionRunArgs | None:
        """What the hook asks of this run."""

    def after_run(self, run_context: SessionRunContext, results: Any) -> Divergence | None:
        """Checks after a run; `results` are the values of what was asked."""

    def flush(self) -> Divergence | None:
        """Checks what is still kept (new session, or the end)."""

    def next_action(self, global_step: int) -> NextAction:
        """When the check next needs the hook called (for fused steps)."""


def _check_value_type(what: str, dtype: Any, shape: Any) -> None:
    monsession.plugins.check_scalar(_HOOK, _ARGUMENT, what, dtype, shape)


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

    def keep(self, outputs: Any) -> None:
        pass

    def before_run(self, run_context: SessionRunContext) -> SessionRunArgs:
        return self._request

    def after_run(self, run_context: SessionRunContext, results: Any) -> Divergence | None:
        if not self._value_checked:
            array = np.asarray(results)
            _check_value_type(f"the value of {self._fetch!r}", array.dtype, array.shape)
            self._value_checked = True
        # A scalar (what Session.run and numpy() give for a scalar loss)
        # converts directly; a one-element array is reshaped first.
        kind = type(results)
        loss = float(results) if kind in _FLOAT_SCALARS else float(np.reshape(results, ()))
        if math.isnan(loss) or (self._detect_inf and math.isinf(loss)):
            return Divergence(loss, run_context.global_step_after())
        return None

    def flush(self) -> None:
        return None

    def next_action(self, global_step: int) -> NextAction:
        return NextAction(steps=1)  # The loss of every step is read.


class KeptLossCheck:
    """Eager mode: keeps each run's loss on the device and checks N at once.

    The step must run through `NanTensorHook.watch`, which hands its outputs
    to `keep()`. Steps fused by the session (`steps_per_execution`) hand
    their losses over stacked, in `run_context.silent_outputs`. Every
    `every_n` steps (and in `flush()`) the kept losses are concatenated on
    the device and read in one transfer; the first bad one is reported with
    the global step after the step that produced it, which the step service
    knows on the host. The checks fall on the global steps that are
    multiples of N, so a session restored at any step keeps the schedule of
    the run it continues (runs are counted only where the step is unknown).

    Args:
      owner: The hook, whose `watch` wrapper must run the step.
      name: The loss entry of the mapping the step returns.
      every_n: How many runs between checks.
      detect_inf: Also treat an infinite loss as bad.
    """

    def __init__(self, owner: Any, name: str, every_n: int, detect_inf: bool) -> None:
        self._owner = owner
        self._name = name
        self._every_n = every_n
        self._detect_inf = detect_inf
        self._losses: list[Any] = []  # Vectors of losses, one per step.
        self._steps: list[int | None] = []  # The global step after each kept loss's step.
        self._collecting = False
        self._runs = 0
        self._due: int | None = None  # The global step of the next check, once known.
        self._saw_watched_step = False
        self._value_checked = False

    def keep(self, outputs: Any) -> None:
        if not self._collecting:
            return
        try:
            loss = outputs[self._name]
        except (KeyError, TypeError, IndexError):
            got = (
                f"entries {sorted(outputs)}"
                if isinstance(outputs, Mapping)
                else f"a {type(outputs).__name__}"
            )
            raise ValueError(
                f"{_HOOK} watches the step's {self._name!r} entry, but the step returned {got}."
            ) from None
        # A strategy.run output: one loss per step, as a fetch of it is.
        loss = monsession.plugins.replica_value(loss, f"{_HOOK} watches {self._name!r}")
        self._keep_losses(loss, loss.shape)

    def _keep_losses(self, losses: Any, shape: Any) -> None:
        """Keeps `losses` (one loss of `shape`, or several stacked) as a vector."""
        if not self._value_checked:
            _check_value_type(f"the step's {self._name!r} entry", losses.dtype, shape)
            self._value_checked = True
        self._losses.append(tf.reshape(losses, [-1]))

    def before_run(self, run_context: SessionRunContext) -> None:
        if not self._saw_watched_step:
            self._require_watched(run_context.original_args.fetches)
        silent = run_context.silent_steps
        if silent:
            # Fused steps: their losses come stacked, after global steps up to this run's.
            before = run_context.global_step
            stacked = run_context.silent_outputs[self._name]
            self._keep_losses(stacked, stacked.shape[1:])
            self._steps.extend(
                [None] * silent if before is None else range(before - silent + 1, before + 1)
            )
            self._runs += silent
        self._collecting = True
        return None

    def next_action(self, global_step: int) -> NextAction:
        # The run that reaches the next multiple of N checks.
        return NextAction(steps=self._every_n - global_step % self._every_n, keep=(self._name,))

    def after_run(self, run_context: SessionRunContext, results: Any) -> Divergence | None:
        self._collecting = False
        step = run_context.global_step_after()  # Known on the host: no device read.
        kept = sum(int(losses.shape[0]) for losses in self._losses)
        self._steps.extend([step] * (kept - len(self._steps)))
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
            return self.flush()
        return None

    def flush(self) -> Divergence | None:
        self._collecting = False
        losses, steps = self._losses, self._steps
        self._losses, self._steps, self._runs = [], [], 0
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

    def _require_watched(self, fetches: Any) -> None:
        leaves = [fetches] if callable(fetches) else tf.nest.flatten(fetches)
        if not any(getattr(leaf, "_monsession_watched_by", None) is self._owner for leaf in leaves):
            raise ValueError(
                f"{_HOOK}(check_every_n_steps={self._every_n}) checks losses kept on the "
                "device, so it must see the step's outputs: run the step wrapped by this "
                "hook, e.g. `step = hook.watch(train_step)` then `sess.run(step)`."
            )
        self._saw_watched_step = True
