"""`SessionLike`: the session a hook is given, as a type."""

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
