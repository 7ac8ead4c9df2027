"""The hook API: `SessionRunHook` and the values passed to its methods.

Nothing here imports TensorFlow, so hook classes can be defined and listed
without paying for it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, cast, runtime_checkable

if TYPE_CHECKING:
    import tensorflow as tf

_NOTHING_KEPT: Mapping[str, Any] = MappingProxyType({})


class SessionLike(Protocol):
    """The session a hook is given: an object with `run(fetches, feed_dict=None)`.

    A `tf.compat.v1.Session` in graph mode (or TensorFlow's session wrappers),
    monsession's session in eager mode; what `run` takes and returns is that
    session's (see `MonitoredSession.run`).
    """

    def run(self, fetches: Any, feed_dict: Any = None) -> Any:
        """Runs `fetches` (feeding `feed_dict`) and returns their values."""


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
    * `next_action(global_step)` (monsession only): before a call of `run()`
      in eager mode: when the hook next acts. The session runs the steps
      before that without calling the hook (fused into one `tf.function`
      with `steps_per_execution` other than 1, else one per call). A hook
      that overrides `before_run` or `after_run` but not this method acts on
      every step, and the session then calls the hooks on every step.
    * `on_failure(session, error)` (monsession only): once, when the `with`
      block exits with an error, instead of `end()`. The hooks are called in
      list order, after the error, before the session closes. What one
      raises is logged, and the next hook is called: the session's own error
      propagates unchanged. Not called after a clean exit, nor for the ends
      of data (`OutOfRangeError`, `StopIteration`) that close cleanly.
    * `state_dict()` / `load_state_dict(state)` (monsession only, see
      `StatefulHook`): a hook that overrides both has its state saved beside
      every checkpoint a `CheckpointSaverHook` writes, and loaded back when
      the session is created from that checkpoint (a restart, a recovery
      after a preemption, an older checkpoint when the newest is damaged),
      before `after_create_session`. `SecondOrStepTimer` has both, for hooks
      whose state is their timer.
    * `epoch_begin(epoch)` / `epoch_end(epoch)` (monsession only): at the
      boundaries of the epochs of `monsession.Epochs.run`; an `epoch_end`
      that returns True ends the loop after that epoch.

    Every method has a no-op default here: a hook overrides the ones it
    needs. The monsession-only methods are called only by monsession's
    sessions and loops; TensorFlow's sessions call the others, so a hook
    derived from this class is also a valid `tf.compat.v1.train` hook. Hooks
    that do not derive from it (TensorFlow's own, or any object with the five
    methods `begin` ... `end`) run too; their monsession-only methods, when
    they have some, are called as well (see `hook_overrides`). A hook that
    reads what monsession adds to the run context (`global_step`,
    `global_step_after()`, `silent_steps`, `silent_outputs`) calls
    `as_run_context(run_context)` first, so that it also runs under
    TensorFlow's sessions.

    Hooks are written once and run unchanged in graph and eager mode.
    """

    state_key: str | None = None
    """The key of the hook's saved state (see `StatefulHook`), or `None`.

    Not part of TensorFlow's hook API. `None` (the default): the state is
    saved under the hook's class name and its index among the stateful
    hooks of that class (``"StepCounterHook[0]"``). Set a non-empty string
    for a hook whose class or position in the hook list may change.
    """

    def begin(self) -> None:
        """Called once before using the session."""

    def after_create_session(
        self, session: SessionLike, coord: tf.train.Coordinator | None
    ) -> None:
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

    def end(self, session: SessionLike) -> None:
        """Called once at the end of the session, after a clean exit.

        Args:
          session: A session-like object with `run(fetches, feed_dict=None)`.
        """

    def next_action(self, global_step: int) -> NextAction:
        """When this hook next acts, for the session's fused steps.

        Not part of TensorFlow's hook API. Called in eager mode before a
        call of `run()`. The session may then run up to `steps - 1` steps
        (and until `at_time`) without calling this hook, inside one
        `tf.function` (`steps_per_execution` other than 1) or as single
        steps, before the step at which it calls `before_run`/`after_run` as
        usual. It may call them earlier (another hook acts, or a cap is
        reached): they must then do nothing, as on any step where the hook
        has nothing to do.
        `SessionRunContext.silent_steps` tells how many steps ran silently.

        The base class answers "on the coming run": a hook that overrides
        `before_run` or `after_run` but not this method acts on every step.
        A `SecondOrStepTimer` answers it for the hook, e.g.
        ``return self._timer.next_action(global_step + 1)`` for a hook that
        tests the global step after each run (`monsession.TimedHook` does
        that for its subclasses).

        Args:
          global_step: The global step before the coming run (host int).

        Returns:
          A `NextAction`.
        """
        return NextAction(steps=1)

    def on_failure(self, session: SessionLike, error: BaseException) -> None:
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

    def state_dict(self) -> object:
        """The hook's state, to save beside each checkpoint (see `StatefulHook`).

        Not part of TensorFlow's hook API. The default returns `None`: a hook
        that overrides neither this method nor `load_state_dict` has no state
        to save, and no state file entry.
        """
        return None

    def load_state_dict(self, state: object) -> None:
        """Takes back a state returned by `state_dict()` (see `StatefulHook`); default: nothing."""

    def epoch_begin(self, epoch: int) -> None:
        """Called by `monsession.Epochs.run` before the first step of each epoch.

        Not part of TensorFlow's hook API. Not called for an epoch resumed in
        its middle (after a restart).

        Args:
          epoch: The number of the epoch (0 for the first).
        """

    def epoch_end(self, epoch: int) -> bool | None:
        """Called by `monsession.Epochs.run` after the last step of each epoch.

        Not part of TensorFlow's hook API.

        Args:
          epoch: The number of the epoch that ended (0 for the first).

        Returns:
          True to end the loop after this epoch; `None` (the default) or
          False to go on.
        """
        return None


class NextAction(NamedTuple):
    """When a hook next acts: what `SessionRunHook.next_action()` returns.

    Attributes:
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

    Not part of TensorFlow's hook API. A hook that has both methods of its
    own (not `SessionRunHook`'s defaults, which mean "no state") has its state
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

    A hook is found under its `SessionRunHook.state_key` if it sets one (a
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

    def state_dict(self) -> object:
        """The hook's state as plain JSON data (dicts, lists, str, numbers, bool, None).

        Times that must keep their meaning across processes should be
        wall-clock (`time.time()`).
        """

    def load_state_dict(self, state: object) -> None:
        """Takes back a state returned by `state_dict()`, in another process.

        Raises:
          Exception: Anything, when `state` does not fit (e.g. saved by an
            older version of the hook): the session warns and the hook keeps
            its state.
        """


class SessionRunArgs(NamedTuple):
    """What a hook adds to a `run()` call.

    Attributes:
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
        session. Without it (a context made by hand, as TensorFlow's hook
        tests do) the context reads the global step through `session`
        whenever a hook asks, as TensorFlow's hooks do.
    """

    def __init__(
        self,
        original_args: SessionRunArgs,
        session: SessionLike,
        step_service: StepService | None = None,
        silent_steps: int = 0,
        silent_outputs: Mapping[str, Any] | None = None,
    ) -> None:
        self._original_args = original_args
        self._session = session
        self._stop_requested = False
        # Without a service nothing tells when the run happened: no check.
        self._ran = step_service is None
        self._steps = _SessionReads(session) if step_service is None else step_service
        self._silent_steps = silent_steps
        self._silent_outputs = silent_outputs or _NOTHING_KEPT

    @property
    def original_args(self) -> SessionRunArgs:
        """The `SessionRunArgs` the caller passed to `run()`."""
        return self._original_args

    @property
    def session(self) -> SessionLike:
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
        global step. A context the monitored session did not build reads the
        variable through `session` the first time a hook asks (in
        `before_run`), and keeps that value for the run.
        """
        return self._steps.global_step_before()

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
        return self._steps.global_step_after(reaching)


def finish_run(run_context: SessionRunContext) -> None:
    """Marks the run of `run_context` as done: `global_step_after()` may be asked now.

    Called by the monitored session once the step ran; not a method, so that
    hooks do not see it.
    """
    run_context._ran = True


class SessionRunValues(NamedTuple):
    """What a hook receives in `after_run`.

    Attributes:
      results: The values of the hook's `SessionRunArgs.fetches`, in the same
        structure (`None` when the hook asked for nothing).
      options: The `RunOptions` used for the call.
      run_metadata: The `RunMetadata` filled by the call, or `None` when no
        hook asked for a trace.
    """

    results: Any
    options: Any
    run_metadata: Any


class _SessionReads:
    """The step service of a context no monitored session built: reads through the session.

    The step before the run is read the first time a hook asks (in
    `before_run`), then kept: a context stands for one run.
    """

    def __init__(self, session: SessionLike) -> None:
        self._session = session
        self._before: int | None = None
        self._read_before = False

    def global_step_before(self) -> int | None:
        if not self._read_before:
            self._before, self._read_before = self._read(), True
        return self._before

    def global_step_after(self, reaching: Callable[[int], bool] | None = None) -> int | None:
        step = self._read()
        if step is None or (reaching is not None and not reaching(step)):
            return None
        return step

    def _read(self) -> int | None:
        from monsession._api._global_step import get_global_step, read_global_step

        graph = getattr(self._session, "graph", None)
        if self._session is None or get_global_step(graph) is None:
            return None
        return read_global_step(self._session)


class _OtherRunContext(Protocol):
    """What `as_run_context` needs of a run context it did not build (TensorFlow's)."""

    @property
    def original_args(self) -> SessionRunArgs: ...

    @property
    def session(self) -> SessionLike: ...

    @property
    def stop_requested(self) -> bool: ...

    def request_stop(self) -> None: ...


class _ForeignRunContext(SessionRunContext):
    """A monsession view of another run context (TensorFlow's): stops go to it."""

    def __init__(self, context: _OtherRunContext) -> None:
        super().__init__(context.original_args, context.session)
        self._context = context

    @property
    def stop_requested(self) -> bool:
        return bool(self._context.stop_requested)

    def request_stop(self) -> None:
        self._context.request_stop()


def as_run_context(run_context: object) -> SessionRunContext:
    """`run_context` as a monsession `SessionRunContext`, whoever built it.

    Call it at the top of `before_run` and `after_run` in a hook that reads
    what monsession adds to the run context (`global_step`,
    `global_step_after()`, `silent_steps`, `silent_outputs`). A context the
    monitored session built (or an object that forwards to one) comes back
    unchanged (no cost). A context of
    TensorFlow's sessions (`tf.compat.v1.train.MonitoredSession` and the
    loops built on it), or one user code builds by hand, comes back as a
    view that reads the global step through `run_context.session` when
    asked, as TensorFlow's hooks do (`global_step` the first time a hook of
    the run asks, `global_step_after()` each time), with no silent steps;
    `request_stop()` on it stops the original.

    ```python
    def after_run(self, run_context, run_values):
        run_context = monsession.plugins.as_run_context(run_context)
        step = run_context.global_step_after(self._timer.should_trigger_for_step)
        ...
    ```

    Args:
      run_context: The context given to `before_run` / `after_run`: ours, or
        any object with TensorFlow's `original_args`, `session`,
        `request_stop()` and `stop_requested`.
    """
    if isinstance(run_context, SessionRunContext) or hasattr(run_context, "global_step_after"):
        # Ours, or a proxy of ours: it has the step service.
        return cast(SessionRunContext, run_context)
    view = getattr(run_context, _VIEW, None)
    if view is None:
        view = _ForeignRunContext(cast(_OtherRunContext, run_context))
        try:  # One view per context: every hook of the run sees the same step before it.
            setattr(run_context, _VIEW, view)
        except AttributeError:
            pass
    return view


_VIEW = "_monsession_view"


def hook_overrides(hook: object, name: str) -> bool:
    """Whether `hook` has its own `name` method, not a hook base class's default.

    The base classes are monsession's `SessionRunHook` and TensorFlow's
    `tf.compat.v1.train.SessionRunHook`. A hook that derives from neither
    overrides every method it has; a method set on the instance (a proxy)
    counts too. monsession calls a hook's optional methods (`next_action`,
    `on_failure`, `state_dict`, `epoch_end` ...) only when this is true.

    Args:
      hook: Any hook.
      name: A method `SessionRunHook` declares.

    Raises:
      ValueError: If `SessionRunHook` declares no method `name`.
    """
    if not callable(getattr(SessionRunHook, name, None)) or name.startswith("_"):
        raise ValueError(
            f"hook_overrides: SessionRunHook declares no method {name!r}; the hook methods are "
            f"{', '.join(HOOK_METHOD_NAMES)}."
        )
    if name in getattr(hook, "__dict__", ()):
        return callable(hook.__dict__[name])
    for klass in type(hook).__mro__:
        if name in vars(klass):
            return not _is_hook_base(klass)
    return False


def _is_hook_base(klass: type) -> bool:
    """Whether `klass` is our `SessionRunHook` or TensorFlow's (without importing TensorFlow)."""
    return klass is SessionRunHook or (
        klass.__name__ == "SessionRunHook" and klass.__module__.startswith("tensorflow.")
    )


HOOK_METHOD_NAMES = tuple(
    name
    for name, value in vars(SessionRunHook).items()
    if callable(value) and not name.startswith("_")
)
"""Every method of `SessionRunHook`, in declaration order."""

TF_HOOK_METHOD_NAMES = ("begin", "after_create_session", "before_run", "after_run", "end")
"""The five methods of TensorFlow's `SessionRunHook`, in the order a session calls them.

Every hook has them: a hook list may hold any object that does (the others
of `HOOK_METHOD_NAMES` are optional).
"""
