"""The global step, in graph and eager mode."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from monsession import _tf_compat
from monsession._api._types import SessionLike, in_eager_mode

_NAME = "global_step"  # The variable's name and its collection's key (tf.compat.v1.GraphKeys).


def global_step(sess: SessionLike | None, global_step_tensor: Any) -> int:
    """Returns the value of `global_step_tensor` as a Python `int`.

    As `tf.compat.v1.train.global_step`: read with ``sess.run`` in graph mode
    (`global_step_tensor` may then name the tensor), from the variable itself
    in eager mode (`sess` is then not used).
    """
    if in_eager_mode(sess):
        return int(global_step_tensor.numpy())
    if sess is None:
        raise TypeError(
            "global_step(sess, global_step_tensor): sess is None; in graph mode pass the "
            "session to read the global step through."
        )
    return int(sess.run(global_step_tensor))


def assert_global_step(global_step_tensor: Any) -> None:
    """Checks that `global_step_tensor` is a scalar integer `Variable` or `Tensor`.

    As `tf.compat.v1.train.assert_global_step`; a tensor of unknown shape
    passes.

    Raises:
      TypeError: If it is not a `Variable` or `Tensor`, not of an integer
        type, or known not to be a scalar.
    """
    if not isinstance(global_step_tensor, (tf.Variable, tf.Tensor)):
        raise TypeError(
            f'Existing "global_step" must be a Variable or Tensor: {global_step_tensor}.'
        )
    dtype = global_step_tensor.dtype.base_dtype
    if not dtype.is_integer:
        raise TypeError(f'Existing "global_step" does not have integer type: {dtype}')
    shape = global_step_tensor.shape
    if shape.ndims != 0 and shape.is_fully_defined():
        raise TypeError(f'Existing "global_step" is not scalar: {shape}')


def get_global_step(graph: tf.Graph | None = None) -> Any:
    """Returns the global step variable, or `None` if there is none.

    As `tf.compat.v1.train.get_global_step`: the one item of the
    ``global_step`` collection of `graph` (default: the default graph), else
    the tensor named ``global_step:0``. Several items in the collection log
    an error and give `None`.

    Raises:
      TypeError: If what is found is not a scalar integer (`assert_global_step`).
    """
    graph = graph or tf.compat.v1.get_default_graph()
    found = graph.get_collection(_NAME)
    if len(found) > 1:
        _tf_compat.tf_logging().error("Multiple tensors in global_step collection.")
        return None
    if found:
        variable = found[0]
    else:
        try:
            variable = graph.get_tensor_by_name(f"{_NAME}:0")
        except KeyError:
            return None
    assert_global_step(variable)
    return variable


def create_global_step(graph: tf.Graph | None = None) -> tf.Variable:
    """Creates the global step variable in `graph` (default: the default graph).

    As `tf.compat.v1.train.create_global_step`: a scalar `int64` variable
    named ``global_step``, initialized to 0, not trainable, aggregated from
    the first replica only, in the global-variables and ``global_step``
    collections, outside any name scope; in eager mode it is placed on the
    CPU.

    Raises:
      ValueError: If `graph` already has a global step.
    """
    graph = graph or tf.compat.v1.get_default_graph()
    if get_global_step(graph) is not None:
        raise ValueError('"global_step" already exists.')
    settings = {
        "shape": [],
        "dtype": tf.int64,
        "initializer": tf.compat.v1.zeros_initializer(),
        "trainable": False,
        "aggregation": tf.VariableAggregation.ONLY_FIRST_REPLICA,
        "collections": [tf.compat.v1.GraphKeys.GLOBAL_VARIABLES, _NAME],
    }
    if tf.executing_eagerly():
        with tf.device("cpu:0"):
            return tf.compat.v1.get_variable(_NAME, **settings)
    with graph.as_default(), graph.name_scope(None):
        return tf.compat.v1.get_variable(_NAME, **settings)


def get_or_create_global_step(graph: tf.Graph | None = None) -> tf.Variable:
    """Returns the global step variable (in `graph` or the default graph), creating it if needed.

    The same `int64` variable in both modes. In eager mode the step function
    increments it (``global_step.assign_add(1)``), and the `tf.train.Checkpoint`
    holds it so that a restart resumes at the saved step.
    """
    graph = graph or tf.compat.v1.get_default_graph()
    variable = get_global_step(graph)
    return create_global_step(graph) if variable is None else variable


def _missing(user: str) -> RuntimeError:
    return RuntimeError(
        f"Global step should be created to use {user}: call "
        "monsession.get_or_create_global_step() before creating the session."
    )


def require_global_step(user: str) -> tf.Variable:
    """Returns the global step variable, or a `RuntimeError` naming `user` (a hook) if none.

    Hooks that follow the global step call it in `begin()`, so a missing
    global step is reported before the session exists.
    """
    variable = get_global_step()
    if variable is None:
        raise _missing(user)
    return variable


def read_global_step(session: SessionLike) -> int:
    """Reads the current global step through `session` (a hook's), as a host integer.

    For `after_create_session()` and `end()`, where no run context exists;
    during a run use `SessionRunContext.global_step`, which costs no read.
    `RuntimeError` if there is no global step.
    """
    graph = getattr(session, "graph", None)
    fetch = None if graph is None else _tf_compat.global_step_read_tensor(graph, create=False)
    if fetch is None:
        fetch = get_global_step(graph)
    if fetch is None:
        raise _missing("read_global_step")
    return int(session.run(fetch))
