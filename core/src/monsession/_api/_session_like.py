"""`SessionLike`: the session a hook is given, as a type; `in_eager_mode`: its mode."""

from __future__ import annotations

from typing import Any, Protocol


class SessionLike(Protocol):
    """The session a hook is given: an object with `run(fetches, feed_dict=None)`.

    A `tf.compat.v1.Session` in graph mode (or TensorFlow's session wrappers),
    monsession's session in eager mode; what `run` takes and returns is that
    session's (see `MonitoredSession.run`).
    """

    def run(self, fetches: Any, feed_dict: Any = None) -> Any:
        """Runs `fetches` (feeding `feed_dict`) and returns their values."""


def in_eager_mode(session: SessionLike | None = None) -> bool:
    """Whether a hook works for an eager session: monsession's `tf.executing_eagerly()`.

    It answers from the session's mode. Given the session a hook is handed
    (`after_create_session`, `run_context.session`, `end`): that session's
    mode, also where TensorFlow's differs (a graph session run outside its
    ``with graph.as_default():`` block). Without one (a constructor,
    `begin()`): the mode of the program around the call, the mode a session
    created there gets, also while a `tf.function` of an eager program is
    being traced.

    Args:
      session: The session a hook was handed (a `tf.compat.v1.Session`,
        TensorFlow's session wrappers, or monsession's), or `None`.

    Returns:
      `True` for an eager session (or program), `False` in graph mode.
    """
    import tensorflow as tf  # Not at import: `import monsession` imports no TensorFlow.

    if session is not None:
        # Graph sessions (TensorFlow's, its wrappers, monsession's) hold their graph.
        return getattr(session, "graph", None) is None
    if tf.executing_eagerly():
        return True
    if not tf.inside_function():
        return False
    with tf.init_scope():  # Out of every function being traced: the program's own mode.
        return bool(tf.executing_eagerly())
