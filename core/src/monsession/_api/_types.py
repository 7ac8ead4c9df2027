"""The values that cross core's seams, named once for every module, and `SessionLike`.

TensorFlow has no type stubs, so its tensors and functions are `Any` to the
type checker. The values below are open by nature (a user's nested fetches,
a hook's saved state): each alias is `object`, which the checker makes every
use narrow, and its name says what the value is. Nothing here imports
TensorFlow until `in_eager_mode` is called.
"""

from __future__ import annotations

from typing import Any, Protocol, TypeAlias

Fetches: TypeAlias = object
"""What a run fetches.

Graph mode: a tensor, an operation or its name, or a nested structure of
them (lists, tuples, namedtuples, dicts). Eager mode: the step, a callable
or a nested structure whose leaves are callables, variables or tensors.
"""

Results: TypeAlias = object
"""What a run gives back for its `Fetches`, in their structure."""

FeedKey: TypeAlias = object
"""A key of a run's feeds: a tensor or its name (graph), a keyword (eager)."""

FeedValue: TypeAlias = object
"""A value fed to a run: under a `FeedKey`, or as an argument of the step."""

HookState: TypeAlias = object
"""A hook's `state_dict()`: a value that `json.dumps` writes and `json.loads` gives back."""

Unchecked: TypeAlias = object
"""A value as a user or a plugin gave it, before the function that takes it checks it."""


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
