"""The global step, in graph and eager mode; TensorFlow is imported when a function is called."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from monsession._api._types import SessionLike, in_eager_mode

if TYPE_CHECKING:
    import tensorflow as tf

_NAME = "global_step"  # The variable's name and its collection's key (tf.compat.v1.GraphKeys).


def global_step(sess: SessionLike | None, global_step_tensor: Any) -> int:
    """`tf.compat.v1.train.global_step`; in eager mode read from the variable, not `sess`."""
    if in_eager_mode(sess):
        return int(global_step_tensor.numpy())
    if sess is None:
        raise TypeError(
            "global_step(sess, global_step_tensor): sess is None; in graph mode pass the "
            "session to read the global step through."
        )
    return int(sess.run(global_step_tensor))


def assert_global_step(global_step_tensor: Any) -> None:
    """`tf.compat.v1.train.assert_global_step`: a scalar integer `Variable` or `Tensor`.

    A tensor of unknown shape passes; anything else raises `TypeError`.
    """
    import tensorflow as tf

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
    """`tf.compat.v1.train.get_global_step`: the global step variable, or `None`.

    The one item of the ``global_step`` collection, else the tensor
    ``global_step:0``; several items log an error and give `None`.
    """
    import tensorflow as tf

    from monsession import _tf_compat

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
    """`tf.compat.v1.train.create_global_step`; on the CPU in eager mode.

    Raises:
      ValueError: If `graph` already has a global step.
    """
    import tensorflow as tf

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
    """The global step variable, created if needed; the same `int64` variable in both modes."""
    variable = get_global_step(graph)
    return create_global_step(graph) if variable is None else variable


def _missing(user: str) -> RuntimeError:
    return RuntimeError(
        f"Global step should be created to use {user}: call "
        "monsession.get_or_create_global_step() before creating the session."
    )


def require_global_step(user: str) -> tf.Variable:
    """The global step variable, else a `RuntimeError` naming `user`; for `begin()`."""
    variable = get_global_step()
    if variable is None:
        raise _missing(user)
    return variable


def read_global_step(session: SessionLike) -> int:
    """The global step read through a hook's `session`, else `RuntimeError`.

    For `after_create_session()` and `end()`; during a run
    `SessionRunContext.global_step` costs no read.
    """
    from monsession import _tf_compat

    graph = getattr(session, "graph", None)
    fetch = None if graph is None else _tf_compat.global_step_read_tensor(graph, create=False)
    if fetch is None:
        fetch = get_global_step(graph)
    if fetch is None:
        raise _missing("read_global_step")
    return int(session.run(fetch))
