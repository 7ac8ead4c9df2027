"""The hook API: `SessionRunHook` and the values passed to its methods.

Nothing here imports TensorFlow, so hook classes can be defined and listed
without paying for it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, NamedTuple, Protocol, runtime_checkable

_NOTHING_KEPT: Mapping[str, Any] = MappingProxyType({})


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
    * `next_action(global_step)` (monsession only; optional): before a call
      of `run()` in eager mode with `steps_per_execution` other than 1: when
      the hook next acts. The session runs the steps before that without
      calling the hook (fused into one `tf.function`). A hook that overrides
      `before_run` or `after_run` but not this method acts on every step, and
      the session then runs single steps.
    * `on_failure(session, error)` (monsession only; optional): once, when the
      `with` block exits with an error, instead of `end()`. The hooks are
      called in list order, after the error, before the session closes. What
      one raises is logged, and the next hook is called: the session's own
      error propagates unchanged. Not called after a clean exit, nor for the
      ends of data (`OutOfRangeError`, `StopIteration`) that close cleanly.
    * `state_dict()` / `load_state_dict(state)` (monsession only; optional,
      see `StatefulHook`): a hook with both has its state saved beside every
      checkpoint a `CheckpointSaverHook` writes, and loaded back when the
      session is created from that checkpoint (a restart, a recovery after a
      preemption, an older checkpoint when the newest is damaged), before
      `after_create_session`. `SecondOrStepTimer` has both, for hooks whose
      state is their timer.

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

    def next_action(self, global_step: int) -> NextAction:
        """When this hook next acts, for the session's fused steps (optional).

        Not part of TensorFlow's hook API. Called in eager mode, with
        `steps_per_execution` other than 1, before each call of `run()`. The
        session may then run up to `steps - 1` steps (and until `at_time`)
        without calling this hook, inside one `tf.function`, before the step
        at which it calls `before_run`/`after_run` as usual. It may call them
        earlier (another hook acts, or a cap is reached): they must then do
        nothing, as on any step where the hook has nothing to do.
        `SessionRunContext.silent_steps` tells how many steps ran silently.

        The base class answers "on the coming run": a hook that overrides
        `before_run` or `after_run` but not this method acts on every step.
        A `SecondOrStepTimer` answers it for the hook, e.g.
        ``return self._timer.next_action(global_step + 1)`` for a hook that
        tests the global step after each run.

        Args:
          global_step: The global step before the coming run (host int).

        Returns:
          A `NextAction`.
        """
        return NextAction(steps=1)

    def on_failure(self, session: Any, error: BaseException) -> None:
        """Called once when the session fails, instead of `end()`.

        The `with` block of the monitored session raised `error` (anything but
        the `OutOfRangeError` or `StopIteration` that end it cleanly, including
        `KeyboardInterrupt`). Hooks are called in list order, before the
        session closes, so `session` still runs. An exception raised here is
        logged and does not replace `error`, which propagates. Not part of
        TensorFlow's hook API: TensorFlow's sessions never call it.

        Args:
          session: A session-like object with `run(fetches, feed_dict=None)`.
          error: The exception the `with` block raised.
        """


class NextAction(NamedTuple):
    """When a hook next acts: what `SessionRunHook.next_action()` returns.

    Args:
      steps: The hook acts at the run that many runs from now (1: the coming
        run); `None`: at no particular step.
      at_time: The hook acts at the first run that starts at or after this
        `time.time()`; `None`: at no particular time. With both `None` the
        hook does not act on any step until the next time it is asked.
      keep: Names of entries of the mapping the step returns that the hook
        needs from every step, including silent ones: the session stacks
        them on the device and hands them over in
        `SessionRunContext.silent_outputs`.
    """

    steps: int | None = None
    at_time: float | None = None
    keep: tuple[str, ...] = ()


@runtime_checkable
class StatefulHook(Protocol):
    """The optional hook methods that make a hook's state survive restarts.

    Not part of TensorFlow's hook API. A hook with both methods has its state
    written beside every checkpoint that `CheckpointSaverHook` writes (file
    ``<checkpoint prefix>.hooks.json``, written before the checkpoint's state
    file names the checkpoint) and loaded back into it when the monitored
    session is created from that checkpoint: at a restart, after recovering
    from a preemption error (the hooks go back to the checkpoint, as the
    model does), and from an older checkpoint when the newest is damaged.
    The state loaded is the one the hook had when the checkpoint was
    written: hooks placed before the `CheckpointSaverHook` in the hook list
    include the step that was saved, hooks after it (user hooks of
    `MonitoredTrainingSession`) the step before.

    A hook is found under its `state_key` attribute if it has one (a
    string, for a hook whose class or position may change), else under its
    class name and its index among the stateful hooks of that class
    (``"StepCounterHook[0]"``). A hook with no saved state, or whose
    `load_state_dict` raises, is named in a WARNING and keeps its state
    (a fresh one on a restart; the state it had before the call, which is
    put back with `load_state_dict`).

    ```python
    class CountingHook(monsession.SessionRunHook):
        def __init__(self):
            self.seen = 0

        def after_run(self, run_context, run_values):
            self.seen += 1

        def state_dict(self):
            return {"seen": self.seen}

        def load_state_dict(self, state):
            self.seen = int(state["seen"])
    ```
    """

    def state_dict(self) -> Any:
        """The hook's state as plain JSON data (dicts, lists, str, numbers, bool, None).

        Times that must keep their meaning across processes should be
        wall-clock (`time.time()`).
        """

    def load_state_dict(self, state: Any) -> None:
        """Takes back a state returned by `state_dict()`, in another process.

        Raises:
          Exception: Anything, when `state` does not fit (e.g. saved by an
            older version of the hook): the session warns and the hook keeps
            its state.
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


class StepService(Protocol):
    """What a `SessionRunContext` asks about the global step (core's backends)."""

    def global_step_before(self) -> int | None: ...

    def global_step_after(self, reaching: Callable[[int], bool] | None = None) -> int | None: ...


class SessionRunContext:
    """Information about the `run()` call being made, and a way to stop.

    Besides TensorFlow's API it gives the global step of the run as a host
    integer, in both modes, without the hook fetching it (the *step
    service*): `global_step` before the run, `global_step_after()` after it.

    Args:
      original_args: The `SessionRunArgs` of the caller's `run()`.
      session: The session-like object the step runs in.
      step_service: What knows the global step; given by the monitored
        session. Without it (a context made by hand) `global_step` is `None`.
    """

    def __init__(
        self,
        original_args: SessionRunArgs,
        session: Any,
        step_service: StepService | None = None,
        silent_steps: int = 0,
        silent_outputs: Mapping[str, Any] | None = None,
    ) -> None:
        self._original_args = original_args
        self._session = session
        self._stop_requested = False
        self._steps = step_service
        self._ran = False
        self._silent_steps = silent_steps
        self._silent_outputs = silent_outputs or _NOTHING_KEPT

    @property
    def original_args(self) -> SessionRunArgs:
        """The `SessionRunArgs` the caller passed to `run()`."""
        return self._original_args

    @property
    def session(self) -> Any:
        """The session the step runs in."""
        return self._session

    @property
    def silent_steps(self) -> int:
        """How many steps ran just before this one without calling the hooks.

        Steps fused by `steps_per_execution` (eager mode); 0 otherwise. A hook
        that counts runs itself adds it to its count.
        """
        return self._silent_steps

    @property
    def silent_outputs(self) -> Mapping[str, Any]:
        """The entries hooks asked to `keep` (see `NextAction`), from the silent steps.

        Each name maps to one tensor stacking the entry of every silent step
        along a new first axis, in step order; empty when no step ran silently.
        """
        return self._silent_outputs

    @property
    def stop_requested(self) -> bool:
        """Whether a stop was requested with `request_stop()`."""
        return self._stop_requested

    def request_stop(self) -> None:
        """Asks the monitored session to stop after this step."""
        self._stop_requested = True

    @property
    def global_step(self) -> int | None:
        """The global step before this run, as a host integer.

        The value the global step variable holds when the run starts, as the
        session knows it without reading the device: read once when the
        session is created or re-created, then advanced by one per run.
        Eager mode checks it against the variable whenever hooks read the
        device anyway; graph mode checks it against TensorFlow's global-step
        read tensor, fetched with every step. If the runs do not add exactly
        one each, both log one warning and from then on read the variable
        whenever a hook needs the step after a run. `None` when there is no
        global step.
        """
        return None if self._steps is None else self._steps.global_step_before()

    def global_step_after(self, reaching: Callable[[int], bool] | None = None) -> int | None:
        """The global step after this run, as a host integer (in `after_run`).

        Eager mode knows it on the host: no device read. Graph mode expects
        `global_step + 1` and, as TensorFlow's hooks do before they act,
        reads the variable itself, at most once per run for all hooks: only
        when `reaching` accepts the expected value, or always without
        `reaching`.

        ```python
        def after_run(self, run_context, run_values):
            step = run_context.global_step_after(self._timer.should_trigger_for_step)
            if step is not None:  # The timer triggers at `step`.
                self._timer.update_last_triggered_step(step)
                ...
        ```

        Args:
          reaching: An optional test of the step, e.g. a timer's
            `should_trigger_for_step` or ``lambda step: step >= last``.

        Returns:
          The global step after the run; `None` when `reaching` rejects it,
          or when there is no global step.

        Raises:
          RuntimeError: If called before the run finished (in `before_run`).
        """
        if not self._ran:
            raise RuntimeError(
                "SessionRunContext.global_step_after() is known after the run: call it in "
                "after_run(), or use global_step in before_run()."
            )
        if self._steps is None:
            return None
        return self._steps.global_step_after(reaching)

    def _finish_run(self) -> None:
        """Called by the monitored session once the step ran."""
        self._ran = True


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
