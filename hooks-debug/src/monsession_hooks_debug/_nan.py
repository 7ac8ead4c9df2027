"""`NanTensorHook`: stops or fails training when the loss diverges.

Two ways to watch the loss (see `_loss_checks` and `_finite_flag`):

* **Fetched** (TensorFlow's way, the default, and graph mode): the hook
  fetches the loss with each step and checks it on the host. In graph mode
  the loss comes back with the step's own `Session.run`; in eager mode it is
  read after the step, which waits for the step to finish.
* **Watched** (eager mode, the step wrapped with `NanTensorHook.watch`): the
  step checks its own loss on the device, in the same call, and keeps the
  number of the first bad step in a device variable. The hook reads that one
  number when a check is due (every step, or every `check_every_n_steps`),
  and names the global step of the first bad loss. Between checks nothing is
  copied to the host and nothing waits for the device, and steps fused by
  the session (`steps_per_execution`) are checked inside the fused loop.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable
from typing import Any, cast

import numpy as np
import tensorflow as tf

import monsession
from monsession import (
    NextAction,
    SessionRunArgs,
    SessionRunContext,
    SessionRunHook,
    SessionRunValues,
    tf_logging,
)
from monsession.plugins import as_run_context, fused_target, in_eager_mode, steps_called
from monsession_hooks_debug._finite_flag import FiniteFlag, FlagCheck
from monsession_hooks_debug._loss_checks import (
    EVERY_STEP,
    Divergence,
    EveryStepCheck,
    KeptLossCheck,
    LossCheck,
    WatchedStep,
)

_HOOK = "NanTensorHook"
_ARGUMENT = "loss_tensor"


class NanLossDuringTrainingError(tf.compat.v1.train.NanLossDuringTrainingError):
    """Raised by `NanTensorHook` when the loss is NaN (or Inf, if asked).

    A subclass of TensorFlow's `tf.compat.v1.train.NanLossDuringTrainingError`
    (itself a `RuntimeError`): code that catches TensorFlow's catches it.

    Args:
      *args: An optional message; without one, `str()` gives TensorFlow's
        ``"NaN loss during training."``.
      step: The global step of the first bad loss, when known.
      loss: The bad loss value, when known.
    """

    def __init__(self, *args: Any, step: int | None = None, loss: float | None = None) -> None:
        super().__init__(*args)
        self.step = step
        self.loss = loss

    def __str__(self) -> str:
        if self.args:
            return str(self.args[0])
        return "NaN loss during training."


class NanTensorHook(SessionRunHook):
    """Monitors the loss and stops training if it is NaN.

    Can either fail with `NanLossDuringTrainingError` or log a warning and
    request a stop. Works in graph and eager mode.

    Args:
      loss_tensor: The loss. Graph mode: a scalar float `Tensor` (or its name).
        Eager mode: the name of the entry of the mapping the step returns
        (e.g. ``"loss"``), a scalar float `tf.Variable`, or a zero-argument
        callable returning the loss.
      fail_on_nan_loss: Whether to raise `NanLossDuringTrainingError` (True)
        or to log a warning and request a stop (False).
      detect_inf: Also treat an infinite loss as divergence (not in
        TensorFlow, which only looks for NaN).
      check_every_n_steps: Eager mode only. With 1 (the default) the loss is
        checked after every step, as TensorFlow does. With N > 1 the step must
        be run through `watch(step)`; the loss is checked on the device, and
        read when the global step reaches a multiple of N (after a restart
        too) and at the end, with one read, still naming the first bad step
        exactly. A divergence then stops (or raises) at that check, up to
        N - 1 steps after it happened; the message and
        `NanLossDuringTrainingError.step` name the global step of the first
        bad loss, and the message also names the check's step. Graph mode
        always checks every step: the loss comes back with the step's own
        `Session.run`, so there is no extra wait to save.

    Raises:
      TypeError: If `loss_tensor` is not one of the kinds above or is not a
        float, `check_every_n_steps` is not an integer, or `fail_on_nan_loss`
        is not a bool.
      ValueError: If `loss_tensor` is known not to be a scalar, or
        `check_every_n_steps` is smaller than 1.
    """

    def __init__(
        self,
        loss_tensor: Any,
        fail_on_nan_loss: bool = True,
        *,
        detect_inf: bool = False,
        check_every_n_steps: int = 1,
    ) -> None:
        monsession.plugins.check_interval(
            _HOOK, "check_every_n_steps", check_every_n_steps, "steps"
        )
        _check_loss_source(loss_tensor)
        self._loss_tensor = loss_tensor
        monsession.plugins.check_flag(_HOOK, "fail_on_nan_loss", fail_on_nan_loss)
        self._fail_on_nan_loss = fail_on_nan_loss
        self._detect_inf = detect_inf
        self._every_n = check_every_n_steps
        self._check: LossCheck | None = None
        self._watched_seen = False  # Whether the first run's step was looked at.
        self._flag = FiniteFlag(loss_tensor, detect_inf) if isinstance(loss_tensor, str) else None
        self._wrappers: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
        self._watching: weakref.WeakSet[Callable[..., Any]] = weakref.WeakSet()  # By watch().

    def watch(self, step_fn: Callable[..., Any]) -> Callable[..., Any]:
        """Returns `step_fn` wrapped so the hook can check its loss on the device.

        Needed in eager mode with `check_every_n_steps` > 1; with 1 it saves
        the read of the loss after every step but one of a flag; harmless in
        graph mode. The wrapper takes the same arguments and returns the same
        outputs. A `tf.function` step is called inside a `tf.function` that
        also checks the `loss_tensor` entry of the returned mapping and keeps
        the result on the device, in the same call, fused steps too; under a
        `tf.distribute` strategy (or for a step that is not a `tf.function`)
        the check runs beside the step. The same wrapper is returned for the
        same step::

            hook = NanTensorHook("loss", check_every_n_steps=100)
            step = hook.watch(train_step)
            with monsession.MonitoredTrainingSession(hooks=[hook]) as sess:
                while not sess.should_stop():
                    sess.run(step)

        Args:
          step_fn: The step, usually a `tf.function` returning a mapping.

        Returns:
          The wrapped step.

        Raises:
          TypeError: If `step_fn` is not callable.
        """
        if not callable(step_fn) or isinstance(step_fn, (tf.Tensor, tf.Variable)):
            raise TypeError(f"{_HOOK}.watch() takes the step function, got {step_fn!r}.")
        try:
            return self._wrappers[step_fn]  # The same wrapper, traced once, for every call.
        except (KeyError, TypeError):
            pass
        watched = self._wrap(step_fn)
        try:
            self._wrappers[step_fn] = watched
        except TypeError:  # Not weakly referable: wrapped anew each time.
            pass
        return watched

    def _wrap(self, step_fn: Callable[..., Any]) -> Callable[..., Any]:
        """The wrapper of `watch`, with its flag-updating `tf.function` when `step_fn` is one."""
        updating = self._updating(step_fn)
        step = WatchedStep(step_fn, updating)

        @functools.wraps(
            step_fn, assigned=("__module__", "__name__", "__qualname__", "__doc__"), updated=()
        )
        def watched(*args: Any, **kwargs: Any) -> Any:
            check = self._check
            if check is None:
                return step_fn(*args, **kwargs)
            return check.call(step, args, kwargs)

        self._watching.add(watched)
        inner = fused_target(step_fn)
        # What the session fuses: the step and, with the flag check, its update.
        fused = updating if inner is step_fn else self._updating(inner)
        watched.monsession_fused_step = step_fn if fused is None else fused  # type: ignore[attr-defined]
        return watched

    def _updating(self, step_fn: Any) -> Any:
        """A `tf.function` calling `step_fn`, updating the device flag and returning the
        step's outputs, or `None` (no flag, or `step_fn` is no `tf.function`).

        The session may trace it before the first run; the update is traced in
        wherever the flag check is used: outside `tf.distribute` strategies.
        """
        flag = self._flag
        if flag is None or not isinstance(step_fn, _POLYMORPHIC):
            return None

        def flagged(*args: Any, **kwargs: Any) -> Any:
            outputs = step_fn(*args, **kwargs)
            if not tf.distribute.has_strategy():
                flag.create()
                flag.update(outputs)
            return outputs

        flagged.__name__ = f"nan_checked_{getattr(step_fn, '__name__', 'step')}"
        return tf.function(flagged, autograph=False)

    def begin(self) -> None:
        self._check = self._make_check()
        self._watched_seen = False
        if self._flag is not None and in_eager_mode() and not tf.distribute.has_strategy():
            # Before any step: the session may run fused steps before the hook's first run.
            self._flag.create()
            self._flag.reset()

    def after_create_session(self, session: Any, coord: Any) -> None:
        if self._check is not None:
            # Losses kept before a preemption are still worth checking.
            self._report(None, self._check.flush())

    def before_run(self, run_context: SessionRunContext) -> SessionRunArgs | None:
        check = self._check
        if check is None or not self._watched_seen:
            check = self._first_run(run_context)
        return check.before_run(run_context)

    def next_action(self, global_step: int) -> NextAction:
        """Every step, or (kept losses) the step at which the next check is due."""
        if self._every_n == 1 or self._check is None:
            return EVERY_STEP
        return self._check.next_action(global_step)

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        assert self._check is not None
        found = self._check.after_run(run_context, run_values.results)
        if found is not None:
            self._report(run_context, found)

    def end(self, session: Any) -> None:
        if self._check is not None:
            self._report(None, self._check.flush())

    def _make_check(self) -> LossCheck:
        """Resolves the loss for the current mode and picks how to check it."""
        fetch = monsession.plugins.resolve_fetch(_HOOK, _ARGUMENT, self._loss_tensor)
        if isinstance(fetch, tf.Tensor) and not tf.is_symbolic_tensor(fetch):
            raise TypeError(
                f"{_HOOK}: in eager mode loss_tensor cannot be a tensor computed outside "
                "the step (it would never change); pass the name of the loss entry of the "
                "mapping the step returns, e.g. 'loss'."
            )
        if isinstance(self._loss_tensor, str) and not isinstance(fetch, str):
            # A name of a graph tensor (tensors and variables were checked at construction).
            tensor = cast(tf.Tensor, fetch)
            monsession.plugins.check_scalar(
                _HOOK, _ARGUMENT, f"tensor {tensor.name!r}", tensor.dtype, tensor.shape
            )
        # Only eager steps return device tensors that can be kept unread.
        if self._every_n == 1 or not in_eager_mode():
            return EveryStepCheck(fetch, self._detect_inf)
        if not isinstance(fetch, str):
            raise TypeError(
                f"{_HOOK}: with check_every_n_steps={self._every_n}, loss_tensor must be the "
                f"name of the loss entry of the mapping the step returns (e.g. 'loss'); got "
                f"{fetch!r}."
            )
        return KeptLossCheck(fetch, self._every_n, self._detect_inf)

    def _first_run(self, run_context: SessionRunContext) -> LossCheck:
        """The check, chosen at the first run: a watched step is checked on the device
        (see `_loss_checks`); made here if the hook is used without `begin()`."""
        check = self._check if self._check is not None else self._make_check()
        self._watched_seen = True
        steps = steps_called(as_run_context(run_context).original_args.fetches)
        watched = any(step is wrapper for wrapper in self._watching for step in steps)
        if isinstance(check, KeptLossCheck) and not watched:
            raise ValueError(
                f"{_HOOK}(check_every_n_steps={self._every_n}) checks losses kept on the "
                "device, so it must see the step's outputs: run the step wrapped by this "
                "hook, e.g. `step = hook.watch(train_step)` then `sess.run(step)`."
            )
        if watched and self._flag is not None and in_eager_mode():
            if not tf.distribute.has_strategy():
                if not self._flag.ready:  # Used without begin().
                    self._flag.create()
                    self._flag.reset()
                check = FlagCheck(self._flag, self._every_n)
        self._check = check
        return check

    def _report(self, run_context: SessionRunContext | None, found: Divergence | None) -> None:
        """Fails or requests a stop for a divergence, as TensorFlow's hook does."""
        if found is None:
            return
        kind = "NaN" if np.isnan(found.loss) else str(found.loss).replace("inf", "Inf")
        at = f" at global step {found.step}" if found.step is not None else ""
        message = f"Model diverged with loss = {kind}{at}{found.detail}."
        if self._fail_on_nan_loss:
            tf_logging.error(message)
            prefix = "NaN" if kind == "NaN" else "Inf"
            raise NanLossDuringTrainingError(
                f"{prefix} loss during training: {message}", step=found.step, loss=found.loss
            )
        tf_logging.warning(message)
        if run_context is not None:
            run_context.request_stop()


_POLYMORPHIC = tf.types.experimental.PolymorphicFunction


def _check_loss_source(source: Any) -> None:
    """Raises at construction for a loss that can never be checked."""
    if isinstance(source, str):
        if not source:
            raise ValueError(f"{_HOOK}: loss_tensor must not be an empty name.")
        return
    if isinstance(source, (tf.Variable, tf.Tensor)):
        what = f"tensor {_tensor_name(source)!r}"
        monsession.plugins.check_scalar(_HOOK, _ARGUMENT, what, source.dtype, source.shape)
        return
    if callable(source):
        return
    raise TypeError(
        f"{_HOOK}: loss_tensor must be a scalar float Tensor, the name of one (graph mode), "
        "the name of the step's loss entry, a tf.Variable or a zero-argument callable "
        f"(eager mode); got {source!r} of type {type(source).__name__}."
    )


def _tensor_name(tensor: Any) -> str:
    try:
        return str(tensor.name)
    except (AttributeError, ValueError):  # Eager tensors have no name.
        return "<eager tensor>"
