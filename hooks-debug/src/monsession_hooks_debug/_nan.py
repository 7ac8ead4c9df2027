"""`NanTensorHook`: stops or fails training when the loss diverges.

Two ways to watch the loss (see `_loss_checks`):

* **Every step** (TensorFlow's way, and the default): the hook fetches the
  loss with each step and checks it on the host. In graph mode the loss comes
  back with the step's own `Session.run`; in eager mode it is read after the
  step, which waits for the step to finish.
* **Every N steps** (`check_every_n_steps=N`, eager mode): the step is
  wrapped with `NanTensorHook.watch`, which keeps a handle on each step's loss
  tensor without reading it. Every N steps the hook stacks the kept losses on
  the device and reads them back in one transfer of N floats. Between checks
  nothing is copied to the host and nothing waits for the device, and the
  first bad step is still reported exactly.
"""

from __future__ import annotations

import functools
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
from monsession.plugins import as_run_context
from monsession_hooks_debug._loss_checks import (
    Divergence,
    EveryStepCheck,
    KeptLossCheck,
    LossCheck,
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
        read after every step, as TensorFlow does. With N > 1 the step must be
        run through `watch(step)`; losses stay on the device and are checked
        when the global step reaches a multiple of N (after a restart too),
        and on the last step, with one read, still naming the
        first bad step exactly. A divergence then stops training up to N - 1
        steps after it happened. Graph mode always checks every step: the loss
        comes back with the step's own `Session.run`, so there is no extra
        wait to save.

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

    def watch(self, step_fn: Callable[..., Any]) -> Callable[..., Any]:
        """Returns `step_fn` wrapped so the hook can keep its loss on the device.

        Needed in eager mode with `check_every_n_steps` > 1; harmless otherwise.
        The wrapper takes the same arguments and returns the same outputs; after
        each call made by the monitored session it keeps a handle on the
        `loss_tensor` entry of the returned mapping, without reading it::

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

        @functools.wraps(
            step_fn, assigned=("__module__", "__name__", "__qualname__", "__doc__"), updated=()
        )
        def watched(*args: Any, **kwargs: Any) -> Any:
            outputs = step_fn(*args, **kwargs)
            if self._check is not None:
                self._check.keep(outputs)
            return outputs

        watched._monsession_watched_by = self  # type: ignore[attr-defined]
        # Fused steps call `step_fn` directly: the wrapper keeps nothing then.
        watched.monsession_fused_step = step_fn  # type: ignore[attr-defined]
        return watched

    def begin(self) -> None:
        self._check = self._make_check()

    def after_create_session(self, session: Any, coord: Any) -> None:
        if self._check is not None:
            # Losses kept before a preemption are still worth checking.
            self._report(None, self._check.flush())

    def before_run(self, run_context: SessionRunContext) -> SessionRunArgs | None:
        run_context = as_run_context(run_context)
        if self._check is None:  # Used without begin(), as TensorFlow allows.
            self._check = self._make_check()
        return self._check.before_run(run_context)

    def next_action(self, global_step: int) -> NextAction:
        """Every step, or (kept losses) the step at which the next check is due."""
        if self._check is None:
            return NextAction(steps=1)
        return self._check.next_action(global_step)

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        run_context = as_run_context(run_context)
        assert self._check is not None
        self._report(run_context, self._check.after_run(run_context, run_values.results))

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
        if self._every_n == 1 or not tf.executing_eagerly():
            return EveryStepCheck(fetch, self._detect_inf)
        if not isinstance(fetch, str):
            raise TypeError(
                f"{_HOOK}: with check_every_n_steps={self._every_n}, loss_tensor must be the "
                f"name of the loss entry of the mapping the step returns (e.g. 'loss'); got "
                f"{fetch!r}."
            )
        return KeptLossCheck(self, fetch, self._every_n, self._detect_inf)

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
