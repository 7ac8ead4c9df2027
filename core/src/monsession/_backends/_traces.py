"""Eager mode: calling a `tf.function` straight through the trace it already has.

Each call of a `tf.function` binds its arguments and looks its trace up
before it runs it: on a small step that is a third of the call. A session
calls the same functions on every step (the step, the fused loop), so
`Traces` keeps, per session, the concrete function of each one it calls and
calls that. It looks the trace up again when the function was traced again
(`experimental_get_tracing_count`); each session looks traces up in its own
context (device, strategy). The first call of a function, which traces it
and creates its variables, and calls while `tf.config.run_functions_eagerly`
is on, go through the `tf.function` as usual.
"""

from __future__ import annotations

import inspect
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

import tensorflow as tf

_R = TypeVar("_R")


class Traces:
    """The traces of the `tf.function`s one session calls (see the module docstring)."""

    def __init__(self) -> None:
        # Each function's tracing count when looked up, and its trace (`None`:
        # it takes parameters the call leaves to their defaults).
        self._traces: weakref.WeakKeyDictionary[Any, tuple[int, Any]] = weakref.WeakKeyDictionary()

    def call(self, fn: Callable[..., _R], *tensors: tf.Tensor) -> _R:
        """`fn(*tensors)`; for a `tf.function` called before, through its trace.

        Args:
          fn: Any callable.
          tensors: Nothing, or tensors matching the `input_signature` of a
            `tf.function` exactly.
        """
        if (
            not isinstance(fn, tf.types.experimental.PolymorphicFunction)
            or tf.config.functions_run_eagerly()
        ):
            return fn(*tensors)
        traces = fn.experimental_get_tracing_count()
        cached = self._traces.get(fn)
        if cached is None or cached[0] != traces:
            if traces == 0:
                return fn(*tensors)  # The first call traces (and creates variables).
            direct = (
                None if not tensors and _has_parameters(fn) else fn.get_concrete_function(*tensors)
            )
            cached = self._traces[fn] = (traces, direct)
        return fn(*tensors) if cached[1] is None else cached[1](*tensors)


def _has_parameters(fn: tf.types.experimental.PolymorphicFunction) -> bool:
    """Whether the Python function of `fn` names parameters (besides `*args`, `**kwargs`).

    A call without arguments leaves them to their defaults; a tensor default
    is an input of the trace, which `get_concrete_function()` without
    arguments cannot bind.
    """
    try:
        parameters = inspect.signature(fn.python_function).parameters.values()
    except (AttributeError, TypeError, ValueError):
        return True
    return any(p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in parameters)
