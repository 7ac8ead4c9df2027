"""`EarlyStoppingHook`: stops training when a metric stops improving.

The hook looks at the metric after every run that reaches a global step that
is a multiple of `every_n_steps` (an *evaluation*). An evaluation that beats
the best value so far by more than `min_delta` is an improvement; after
`patience` evaluations in a row without one, the hook asks the session to
stop. On the other steps `before_run` returns `None`, so the session fetches
nothing for it: no extra fetch in graph mode, no read back to the host in
eager mode.

The hook never fetches the global step. It takes it from core's step
service at the first run of each session (`run_context.global_step`, an
exact read) and after each evaluation (`run_context.global_step_after()`,
exact in both modes), and counts one step per run in between. It does not
follow `run_context.global_step` on every run: in graph mode that is
TensorFlow's global-step read tensor of the previous run, which the step may
read before or after its own increment.

It uses only the public API of core, as any third-party hook package can.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

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


def _check_scalar(what: str, dtype: Any, shape: Any) -> None:
    """Raises unless `dtype` is a number type and `shape` may hold one element."""
    monsession.plugins.check_scalar(_HOOK, "monitor", what, dtype, shape, floating=False)


def _describe(monitor: Any) -> str:
    """A short name of the monitored metric for log lines and errors."""
    if isinstance(monitor, str):
        return monitor
    if isinstance(monitor, (tf.Tensor, tf.Variable)):
        return str(monitor.name)
    return getattr(monitor, "__qualname__", None) or repr(monitor)


def _check_monitor(monitor: Any) -> None:
    """Raises at construction for a monitor that can never be evaluated."""
    if isinstance(monitor, str):
        if not monitor:
            raise ValueError(
                f"{_HOOK}: monitor must not be an empty string; name the metric, e.g. 'loss'."
            )
        return
    if isinstance(monitor, tf.Tensor) and not tf.is_symbolic_tensor(monitor):
        raise TypeError(
            f"{_HOOK}: monitor cannot be a tensor computed outside the step (its value never "
            "changes); pass the name of an entry of the mapping the step returns, e.g. 'loss', "
            "a tf.Variable or a zero-argument callable."
        )
    if isinstance(monitor, (tf.Tensor, tf.Variable)):
        _check_scalar(repr(_describe(monitor)), monitor.dtype, monitor.shape)
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
      TypeError: If an argument has the wrong type, `monitor` is not a
        number, or `monitor` is a tensor computed outside the step (an
        eager tensor: its value never changes).
      ValueError: If an argument is out of range, or `monitor` is known not
        to be a scalar.

    `begin()` (the session's creation) raises for a monitor that does not
    fit the mode (see `monsession.plugins.resolve_fetch`): `TypeError` for a callable
    in graph mode, `monsession.plugins.TensorNotFoundError` (a `ValueError`) for a
    tensor name missing from the graph, `ValueError` for a tensor of another
    graph. A metric whose type or shape is not known before it runs (an
    entry of the mapping the step returns, a callable, a tensor of unknown
    shape) is read once at the first step, which raises if it is not a
    numeric scalar or, in eager mode, an entry the step does not return.
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
        self._step = 0  # The global step after the last run (runs, without one).
        self._synced = False  # Whether `_step` was taken from the step service.
        self._checked = False  # Whether the metric is known to be a numeric scalar.
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

    # Saved with each checkpoint (monsession.StatefulHook).

    def state_dict(self) -> dict[str, Any]:
        """The best value, its step, the evaluations without improvement, the stop step."""
        return {
            "monitor": self._name,
            "mode": self._mode,
            "best": self._best,
            "best_step": self._best_step,
            "wait": self._wait,
            "stopped_step": self._stopped_step,
        }

    def load_state_dict(self, state: Any) -> None:
        """Takes back a state from `state_dict()`, so that patience continues counting.

        Raises:
          ValueError: If the state is of another metric or mode, or malformed
            (the session then warns and the hook starts fresh).
        """
        if state.get("monitor") != self._name or state.get("mode") != self._mode:
            raise ValueError(
                f"{_HOOK}: the saved state is for monitor {state.get('monitor')!r} in mode "
                f"{state.get('mode')!r}, not {self._name!r} in mode {self._mode!r}."
            )
        best = state["best"]
        if best is not None and (isinstance(best, bool) or not isinstance(best, (int, float))):
            raise ValueError(f"{_HOOK}: the saved best value {best!r} is not a number.")
        for name in ("best_step", "stopped_step"):
            if state[name] is not None:
                _check_int(name, state[name], 0)
        wait = _check_int("wait", state["wait"], 0)
        self._best = None if best is None else float(best)
        self._best_step = state["best_step"]
        self._stopped_step = state["stopped_step"]
        self._wait = wait

    # The hook API.

    def begin(self) -> None:
        self._reset()
        self._step, self._synced = 0, False
        self._fetch = monsession.plugins.resolve_fetch(_HOOK, "monitor", self._monitor)
        self._checked = self._check_before_running(self._fetch)

    def after_create_session(self, session: Any, coord: Any) -> None:
        self._synced = False  # A new or recovered session: take the step again.

    def next_action(self, global_step: int) -> NextAction:
        """The run at which the metric is next evaluated (for fused steps)."""
        if not (self._synced and self._checked):
            return NextAction(steps=1)
        return NextAction(steps=self._every_n - global_step % self._every_n)

    def before_run(self, run_context: SessionRunContext) -> SessionRunArgs | None:
        run_context = as_run_context(run_context)
        self._step += run_context.silent_steps
        if not self._synced:
            step = run_context.global_step
            if step is not None:  # Without a global step, count runs since begin().
                self._step = step
            self._synced = True
        # This run takes the global step from `self._step` to `self._step + 1`.
        self._due = (self._step + 1) % self._every_n == 0
        # A metric that could not be checked in begin() is also read at the
        # first run, so that a wrong name or type fails at the first step
        # rather than at the first evaluation, possibly hours later.
        self._fetching = self._due or not self._checked
        return SessionRunArgs(self._fetch) if self._fetching else None

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        run_context = as_run_context(run_context)
        self._step += 1
        if not self._fetching:
            return
        value = self._to_float(run_values.results)
        self._checked = True
        if self._due:
            step = run_context.global_step_after()
            if step is not None:  # Exact, even if a run was not one step.
                self._step = step
            self._evaluate(value, self._step, run_context)

    # Evaluating.

    def _evaluate(self, value: float, step: int, run_context: SessionRunContext) -> None:
        if self._is_improvement(value):
            self._best, self._best_step, self._wait = value, step, 0
            tf_logging.debug("%s = %g at global step %d: improved.", self._name, value, step)
            return
        self._wait += 1
        tf_logging.debug(
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
            tf_logging.info(
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
            _check_scalar(f"the value of {self._name!r}", array.dtype, array.shape)
        return float(array.reshape(()))

    # Checking the monitor.

    def _check_before_running(self, fetch: Any) -> bool:
        """Checks what is known of `fetch` before it runs.

        Returns:
          Whether that settles it: a tensor or variable of known shape.
        """
        if not isinstance(fetch, (tf.Tensor, tf.Variable)):
            return False
        _check_scalar(f"tensor {fetch.name!r}", fetch.dtype, fetch.shape)
        return bool(fetch.shape.is_fully_defined())
