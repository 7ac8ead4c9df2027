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

    A hook whose work differs by nature between the modes asks this, not
    TensorFlow, because it answers from the session's mode:

    * given the session a hook is handed (`after_create_session`,
      `run_context.session`, `end`): that session's mode, wherever the hook
      runs. A graph-mode session built inside ``with graph.as_default():``
      is in graph mode also when it runs outside that block, where
      `tf.executing_eagerly()` is true;
    * without a session (a hook's constructor or `begin()`): the mode of the
      program around the code, as a session created here gets it. Code that
      is being traced into a `tf.function` of an eager program is in eager
      mode, where `tf.executing_eagerly()` is false.

    ```python
    def begin(self):
        if monsession.plugins.in_eager_mode():
            ...  # e.g. trace with the TF2 profiler

    def after_create_session(self, session, coord):
        eager = monsession.plugins.in_eager_mode(session)
    ```

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
