"""Eager mode: calling a `tf.function` straight through the trace it already has.

Each call of a `tf.function` binds its arguments, looks its trace up, and
binds and casts them again to the trace's signature before it runs it: on
a small step that is a third of the call. A session calls the same
functions on every step (the step, the fused loop), so `Traces` keeps, per
session, the concrete function of each one it calls and calls that with
the tensors of its inputs alone (`_tf_compat.flat_call`). A step called
with tensors (`sess.call(step, x, y)`, a batch `Epochs.run` pulled on the
host) is called through the trace of its arguments' dtypes and shapes once
one served them; a new signature goes through the `tf.function`, which
traces it if it must. It looks the traces up again when the function was
traced again (`experimental_get_tracing_count`); each session looks traces
up in its own context (device, strategy). The first call of a function,
which traces it and creates its variables, and calls while
`tf.config.run_functions_eagerly` is on, go through the `tf.function` as
usual.
"""

from __future__ import annotations

import inspect
import weakref
from collections.abc import Callable
from typing import Any, TypeGuard, TypeVar

import tensorflow as tf

from monsession._api._types import FeedValue
from monsession._tf_compat import eager_tensor_base_class, flat_call

_R = TypeVar("_R")

_MAX_SIGNATURES = 32  # Traces kept per function for calls with tensors.

_Signature = tuple[tuple[tf.DType, tuple[int, ...]], ...]


class Traces:
    """Calls `tf.function`s straight through the traces they already have.

    A session keeps one; a hook package calling a step of its own on every
    run (as `NanTensorHook.watch` does) keeps one per step. A call binds no
    arguments and looks up no trace when one served the same call before;
    a first call, a new argument signature and anything that is not a
    `tf.function` go through the usual call. See the module docstring.
    """

    def __init__(self) -> None:
        # Each function's tracing count when looked up, and its trace (`None`:
        # it takes parameters the call leaves to their defaults).
        self._traces: weakref.WeakKeyDictionary[Any, tuple[int, Any]] = weakref.WeakKeyDictionary()
        # Each function's tracing count, and its traces by the signature of tensor arguments.
        self._by_signature: weakref.WeakKeyDictionary[
            Any, tuple[int, dict[_Signature, Callable[..., Any]]]
        ] = weakref.WeakKeyDictionary()
        # Per function: a count of positional tensors, and whether they fill its parameters.
        self._binds: weakref.WeakKeyDictionary[Any, tuple[int, bool]] = weakref.WeakKeyDictionary()

    def call(self, fn: Callable[..., _R], *tensors: tf.Tensor) -> _R:
        """`fn(*tensors)`; for a `tf.function` called before, through its trace.

        Args:
          fn: Any callable.
          tensors: Nothing, or tensors matching the `input_signature` of a
            `tf.function` exactly.
        """
        if not _traced(fn):
            return fn(*tensors)
        traces = fn.experimental_get_tracing_count()
        cached = self._traces.get(fn)
        if cached is None or cached[0] != traces:
            if traces == 0:
                return fn(*tensors)  # The first call traces (and creates variables).
            direct = (
                None
                if not tensors and _has_parameters(fn)
                else flat_call(fn.get_concrete_function(*tensors))
            )
            cached = self._traces[fn] = (traces, direct)
        return fn(*tensors) if cached[1] is None else cached[1](*tensors)

    def call_with(self, fn: Callable[..., _R], args: tuple[FeedValue, ...]) -> _R:
        """`fn(*args)`; for a `tf.function` given eager tensors, through the trace of their
        dtypes and shapes once a call with them ran (see the module docstring)."""
        if not _traced(fn) or not all(isinstance(arg, _EAGER_TENSOR) for arg in args):
            return fn(*args)
        traces = fn.experimental_get_tracing_count()
        by_signature = self._signatures(fn, traces, len(args))
        if by_signature is None:
            return fn(*args)
        signature = tuple((arg.dtype, tuple(arg.shape)) for arg in args)  # type: ignore[attr-defined]
        direct = by_signature.get(signature)
        if direct is not None:
            result: _R = direct(*args)
            return result
        result = fn(*args)  # Traces it for these arguments if it must.
        if fn.experimental_get_tracing_count() == traces and len(by_signature) < _MAX_SIGNATURES:
            by_signature[signature] = flat_call(fn.get_concrete_function(*args))
        return result

    def _signatures(
        self, fn: tf.types.experimental.PolymorphicFunction, traces: int, count: int
    ) -> dict[_Signature, Callable[..., Any]] | None:
        """`fn`'s traces by signature, forgotten when it was traced again since (`traces`).

        `None` when `count` positional tensors do not fill its parameters.
        """
        cached = self._by_signature.get(fn)
        if cached is not None and cached[0] == traces:
            return cached[1]
        known = self._binds.get(fn)
        if known is None or known[0] != count:
            known = self._binds[fn] = (count, _binds_positionally(fn, count))
        if not known[1]:
            return None
        cached = self._by_signature[fn] = (traces, {})
        return cached[1]


def _traced(fn: Callable[..., _R]) -> TypeGuard[tf.types.experimental.PolymorphicFunction]:
    """Whether `fn` is a `tf.function` that runs as one (not eagerly)."""
    return (
        isinstance(fn, tf.types.experimental.PolymorphicFunction)
        and not tf.config.functions_run_eagerly()
    )


_EAGER_TENSOR = eager_tensor_base_class()  # Not `type(tf.constant(0))`: may run in a graph.


def _binds_positionally(fn: tf.types.experimental.PolymorphicFunction, count: int) -> bool:
    """Whether `count` positional arguments fill every parameter of `fn`'s Python function.

    A parameter left to its default may be a tensor, an input of the trace
    that a call of the concrete function with the arguments alone cannot bind.
    """
    try:
        parameters = list(inspect.signature(fn.python_function).parameters.values())
    except (AttributeError, TypeError, ValueError):
        return False
    named = [p for p in parameters if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    if any(p.kind is p.KEYWORD_ONLY or p.default is not p.empty for p in named):
        return False
    varargs = any(p.kind is p.VAR_POSITIONAL for p in parameters)
    return len(named) == count or (varargs and len(named) <= count)


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
