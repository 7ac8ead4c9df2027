"""The global step, in graph and eager mode."""

from __future__ import annotations

from typing import Any

import tensorflow as tf


def get_or_create_global_step(graph: Any = None) -> Any:
    """Returns the global step variable, creating it if needed.

    The same `int64` variable in graph mode (in `graph` or the default graph)
    and in eager mode. In eager mode the step function increments it, e.g.
    ``global_step.assign_add(1)``, and the `tf.train.Checkpoint` holds it so
    that a restart resumes at the saved step.
    """
    return tf.compat.v1.train.get_or_create_global_step(graph)


def get_global_step(graph: Any = None) -> Any:
    """Returns the global step variable, or `None` if there is none."""
    return tf.compat.v1.train.get_global_step(graph)


def global_step_read() -> Any:
    """What a hook fetches to learn the global step, or `None` if there is none.

    Graph mode: TensorFlow's shared read tensor of the global step, which
    holds the value from before the step's own increment. Eager mode: the
    variable, read after the step.
    """
    if tf.executing_eagerly():
        return get_global_step()
    from tensorflow.python.training import training_util

    return training_util._get_or_create_global_step_read()
