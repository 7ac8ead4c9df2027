"""What hooks fetch: resolving and checking the tensors they name, in both modes.

Hooks that watch a value (`LoggingTensorHook`, `NanTensorHook`, an early
stopping hook...) take a tensor, a name or, in eager mode, a callable.
`resolve_fetch` (`_mode.py`, by mode) turns that into what the hook returns in `SessionRunArgs`,
checked in `begin()` so that bad input fails before training starts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import tensorflow as tf

from monsession._api._types import Fetches, Unchecked

if TYPE_CHECKING:
    import numpy as np


class TensorNotFoundError(KeyError, ValueError):
    """A hook names a tensor that is not in the graph.

    A `KeyError` as in TensorFlow, and a `ValueError` like other bad input.
    """

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def resolve_eager_fetch(owner: str, argument: str, target: Unchecked) -> Fetches:
    """`resolve_fetch` in eager mode."""
    if isinstance(target, (str, tf.Variable, tf.Tensor)) or callable(target):
        return target
    raise TypeError(
        f"{owner}: in eager mode {argument} must be the name of an entry of the mapping "
        "the step returns, a tf.Variable, a tensor or a zero-argument callable; got "
        f"{target!r}."
    )


def resolve_graph_fetch(owner: str, argument: str, target: Unchecked) -> Fetches:
    """`resolve_fetch` in graph mode, under the session's graph."""
    graph = tf.compat.v1.get_default_graph()
    if isinstance(target, str):
        return _graph_element(owner, argument, graph, target)
    if callable(target) and not isinstance(target, (tf.Tensor, tf.Variable, tf.Operation)):
        raise TypeError(
            f"{owner}: a callable {argument} only works in eager mode; in graph mode pass "
            f"the tensor or its name, got {target!r}."
        )
    if getattr(target, "graph", None) is not graph:
        raise ValueError(
            f"{owner}: {argument} {target!r} belongs to another graph than the session's "
            f"({graph}); create the hook's tensors in the graph the session runs."
        )
    return target


def _graph_element(
    owner: str, argument: str, graph: tf.Graph, name: str
) -> tf.Tensor | tf.Operation:
    full_name = name if ":" in name else f"{name}:0"
    try:
        element = graph.as_graph_element(full_name)
    except (KeyError, ValueError) as error:
        reason = error.args[0] if error.args else error
        raise TensorNotFoundError(
            f"{owner}: {argument} {name!r} names no tensor of the graph. {reason}"
        ) from None
    if ":" not in name and _exists(graph, f"{name}:1"):
        raise ValueError(
            f"{owner}: the name {name!r} is ambiguous, as this operation has multiple "
            f"outputs (at least 2); name one of them, e.g. {full_name!r}."
        )
    return element


def _exists(graph: tf.Graph, name: str) -> bool:
    try:
        graph.as_graph_element(name)
    except (KeyError, ValueError):
        return False
    return True


def check_scalar(
    owner: str,
    argument: str,
    what: str,
    dtype: tf.dtypes.DType | np.dtype,
    shape: tf.TensorShape | Sequence[int | None] | None,
    *,
    floating: bool = True,
) -> None:
    """Raises unless `dtype` and `shape` describe one number.

    Args:
      owner: The hook's name, for messages.
      argument: The constructor argument the value came from.
      what: What has this dtype and shape, e.g. ``"tensor 'loss:0'"``.
      dtype: A dtype (TensorFlow or NumPy).
      shape: A shape; unknown dimensions pass, more than one element fails.
      floating: Require a floating dtype; otherwise any integer or float.

    Raises:
      TypeError: If the dtype is not a number type (or not floating).
      ValueError: If the shape holds more than one element.
    """
    dtype = tf.as_dtype(dtype)
    numeric = dtype.is_floating or (not floating and dtype.is_integer and not dtype.is_bool)
    if not numeric:
        kind = "float" if floating else "numeric"
        raise TypeError(
            f"{owner}: {argument} must be a scalar {kind} tensor; {what} has dtype {dtype.name}."
        )
    known = tf.TensorShape(shape)
    if known.rank is not None and known.num_elements() not in (None, 1):
        raise ValueError(
            f"{owner}: {argument} must be a scalar; {what} has shape {known.as_list()}. "
            "Reduce it to a scalar, e.g. with tf.reduce_mean."
        )
