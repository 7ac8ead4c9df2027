"""`StepContext`: what a `step_fn` given to `run_step_fn()` can do."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class StepContext:
    """Control over one step inside `MonitoredSession.run_step_fn()`.

    Args:
      session: The raw session: `run()` on it runs no hooks.
      run_with_hooks_fn: Runs a step with the hooks, like `MonitoredSession.run`.
    """

    def __init__(self, session: Any, run_with_hooks_fn: Callable[..., Any]) -> None:
        self._session = session
        self._run_with_hooks_fn = run_with_hooks_fn

    @property
    def session(self) -> Any:
        """The raw session (a `tf.compat.v1.Session`, or `EagerSession` in eager mode)."""
        return self._session

    def run_with_hooks(self, *args: object, **kwargs: object) -> Any:
        """Same as `MonitoredSession.run`, with the same arguments."""
        return self._run_with_hooks_fn(*args, **kwargs)

    def request_stop(self) -> None:
        """Ends `step_fn` and makes `should_stop()` true.

        Raises:
          StopIteration: Always; `run_step_fn` lets it through and the `with`
            block of the monitored session ends cleanly.
        """
        raise StopIteration("step_fn has requested the iterations to stop.")
