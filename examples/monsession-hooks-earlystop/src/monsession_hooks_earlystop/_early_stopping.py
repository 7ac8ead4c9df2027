"""`EarlyStoppingHook`: stops training when a metric stops improving.

The hook looks at the metric every `every_n_steps` steps (an *evaluation*).
An evaluation that beats the best value so far by more than `min_delta` is an
improvement; after `patience` evaluations in a row without one, the hook asks
the session to stop. On the other steps `before_run` returns `None`, so the
session fetches nothing for it: no extra fetch in graph mode, no read back to
the host in eager mode.

Which step is due is decided without reading the global step on every step:
the hook reads it when the session is created and at each evaluation, and
counts `run()` calls in between (one call is one step).
"""

from __future__ import annotations

import logging
import math
import numbers
from typing import Any

import numpy as np
import tensorflow as tf

import monsession
from monsession import SessionRunArgs, SessionRunContext, SessionRunHook, SessionRunValues

logger = logging.getLogger("monsession.earlystop")

_HOOK = "EarlyStoppingHook"
_MODES = ("min", "max")


def _check_int(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(
            f"{_HOOK}: {name} must be an int >= {minimum}, got {value!r} of type "
            f"{type(value).__name__}."
        )
    if value < minimum:
        raise ValueError(f"{_HOOK}: {name} must be an int >= {minimum}, got {value}.")
    return int(value)


def _check_number(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(
            f"{_HOOK}: {name} must be a real number, got {value!r} of type {type(value).__name__}."
        )
    if not math.isfinite(value):
        raise ValueError(f"{_HOOK}: {name} must be finite, got {value!r}.")
    return float(value)


def _check_dtype_and_shape(dtype: Any, shape: Any, what: str) -> None:
    """Raises unless `dtype` is a number type and `shape` may hold one element."""
    dtype = tf.as_dtype(dtype)
    if not (dtype.is_floating or dtype.is_integer) or dtype.is_bool:
        raise TypeError(
            f"{_HOOK}: monitor must be a numeric scalar; {what} has dtype {dtype.name}."
        )
    shape = tf.TensorShape(shape)
    if shape.rank is not None and shape.num_elements() not in (None, 1):
        raise ValueError(
            f"{_HOOK}: monitor must be a numeric scalar; {what} has shape {shape.as_list()}. "
            "Reduce it to a scalar, e.g. with tf.reduce_mean."
        )


def _describe(monitor: Any) -> str:
    """A short name of the monitored metric for log lines and errors."""
    if isinstance(monitor, str):
        return monitor
    if isinstance(monitor, (tf.Tensor, tf.Variable)):
        try:
            return str(monitor.name)
        except (AttributeError, ValueError):  # Eager tensors have no name.
            return "<eager tensor>"
    return getattr(monitor, "__qualname__", None) or repr(monitor)


def _check_monitor(monitor: Any) -> None:
    """Raises at construction for a monitor that can never be evaluated."""
    if isinstance(monitor, str):
        if not monitor:
            raise ValueError(
                f"{_HOOK}: monitor must not be an empty string; name the metric, e.g. 'loss'."
            )
        return
    if isinstance(monitor, (tf.Tensor, tf.Variable)):
        _check_dtype_and_shape(monitor.dtype, monitor.shape, repr(_describe(monitor)))
        return
    if callable(monitor):
        return
    raise TypeError(
        f"{_HOOK}: monitor must be a scalar Tensor or its name (graph mode), the name of an "
        "entry of the mapping the step returns, a tf.Variable or a zero-argument callable "
        f"(eager mode); got {monitor!r} of type {type(monitor).__name__}."
    )


class EarlyStoppingHook(SessionRunHook):
    """Requests a stop when a monitored metric has stopped improving.

    Every `every_n_steps` global steps the hook reads the metric. When
    `patience` readings in a row fail to beat the best one by more than
    `min_delta`, it requests a stop. Works in graph and eager mode.

    Args:
      monitor: The metric. Graph mode: a scalar `Tensor` or `tf.Variable`, or
        the name of a tensor of the graph (``"loss"`` or ``"loss:0"``). Eager
        mode: the name of an entry of the mapping the step returns
        (``"loss"``), a scalar `tf.Variable`, or a zero-argument callable
        returning the value (e.g. a Keras metric's ``result``).
      patience: How many evaluations in a row without improvement stop
        training (at least 1).
      min_delta: How much an evaluation must beat the best value by to count
        as an improvement (at least 0).
      mode: ``"min"`` when lower is better (a loss), ``"max"`` when higher is
        better (an accuracy).
      every_n_steps: Evaluate at every global step that is a multiple of this
        (at least 1). On other steps the hook fetches nothing.
      baseline: A value the metric must beat: until an evaluation beats it by
        more than `min_delta`, every evaluation counts against `patience`.
        `None` (the default): the first evaluation is always an improvement.

    Raises:
      TypeError: If an argument has the wrong type, or `monitor` is not a
        number.
      ValueError: If an argument is out of range, or `monitor` is known not
        to be a scalar.

    `begin()` (the session's creation) raises `TypeError` or `ValueError` for
    a monitor that does not fit the mode: a callable in graph mode, a tensor
    name missing from the graph, a tensor computed outside the step in eager
    mode. The first step raises for a metric that is not a numeric scalar or,
    in eager mode, an entry the step does not return.
    """

    def __init__(
        self,
        monitor: Any,
        patience: int = 5,
        min_delta: float = 0.0,
        mode: str = "min",
        every_n_steps: int = 100,
        baseline: float | None = None,
    ) -> None:
        _check_monitor(monitor)
        self._patience = _check_int("patience", patience, 1)
        self._min_delta = _check_number("min_delta", min_delta)
        if self._min_delta < 0:
            raise ValueError(f"{_HOOK}: min_delta must be >= 0, got {min_delta!r}.")
        if mode not in _MODES:
            raise ValueError(f"{_HOOK}: mode must be 'min' or 'max', got {mode!r}.")
        self._every_n = _check_int("every_n_steps", every_n_steps, 1)
        self._baseline = None if baseline is None else _check_number("baseline", baseline)
        self._monitor = monitor
        self._mode = mode
        self._name = _describe(monitor)
        self._fetch: Any = None
        self._global_step: Any = None
        self._step = 0
        self._checked = False
        self._due = False
        self._fetching = False
        self._reset()

    def _reset(self) -> None:
        self._best: float | None = None
        self._best_step: int | None = None
        self._stopped_step: int | None = None
        self._wait = 0

    @property
    def best(self) -> float | None:
        """The best value of the metric so far, `None` before the first improvement."""
        return self._best

    @property
    def best_step(self) -> int | None:
        """The global step at which `best` was read, `None` before the first improvement."""
        return self._best_step

    @property
    def stopped_step(self) -> int | None:
        """The global step at which the hook requested a stop, `None` if it did not."""
        return self._stopped_step

    # The hook API.

    def begin(self) -> None:
        self._reset()
        self._global_step = monsession.get_global_step()
        self._step = 0
        self._checked = False
        if tf.executing_eagerly():
            self._fetch = self._eager_fetch()
        else:
            self._fetch = self._graph_fetch()

    def after_create_session(self, session: Any, coord: Any) -> None:
        if self._global_step is not None:
            self._step = int(session.run(self._global_step))

    def before_run(self, run_context: SessionRunContext) -> SessionRunArgs | None:
        self._due = (self._step + 1) % self._every_n == 0
        # The first run also reads the metric once, so that a wrong name or
        # type fails at the first step rather than at the first evaluation,
        # possibly hours later.
        self._fetching = self._due or not self._checked
        return SessionRunArgs(self._fetch) if self._fetching else None

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        self._step += 1
        if not self._fetching:
            return
        value = self._to_float(run_values.results)
        self._checked = True
        if not self._due:
            return
        if self._global_step is not None:
            # Correct the count of steps: a run may not be exactly one step.
            self._step = int(run_context.session.run(self._global_step))
        self._evaluate(value, self._step, run_context)

    # Evaluating.

    def _evaluate(self, value: float, step: int, run_context: SessionRunContext) -> None:
        if self._is_improvement(value):
            self._best, self._best_step, self._wait = value, step, 0
            logger.debug("%s = %g at global step %d: improved.", self._name, value, step)
            return
        self._wait += 1
        logger.debug(
            "%s = %g at global step %d: no improvement (%d of %d).",
            self._name,
            value,
            step,
            self._wait,
            self._patience,
        )
        if self._wait < self._patience:
            return
        if self._stopped_step is None:
            self._stopped_step = step
            if self._best is None:
                best = (
                    "none" if self._baseline is None else f"none beat baseline {self._baseline:g}"
                )
            else:
                best = f"{self._best:g} at global step {self._best_step}"
            logger.info(
                "Early stopping at global step %d: %s did not improve by more than %g "
                "in %d evaluations (every %d steps); best: %s.",
                step,
                self._name,
                self._min_delta,
                self._patience,
                self._every_n,
                best,
            )
        run_context.request_stop()

    def _is_improvement(self, value: float) -> bool:
        reference = self._best if self._best is not None else self._baseline
        if math.isnan(value):
            return False
        if reference is None:
            return True
        if self._mode == "min":
            return value < reference - self._min_delta
        return value > reference + self._min_delta

    def _to_float(self, value: Any) -> float:
        array = np.asarray(value)
        if not self._checked:
            _check_dtype_and_shape(array.dtype, array.shape, f"the value of {self._name!r}")
        return float(array.reshape(()))

    # Resolving the monitor.

    def _graph_fetch(self) -> Any:
        monitor = self._monitor
        graph = tf.compat.v1.get_default_graph()
        if isinstance(monitor, str):
            name = monitor if ":" in monitor else f"{monitor}:0"
            try:
                element = graph.as_graph_element(name)
            except (KeyError, ValueError) as error:
                raise ValueError(
                    f"{_HOOK}: monitor {monitor!r} names no tensor of the default graph "
                    f"({error}). Name the tensor, e.g. tf.identity(loss, name='loss')."
                ) from error
            if not isinstance(element, tf.Tensor):
                raise ValueError(
                    f"{_HOOK}: monitor {monitor!r} names {element!r}, not a tensor of the "
                    "default graph."
                )
            _check_dtype_and_shape(element.dtype, element.shape, f"tensor {element.name!r}")
            return element
        if isinstance(monitor, (tf.Tensor, tf.Variable)):
            if monitor.graph is not graph:
                raise ValueError(
                    f"{_HOOK}: monitor {self._name!r} belongs to another graph than the "
                    "session's; build the hook in the graph of the training program."
                )
            return monitor
        raise TypeError(
            f"{_HOOK}: a callable monitor only works in eager mode; in graph mode pass the "
            f"metric tensor or its name, got {monitor!r}."
        )

    def _eager_fetch(self) -> Any:
        monitor = self._monitor
        if isinstance(monitor, tf.Tensor):
            raise TypeError(
                f"{_HOOK}: in eager mode monitor cannot be a tensor computed outside the step "
                "(its value never changes); pass the name of an entry of the mapping the "
                "step returns, e.g. 'loss', a tf.Variable or a zero-argument callable."
            )
        return monitor
