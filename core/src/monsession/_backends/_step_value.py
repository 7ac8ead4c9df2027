"""Eager mode: the global step after a step, returned by the step's own call.

The step service checks its host count against the global step whenever a
hook reads the device. Reading the variable after the step is an eager op of
its own, which costs about as much as a small step's hooks (tens of µs after
a `tf.function` call on CPU). On such runs the session calls the step
through `returning_global_step`: a `tf.function` calling the step and then
reading the variable inside the same call, so the check copies one more
output to the host instead of running an op. Only plain variables outside
`tf.distribute` strategies (as the session is created), and only `tf.function`
steps already traced once (the first call creates their variables), are
called this way.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

import tensorflow as tf

from monsession._api._types import Results
from monsession._tf_compat import is_plain_resource_variable

_WRAPPED: weakref.WeakKeyDictionary[Any, tuple[Any, Callable[..., Any]]] = (
    weakref.WeakKeyDictionary()
)


def can_return_global_step(step: Callable[..., Results]) -> bool:
    """Whether `step` can be called through `returning_global_step`."""
    return (
        isinstance(step, tf.types.experimental.PolymorphicFunction)
        and step.experimental_get_tracing_count() > 0
    )


def reads_with_the_step(variable: tf.Variable | None) -> bool:
    """Whether steps can read `variable` inside their call (a plain variable, no strategy)."""
    return is_plain_resource_variable(variable) and not tf.distribute.has_strategy()


def returning_global_step(step: Any, variable: tf.Variable) -> Callable[..., Any]:
    """A `tf.function` returning `(step(*args), variable)` read after the step (cached per step)."""
    cached = _WRAPPED.get(step)
    if cached is not None and cached[0] is variable:
        return cached[1]
    wrapper = tf.function(_WithGlobalStep(step, variable), autograph=False, reduce_retracing=True)
    _WRAPPED[step] = (variable, wrapper)
    return wrapper


class _WithGlobalStep:
    """What `returning_global_step` traces: the step's call, then a read of the variable.

    A callable object rather than a closure: TensorFlow counts the traces of
    every `tf.function` made from one function's code together and warns of
    retracing; each object is counted on its own.
    """

    def __init__(self, step: Any, variable: tf.Variable) -> None:
        self._step = weakref.ref(step)  # Called only while tracing: the cache's key stays weak.
        self._variable = variable
        self.__name__ = getattr(step, "__name__", "step")

    def __call__(self, *args: Any) -> Any:
        # The call uses the variable, so the read is ordered after it.
        return self._step()(*args), self._variable.read_value()  # type: ignore[misc]
