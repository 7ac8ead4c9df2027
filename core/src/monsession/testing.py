"""Helpers for testing hooks, for hook-package authors.

    import monsession.testing

    with tf.compat.v1.Session() as sess:
        hooked = monsession.testing.hooked_session(sess, [MyHook()])
        hooked.run(train_op)

The same harness TensorFlow's own hook tests use (a hooked session without
the monitored session's creation, recovery and close), made public so that
families need no private API of core.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from monsession._hook_api import SessionRunHook


def hooked_session(session: Any, hooks: Iterable[SessionRunHook]) -> Any:
    """Wraps `session` so that every `run()` calls the hooks around it.

    Each `run()` calls `before_run()`, one merged step and `after_run()` of
    `hooks`, exactly as inside a `MonitoredSession`, with the step service
    (`run_context.global_step`). `begin()`, `after_create_session()` and
    `end()` are not called: call them yourself to drive a hook's whole life.

    Args:
      session: A `tf.compat.v1.Session` (graph mode) or a
        `monsession.EagerSession` (eager mode).
      hooks: The hooks, called in order.

    Returns:
      An object with `run(fetches, feed_dict=None, options=None,
      run_metadata=None)` and `should_stop()`.
    """
    from monsession._session_layers import _HookedSession

    return _HookedSession(session, list(hooks))
