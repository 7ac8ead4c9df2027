"""`NanTensorHook`'s flag check: the loss is checked on the device, inside the step.

`FiniteFlag` holds the device variables: whether every loss so far was good
and how many steps were checked while it was. `FiniteFlag.update` adds, to
the traced step, one NaN test (or `is_finite`) of the loss AND-ed into the
flag; the step returns its own outputs alone.

`FlagCheck` is the host side: a check reads that one flag (checking every
step, the loss the step returned), and only when it is due; when it is
down, one more read gives the number of the first bad step, and the
divergence is named by its global step, which the host knows from the
number of the step that produced it.
"""

from __future__ import annotations

import bisect
import math
from typing import Any

import numpy as np
import tensorflow as tf

import monsession
from monsession import NextAction, SessionRunArgs
from monsession.plugins import as_run_context
from monsession_hooks_debug._loss_checks import CheckSchedule, Divergence, WatchedStep, loss_entry

_HOOK = "NanTensorHook"
_ARGUMENT = "loss_tensor"


class FiniteFlag:
    """The device variables of the flag check (created once per hook, in eager mode).

    ``finite``: whether every loss checked so far was good; ``good``: how many
    steps were checked while it was true (so the first bad step is number
    ``good + 1``); ``bad_loss`` (with `detect_inf` only): the first bad loss,
    NaN or infinite. Without `detect_inf` a bad loss is NaN.

    Args:
      name: The loss entry of the mapping the step returns.
      detect_inf: Also treat an infinite loss as bad.
    """

    def __init__(self, name: str, detect_inf: bool) -> None:
        self.name = name
        self._detect_inf = detect_inf
        self._finite: Any = None
        self._good: Any = None
        self._bad_loss: Any = None
        self._separate: Any = None  # `update` as its own tf.function, for other steps.

    @property
    def ready(self) -> bool:
        """Whether the variables exist."""
        return self._finite is not None

    def create(self) -> None:
        """Creates the variables, outside any `tf.function`, if they do not exist."""
        if self._finite is not None:
            return
        with tf.init_scope():
            self._finite = tf.Variable(True, trainable=False, name="nan_check_finite")
            self._good = tf.Variable(0, dtype=tf.int64, trainable=False, name="nan_check_good")
            if self._detect_inf:
                self._bad_loss = tf.Variable(
                    0.0, dtype=tf.float64, trainable=False, name="nan_check_bad_loss"
                )

    def reset(self, checked: int = 0) -> None:
        """Starts again after `checked` steps, none bad (a new session, or after a report)."""
        self._finite.assign(True)
        self._good.assign(checked)

    def update(self, outputs: Any) -> None:
        """Checks the loss in `outputs`, inside the step being traced."""
        loss = loss_entry(outputs, self.name)
        monsession.plugins.check_scalar(
            _HOOK, _ARGUMENT, f"the step's {self.name!r} entry", loss.dtype, loss.shape
        )
        if loss.shape.rank != 0:
            loss = tf.reshape(loss, [])
        # A NaN is the one value not equal to itself.
        good = tf.math.is_finite(loss) if self._detect_inf else tf.equal(loss, loss)
        before = self._finite.read_value()
        after = tf.logical_and(before, good)
        self._finite.assign(after, read_value=False)
        self._good.assign_add(tf.cast(after, tf.int64), read_value=False)
        if self._bad_loss is not None:
            first = tf.not_equal(before, after)
            self._bad_loss.assign(
                tf.where(first, tf.cast(loss, tf.float64), self._bad_loss.read_value()),
                read_value=False,
            )

    def update_after(self, outputs: Any) -> None:
        """`update` as a call of its own, after a step that is not a `tf.function`."""
        if self._separate is None:
            self._separate = tf.function(self.update, autograph=False)
        self._separate({self.name: loss_entry(outputs, self.name)})

    def good(self, loss: Any) -> bool:
        """Whether `loss`, a step's loss (a tensor, or a host value of a step that is no
        `tf.function`), is good by `update`'s test: one read."""
        value = (loss.numpy() if isinstance(loss, tf.Tensor) else np.asarray(loss)).item()
        return math.isfinite(value) if self._detect_inf else value == value

    def read_finite(self) -> bool:
        """Whether every loss checked so far was good (one read, with the one op it needs:
        `numpy()` of the variable adds a name scope and an `Identity`)."""
        finite = self._finite
        return bool(tf.raw_ops.ReadVariableOp(resource=finite.handle, dtype=finite.dtype).numpy())

    def first_bad(self) -> tuple[int, float]:
        """The number of the first bad step and its loss (read when a check found one)."""
        number = int(self._good.numpy()) + 1
        loss = float(self._bad_loss.numpy()) if self._bad_loss is not None else float("nan")
        return number, loss


class FlagCheck:
    """Eager mode, outside `tf.distribute` strategies: the step run through `NanTensorHook.watch`.

    Each watched step updates the device flag (`FiniteFlag`) in the same call,
    fused and quiet steps too (they call the flag-updating function the
    wrapper names; a step that is not a `tf.function`: in a call of its
    own). Every `every_n` global steps, and in `flush()`, the flag is read,
    and the number of the first bad step only when it is down; between checks
    nothing is read and nothing waits for the device. With a check every
    step, a check reads the loss the run's step returned instead (one read
    either way), and the flag only after steps that ran without the hook.
    The host keeps how the numbers of watched steps map to global steps (one
    entry per change of that offset, not one per step).

    Args:
      flag: The hook's device variables, created and reset when the session began.
      every_n: The global steps between checks.
    """

    def __init__(self, flag: FiniteFlag, every_n: int) -> None:
        self._flag = flag
        self._every_n = every_n
        self._schedule = CheckSchedule(every_n)
        self._count = 0  # Watched steps run, as the device counts them.
        self._loss: Any = None  # Checking every step: the loss this run's step returned.
        self._silent = False  # Whether steps ran without the hook before this run.
        self._starts: list[int] = []  # The first step number of each offset...
        self._offsets: list[int | None] = []  # ... and its global step minus number.

    def call(self, step: WatchedStep, args: Any, kwargs: Any) -> Any:
        """Runs the step with the flag's update; returns the step's outputs.

        Every call counts, including those of runs that the hook is not
        called for; the host counts them as the session's runs (silent
        steps and the hook's runs), so the step is meant to be run by the
        session only.
        """
        if step.updating is None:
            outputs = step.step_fn(*args, **kwargs)
            self._flag.update_after(outputs)
        else:
            outputs = step.call(step.updating, args, kwargs)
        if self._every_n == 1:
            self._loss = outputs[self._flag.name]
        return outputs

    def before_run(self, run_context: Any) -> SessionRunArgs | None:
        # A context of TensorFlow's sessions has no silent steps (`as_run_context`).
        silent = getattr(run_context, "silent_steps", 0)
        if silent:  # Runs the hook was not called for; fused ones updated the flag in the loop.
            self._count += silent
            self._schedule.add_runs(silent)
            before = run_context.global_step
            self._note(self._count, before, first=self._count - silent + 1)
        self._silent = bool(silent)  # Then this run's loss alone is not the check.
        self._loss = None  # Set again if this run calls the step.
        return None

    def next_action(self, global_step: int) -> NextAction:
        return NextAction(steps=self._schedule.steps_to_check(global_step))

    def after_run(self, run_context: Any, results: Any) -> Divergence | None:
        self._count += 1
        step = as_run_context(run_context).global_step_after()
        self._note(self._count, step)
        loss = None if self._silent else self._loss
        self._loss = None  # Quiet steps after this one leave it stale.
        if self._every_n == 1 or self._schedule.due(step):
            return self._check(step, loss)
        return None

    def flush(self) -> Divergence | None:
        self._schedule.forget_runs()
        self._loss = None
        return self._check(None, None)

    def _note(self, number: int, step: int | None, first: int | None = None) -> None:
        """Records that watched step `number` (and those from `first` on) ended at `step`."""
        offset = None if step is None else step - number
        if not self._offsets or self._offsets[-1] != offset:
            self._starts.append(number if first is None else first)
            self._offsets.append(offset)

    def _check(self, step: int | None, loss: Any) -> Divergence | None:
        """Reads `loss`, the loss this run's step returned, or (`None`) the flag."""
        finite = self._flag.good(loss) if loss is not None else self._flag.read_finite()
        if finite:
            del self._starts[:-1], self._offsets[:-1]
            return None
        number, bad_loss = self._flag.first_bad()
        self._flag.reset(self._count)
        index = bisect.bisect_right(self._starts, number) - 1
        offset = self._offsets[index] if index >= 0 else None
        del self._starts[:-1], self._offsets[:-1]
        checked = step if step is not None else self._known_step()
        detail = f" (found by the check at global step {checked})" if checked is not None else ""
        return Divergence(bad_loss, None if offset is None else number + offset, detail)

    def _known_step(self) -> int | None:
        offset = self._offsets[-1] if self._offsets else None
        return None if offset is None else self._count + offset
