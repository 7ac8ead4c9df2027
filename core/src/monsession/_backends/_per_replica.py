"""What a hook gets when it fetches a per-replica value of `strategy.run`.

A `tf.distribute` step returns `strategy.run(...)`'s result as it is: one
value per replica (`PerReplica`). A hook asks for one value, so core gives
it one, by a fixed rule over the replicas of this process:

* floating-point (and complex) values: the element-wise mean, so a NaN or an
  infinity on any replica shows in it (`NanTensorHook` then catches it);
* any other value (integers, booleans, strings): the value, if every replica
  holds the same one; otherwise a `ValueError` that says to reduce it in the
  step (`strategy.reduce(...)`).

`host_value` applies it for a hook's fetch, on the host; `replica_value`
on the device, for what stays there (the fused loop's kept outputs, a loss a
hook keeps to check later).
"""

from __future__ import annotations

from typing import TypeVar

import numpy as np
import tensorflow as tf

from monsession._api._types import Fetches, Results
from monsession._backends._eager import to_numpy
from monsession._tf_compat import local_replica_values

_T = TypeVar("_T")


def is_per_replica(value: Results) -> bool:
    """Whether `value` holds one value per replica (a synced variable is one value)."""
    return isinstance(value, tf.distribute.DistributedValues) and not isinstance(value, tf.Variable)


def host_value(
    value: tf.distribute.DistributedValues, hook_name: str, fetch: Fetches
) -> np.ndarray | np.generic:
    """One NumPy value for a per-replica `value`, by the rule of this module.

    Args:
      value: A `tf.distribute.DistributedValues` that is not a variable.
      hook_name: The hook that fetched it, for the error.
      fetch: What the hook fetched (e.g. ``"loss"``), for the error.

    Raises:
      ValueError: If non-floating values differ between replicas.
    """
    replicas = [np.asarray(to_numpy(item)) for item in local_replica_values(value)]
    first = replicas[0]
    if np.issubdtype(first.dtype, np.inexact):
        return np.mean(np.stack(replicas), axis=0).astype(first.dtype)[()]
    if all(item.shape == first.shape and np.array_equal(item, first) for item in replicas):
        return first[()]
    raise ValueError(
        f"{hook_name} fetches {fetch!r}, a per-replica value of strategy.run whose "
        f"{len(replicas)} replicas differ ({', '.join(str(item) for item in replicas)}), and "
        f"its dtype ({first.dtype}) has no mean. Reduce it in the step, e.g. "
        "strategy.reduce(tf.distribute.ReduceOp.SUM, value, axis=None), and return that."
    )


def replica_value(value: _T, what: str) -> _T | tf.Tensor:
    """One tensor for a per-replica `value`, on the device, by the rule of this module.

    A hook that takes a step's outputs itself (not as fetches), e.g. to keep
    them on the device, gets one value per step as fetches do. Works inside a
    `tf.function` too. Any other value is returned as it is.

    ```python
    loss = monsession.plugins.replica_value(outputs["loss"], "MyHook keeps 'loss'")
    ```

    Args:
      value: A step output.
      what: Who takes it, for the error, e.g. ``"MyHook keeps the step's 'loss'"``.

    Returns:
      The mean over this process's replicas of a floating-point value; the
      value every replica holds otherwise.

    Raises:
      tf.errors.InvalidArgumentError: If non-floating values differ between
        replicas (when the value is computed).
    """
    if not is_per_replica(value):
        return value
    replicas = local_replica_values(value)
    first = replicas[0]
    if first.dtype.is_floating or first.dtype.is_complex:
        return tf.reduce_mean(tf.stack(replicas), axis=0)
    message = (
        f"{what}: a per-replica value of strategy.run whose replicas differ, and whose dtype "
        "has no mean. Reduce it in the step, e.g. strategy.reduce(tf.distribute.ReduceOp.SUM, "
        "value, axis=None), and return that."
    )
    checks = [tf.debugging.assert_equal(item, first, message=message) for item in replicas[1:]]
    with tf.control_dependencies(checks):
        return tf.identity(first)
