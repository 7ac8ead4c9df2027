"""`NanTensorHook`: stops or fails training when the loss diverges.

Two ways to watch the loss:

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
import logging
import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import tensorflow as tf

from monsession import SessionRunArgs, SessionRunContext, SessionRunHook, SessionRunValues
from monsession._global_step import get_global_step

logger = logging.getLogger("monsession.debug")

_HOOK = "NanTensorHook"
_FLOAT_SCALARS = frozenset({float, np.float16, np.float32, np.float64})


class NanLossDuringTrainingError(RuntimeError):
    """Raised by `NanTensorHook` when the loss is NaN (or Inf, if asked).

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


def _describe_loss(value: float) -> str:
    return "NaN" if np.isnan(value) else str(value).replace("inf", "Inf")


def _check_dtype_and_shape(dtype: Any, shape: Any, what: str) -> None:
    """Raises unless `dtype` is floating and `shape` may hold a single element."""
    dtype = tf.as_dtype(dtype)
    if not dtype.is_floating:
        raise TypeError(
            f"{_HOOK}: loss_tensor must be a scalar float tensor; {what} has dtype "
            f"{dtype.name}, which can never be NaN."
        )
    shape = tf.TensorShape(shape)
    if shape.rank is not None and shape.num_elements() not in (None, 1):
        raise ValueError(
            f"{_HOOK}: loss_tensor must be a scalar float tensor; {what} has shape "
            f"{shape.as_list()}. Reduce it to a scalar, e.g. with tf.reduce_mean."
        )


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
        every N steps, and on the last step, with one read, still naming the
        first bad step exactly. A divergence then stops training up to N - 1
        steps after it happened. Graph mode always checks every step: the loss
        comes back with the step's own `Session.run`, so there is no extra
        wait to save.

    Raises:
      TypeError: If `loss_tensor` is not one of the kinds above or is not a
        float, or `check_every_n_steps` is not an integer.
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
        if isinstance(check_every_n_steps, bool) or not isinstance(check_every_n_steps, int):
            raise TypeError(
                f"{_HOOK}: check_every_n_steps must be an int >= 1, got {check_every_n_steps!r}."
            )
        if check_every_n_steps < 1:
            raise ValueError(
                f"{_HOOK}: check_every_n_steps must be >= 1, got {check_every_n_steps}."
            )
        _check_loss_source(loss_tensor)
        self._loss_tensor = loss_tensor
        self._fail_on_nan_loss = fail_on_nan_loss
        self._detect_inf = detect_inf
        self._every_n = check_every_n_steps
        self._fetch: Any = None
        self._eager: bool | None = None
        self._deferred = False
        self._global_step: Any = None
        self._value_checked = False
        # Eager every-N state.
        self._pending: list[Any] = []
        self._collecting = False
        self._runs = 0
        self._runs_at_last_check = 0
        self._start_step: int | None = None
        self._session: Any = None
        self._saw_watched_step = False

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
            if self._collecting:
                try:
                    self._pending.append(outputs[self._fetch])
                except (KeyError, TypeError, IndexError):
                    self._raise_no_loss_entry(outputs)
            return outputs

        watched._monsession_watched_by = self  # type: ignore[attr-defined]
        return watched

    def begin(self) -> None:
        self._resolve()
        self._value_checked = False

    def after_create_session(self, session: Any, coord: Any) -> None:
        if not self._deferred:
            return
        self._session = session
        if self._pending:
            # Losses kept before a preemption are still worth checking.
            self._check_pending(None)
        self._collecting = False
        self._runs = self._runs_at_last_check = 0
        self._start_step = None
        if self._global_step is not None:
            self._start_step = int(session.run(self._global_step))

    def before_run(self, run_context: SessionRunContext) -> SessionRunArgs | None:
        if self._eager is None:  # Used without begin(), as TensorFlow allows.
            self._resolve()
        if not self._deferred:
            return self._request
        if not self._saw_watched_step:
            self._require_watched(run_context.original_args.fetches)
        self._collecting = True
        return None

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        if not self._deferred:
            self._check_value(run_context, run_values.results)
            return
        self._collecting = False
        self._runs += 1
        if self._runs - self._runs_at_last_check >= self._every_n:
            self._check_pending(run_context)

    def end(self, session: Any) -> None:
        if self._deferred:
            self._collecting = False
            if self._pending:
                self._check_pending(None)

    # Resolving the loss.

    def _resolve(self) -> None:
        self._eager = tf.executing_eagerly()
        self._deferred = self._eager and self._every_n > 1
        self._global_step = get_global_step()
        source = self._loss_tensor
        if not self._eager:
            self._fetch = _graph_fetch(source)
            self._request = SessionRunArgs(self._fetch)  # The same every step.
            return
        if isinstance(source, tf.Tensor):
            raise TypeError(
                f"{_HOOK}: in eager mode loss_tensor cannot be a tensor computed outside "
                "the step (it would never change); pass the name of the loss entry of the "
                "mapping the step returns, e.g. 'loss'."
            )
        if self._every_n > 1 and not isinstance(source, str):
            raise TypeError(
                f"{_HOOK}: with check_every_n_steps={self._every_n}, loss_tensor must be the "
                f"name of the loss entry of the mapping the step returns (e.g. 'loss'); got "
                f"{source!r}."
            )
        self._fetch = source
        self._request = SessionRunArgs(self._fetch)

    def _require_watched(self, fetches: Any) -> None:
        leaves = [fetches] if callable(fetches) else tf.nest.flatten(fetches)
        if not any(getattr(leaf, "_monsession_watched_by", None) is self for leaf in leaves):
            raise ValueError(
                f"{_HOOK}(check_every_n_steps={self._every_n}) checks losses kept on the "
                "device, so it must see the step's outputs: run the step wrapped by this "
                "hook, e.g. `step = hook.watch(train_step)` then `sess.run(step)`."
            )
        self._saw_watched_step = True

    # Checking every step.

    def _check_value(self, run_context: SessionRunContext, value: Any) -> None:
        if not self._value_checked:
            array = np.asarray(value)
            _check_dtype_and_shape(array.dtype, array.shape, f"the value of {self._fetch!r}")
            self._value_checked = True
        # A scalar (what Session.run and numpy() give for a scalar loss) converts
        # directly; a one-element array is reshaped first.
        loss = float(value) if type(value) in _FLOAT_SCALARS else float(np.reshape(value, ()))
        if self._is_bad(loss):
            step = self._read_step(run_context.session)
            self._diverged(run_context, loss, step, detail="")

    def _is_bad(self, loss: float) -> bool:
        return math.isnan(loss) or (self._detect_inf and math.isinf(loss))

    def _read_step(self, session: Any) -> int | None:
        if self._global_step is None:
            return None
        return int(session.run(self._global_step))

    # Checking every N steps (eager).

    def _raise_no_loss_entry(self, outputs: Any) -> None:
        got = (
            f"entries {sorted(outputs)}"
            if isinstance(outputs, Mapping)
            else f"a {type(outputs).__name__}"
        )
        raise ValueError(
            f"{_HOOK} watches the step's {self._fetch!r} entry, but the step returned {got}."
        )

    def _check_pending(self, run_context: SessionRunContext | None) -> None:
        losses, self._pending = self._pending, []
        runs_checked = self._runs - self._runs_at_last_check
        runs_before = self._runs_at_last_check
        self._runs_at_last_check = self._runs
        if not losses:
            return
        if not self._value_checked:
            first = losses[0]
            _check_dtype_and_shape(first.dtype, first.shape, f"the step's {self._fetch!r} entry")
            self._value_checked = True
        values = tf.stack(losses).numpy().reshape(-1)  # The one read of a check.
        bad = ~np.isfinite(values) if self._detect_inf else np.isnan(values)
        if not bad.any():
            return
        index = int(bad.argmax())
        loss = float(values[index])
        step: int | None = None
        now = self._read_step(self._session) if self._session is not None else None
        one_loss_per_run = len(losses) == runs_checked
        if (
            one_loss_per_run
            and now is not None
            and self._start_step is not None
            and now - self._start_step == self._runs
        ):
            step = self._start_step + runs_before + index + 1
            detail = f" (found by the check at global step {now})"
        else:
            detail = (
                f" (loss {index + 1} of the {len(losses)} kept since the previous check; "
                f"global step now {now})"
            )
        self._diverged(run_context, loss, step, detail)

    # Reporting.

    def _diverged(
        self, run_context: SessionRunContext | None, loss: float, step: int | None, detail: str
    ) -> None:
        kind = _describe_loss(loss)
        at = f" at global step {step}" if step is not None else ""
        message = f"Model diverged with loss = {kind}{at}{detail}."
        if self._fail_on_nan_loss:
            logger.error(message)
            prefix = "NaN" if kind == "NaN" else "Inf"
            raise NanLossDuringTrainingError(
                f"{prefix} loss during training: {message}", step=step, loss=loss
            )
        logger.warning(message)
        if run_context is not None:
            run_context.request_stop()


def _check_loss_source(source: Any) -> None:
    """Raises at construction for a loss that can never be checked."""
    if isinstance(source, str):
        if not source:
            raise ValueError(f"{_HOOK}: loss_tensor must not be an empty name.")
        return
    if isinstance(source, tf.Variable):
        _check_dtype_and_shape(source.dtype, source.shape, f"variable {source.name!r}")
        return
    if isinstance(source, tf.Tensor):
        _check_dtype_and_shape(source.dtype, source.shape, f"tensor {_tensor_name(source)!r}")
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


def _graph_fetch(source: Any) -> Any:
    """The graph element to fetch for `source`, checked to be a scalar float."""
    if isinstance(source, str):
        graph = tf.compat.v1.get_default_graph()
        name = source if ":" in source else f"{source}:0"
        try:
            element = graph.as_graph_element(name)
        except (KeyError, ValueError) as error:
            raise ValueError(
                f"{_HOOK}: loss_tensor {source!r} names no tensor of the default graph: {error}"
            ) from error
        _check_dtype_and_shape(element.dtype, element.shape, f"tensor {element.name!r}")
        return element
    if callable(source) and not isinstance(source, (tf.Tensor, tf.Variable)):
        raise TypeError(
            f"{_HOOK}: a callable loss_tensor only works in eager mode; in graph mode pass "
            "the loss tensor."
        )
    return source
