"""The global step, in graph and eager mode."""

from __future__ import annotations

import tensorflow as tf

from monsession import _tf_compat
from monsession._api._session_like import SessionLike


def get_or_create_global_step(graph: tf.Graph | None = None) -> tf.Variable:
    """Returns the global step variable, creating it if needed.

    The same `int64` variable in graph mode (in `graph` or the default graph)
    and in eager mode. In eager mode the step function increments it, e.g.
    ``global_step.assign_add(1)``, and the `tf.train.Checkpoint` holds it so
    that a restart resumes at the saved step.
    """
    return tf.compat.v1.train.get_or_create_global_step(graph)


def get_global_step(graph: tf.Graph | None = None) -> tf.Variable | None:
    """Returns the global step variable, or `None` if there is none."""
    return tf.compat.v1.train.get_global_step(graph)


def _missing(user: str) -> RuntimeError:
    return RuntimeError(
        f"Global step should be created to use {user}: call "
        "monsession.get_or_create_global_step() before creating the session."
    )


def require_global_step(user: str) -> tf.Variable:
    """Returns the global step variable; raises if there is none.

    Hooks that follow the global step call it in `begin()`, so a missing
    global step is reported before the session exists.

    Args:
      user: The hook's name, for the message.

    Raises:
      RuntimeError: If there is no global step.
    """
    variable = get_global_step()
    if variable is None:
        raise _missing(user)
    return variable


def read_global_step(session: SessionLike) -> int:
    """Reads the current global step through `session`, as a host integer.

    For `after_create_session()` and `end()`, where no run context exists;
    during a run use `SessionRunContext.global_step`, which costs no read.

    Args:
      session: The session a hook was given (graph or eager mode).

    Raises:
      RuntimeError: If there is no global step.
    """
    graph = getattr(session, "graph", None)
    fetch = None if graph is None else _tf_compat.existing_global_step_read_tensor(graph)
    if fetch is None:
        fetch = get_global_step(graph)
    if fetch is None:
        raise _missing("read_global_step")
    return int(session.run(fetch))
