"""Eager mode: the session owns the global step when the program did not create one.

A `MonitoredSession` created in eager mode without a global step creates it
and *owns* it: every step it runs then advances the global step by one on
the device, inside the same call and without a host read, unless the step
advanced it itself (counted once). The variable is also added to the
`tf.train.Checkpoint` the session restores and saves, so a restart resumes
at the saved step. A program that creates the global step keeps managing it.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

import tensorflow as tf

from monsession._api._global_step import get_global_step, get_or_create_global_step
from monsession._api._types import Results

_P = ParamSpec("_P")
_R = TypeVar("_R")

# The name under which an owned global step joins the user's checkpoint.
CHECKPOINT_NAME = "monsession_global_step"

# The owned global steps by id (variables are not hashable).
_OWNED: weakref.WeakValueDictionary[int, Any] = weakref.WeakValueDictionary()
_WRAPPED: weakref.WeakKeyDictionary[Any, tuple[Any, Callable[..., Any]]] = (
    weakref.WeakKeyDictionary()
)


def own_global_step_if_missing() -> bool:
    """Creates the global step, owned by the sessions, if there is none; returns whether."""
    if get_global_step() is not None:
        return False
    get_or_create_global_step()
    # The collection's variable: under ParameterServerStrategy the one
    # returned is a wrapper (a `CachingVariable`) that nothing else holds.
    variable = get_global_step()
    _OWNED[id(variable)] = variable
    return True


def owned_global_step() -> tf.Variable | None:
    """The global step if the sessions own it, else `None`."""
    variable = get_global_step()
    return variable if variable is not None and _OWNED.get(id(variable)) is variable else None


def add_to_checkpoint(checkpoint: tf.train.Checkpoint | tf.train.CheckpointManager | None) -> None:
    """Adds an owned global step to `checkpoint` (a `tf.train.Checkpoint`), once."""
    variable = owned_global_step()
    if variable is not None and isinstance(checkpoint, tf.train.Checkpoint):
        if getattr(checkpoint, CHECKPOINT_NAME, None) is not variable:
            setattr(checkpoint, CHECKPOINT_NAME, variable)


def advancing(step: Callable[_P, _R], variable: tf.Variable) -> Callable[_P, _R]:
    """`step` wrapped to advance `variable` by one per call unless the step did.

    A `tf.function` gets a `tf.function` wrapper (cached per step): the
    comparison and the increment run on the device in the same call. Another
    callable gets a Python wrapper doing the same with eager ops.
    """
    cached = _WRAPPED.get(step)
    if cached is not None and cached[0] is variable:
        return cached[1]
    if isinstance(step, tf.types.experimental.PolymorphicFunction):
        traced = weakref.ref(step)  # Called only while tracing: the cache's key stays weak.

        @tf.function
        def advanced(*args: _P.args, **kwargs: _P.kwargs) -> _R:
            before = variable.read_value()
            outputs = traced()(*args, **kwargs)  # type: ignore[misc]
            _advance_unless_moved(variable, before, outputs)
            return outputs

        wrapper: Callable[_P, _R] = advanced
    else:

        def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
            before = variable.read_value()
            outputs = step(*args, **kwargs)
            _advance_eagerly(variable, before)
            return outputs

    _WRAPPED[step] = (variable, wrapper)
    return wrapper


def _advance_unless_moved(variable: tf.Variable, before: tf.Tensor, outputs: Results) -> None:
    """Adds one to `variable` after `outputs` are computed, unless it moved from `before`."""
    after_step = [t for t in tf.nest.flatten(outputs) if isinstance(t, tf.Tensor)]
    with tf.control_dependencies(after_step):
        unchanged = tf.equal(variable.read_value(), before)
        variable.assign_add(tf.cast(unchanged, variable.dtype))


@tf.function
def _advance_eagerly(variable: tf.Variable, before: tf.Tensor) -> None:
    _advance_unless_moved(variable, before, ())
