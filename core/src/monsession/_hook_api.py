"""The hook API: `SessionRunHook` and the values passed to its methods.

Nothing here imports TensorFlow, so hook classes can be defined and listed
without paying for it.
"""

from __future__ import annotations

from typing import Any, NamedTuple


class SessionRunHook:
    """Base class for hooks that extend calls to `MonitoredSession.run()`.

    A hook is notified at these points, in this order:

    * `begin()`: once, before the graph is finalized (graph mode) or before the
      session state is created (eager mode). Add ops to the graph here.
    * `after_create_session(session, coord)`: every time a session is created
      or re-created after a recoverable error.
    * `before_run(run_context)` / `after_run(run_context, run_values)`: around
      every `run()` call. `before_run` may return `SessionRunArgs` to add
      fetches, feeds or run options to the call.
    * `end(session)`: once, when the monitored session closes after a clean
      exit. Not called when the `with` block raises an error.

    Hooks are written once and run unchanged in graph and eager mode.
    """

    def begin(self) -> None:
        """Called once before using the session."""

    def after_create_session(self, session: Any, coord: Any) -> None:
        """Called when a new session has been created.

        Args:
          session: A session-like object with `run(fetches, feed_dict=None)`.
          coord: A `tf.train.Coordinator` in graph mode, `None` in eager mode.
        """

    def before_run(self, run_context: SessionRunContext) -> SessionRunArgs | None:
        """Called before each call to `run()`.

        Args:
          run_context: A `SessionRunContext` for the coming call.

        Returns:
          `None` when the hook needs nothing from this step, or a
          `SessionRunArgs` naming what to add to the call.
        """
        return None

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        """Called after each call to `run()`.

        Args:
          run_context: The same `SessionRunContext` given to `before_run`.
          run_values: A `SessionRunValues`; `results` holds the values of the
            fetches this hook asked for.
        """

    def end(self, session: Any) -> None:
        """Called once at the end of the session, after a clean exit.

        Args:
          session: A session-like object with `run(fetches, feed_dict=None)`.
        """


class SessionRunArgs(NamedTuple):
    """What a hook adds to a `run()` call.

    Args:
      fetches: A tensor, op, name or a nested list/tuple/dict of them, exactly
        like the `fetches` of `Session.run()`. In eager mode a leaf may also be
        a `tf.Variable`, the name of an entry of the mapping the step returned,
        or a zero-argument callable.
      feed_dict: Like the `feed_dict` of `Session.run()`. In eager mode its keys
        are keyword-argument names of the step.
      options: A `tf.compat.v1.RunOptions` proto (graph mode only).
    """

    fetches: Any
    feed_dict: Any = None
    options: Any = None


class SessionRunContext:
    """Information about the `run()` call being made, and a way to stop.

    Args:
      original_args: The `SessionRunArgs` of the caller's `run()`.
      session: The session-like object the step runs in.
    """

    def __init__(self, original_args: SessionRunArgs, session: Any) -> None:
        self._original_args = original_args
        self._session = session
        self._stop_requested = False

    @property
    def original_args(self) -> SessionRunArgs:
        """The `SessionRunArgs` the caller passed to `run()`."""
        return self._original_args

    @property
    def session(self) -> Any:
        """The session the step runs in."""
        return self._session

    @property
    def stop_requested(self) -> bool:
        """Whether a stop was requested with `request_stop()`."""
        return self._stop_requested

    def request_stop(self) -> None:
        """Asks the monitored session to stop after this step."""
        self._stop_requested = True


class SessionRunValues(NamedTuple):
    """What a hook receives in `after_run`.

    Args:
      results: The values of the hook's `SessionRunArgs.fetches`, in the same
        structure (`None` when the hook asked for nothing).
      options: The `RunOptions` used for the call.
      run_metadata: The `RunMetadata` filled by the call, or `None` when no
        hook asked for a trace.
    """

    results: Any
    options: Any
    run_metadata: Any
