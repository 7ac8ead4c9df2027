"""What a hook's `before_run` and `after_run` are given and return.

`SessionRunArgs` (what a hook adds to a run), `SessionRunContext` (the run
being made, its global step, and a way to stop) and `SessionRunValues`
(what the run gave the hook). Nothing here imports TensorFlow.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from monsession._api._types import FeedKey, FeedValue, Fetches, Results, SessionLike

if TYPE_CHECKING:
    import tensorflow as tf

_NOTHING_KEPT: Mapping[str, Any] = MappingProxyType({})


class SessionRunArgs(NamedTuple):
    """What a hook adds to a `run()` call.

    Attributes:
      fetches: A tensor, op, name or a nested list/tuple/dict of them, exactly like the
        `fetches` of `Session.run()`. In eager mode a leaf may also be a `tf.Variable`, the name
        of an entry of the mapping the step returned, or a zero-argument callable.
      feed_dict: Like the `feed_dict` of `Session.run()`. In eager mode its keys
        are keyword-argument names of the step.
      options: A `tf.compat.v1.RunOptions` proto (graph mode only).
    """

    fetches: Any
    feed_dict: Any = None
    options: Any = None


def run_args(fetches: Fetches, feed_dict: Mapping[FeedKey, FeedValue] | None) -> SessionRunArgs:
    """`SessionRunArgs(fetches, feed_dict)`, built without its Python `__new__` (every step)."""
    return tuple.__new__(SessionRunArgs, (fetches, feed_dict, None))


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
      step_service: What knows the global step; given by the monitored session. Without it (a
        context made by hand, as TensorFlow's hook tests do) the context reads the global step
        through `session` whenever a hook asks, as TensorFlow's hooks do.
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
        self._step_asked = False  # Whether `global_step` was asked in this run; its answer.
        self._step_before: int | None = None

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
        """How many steps ran since the hook was last called, without it (eager mode).

        Fused steps, and steps on which the hook did not act (it said so in
        `next_action`); 0 otherwise. Each hook is told its own count. A hook
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

        The value the global step variable holds when the run starts, as the session knows it
        without reading the device: read once when the session is created or re-created, then
        advanced by one per run. Eager mode checks it against the variable whenever hooks read
        the device anyway; graph mode checks it against TensorFlow's global-step read tensor,
        fetched with the first run and, once a hook asks for the step, with every run (a hook
        that first asks later gets the variable read once). If the runs do not add exactly one
        each, both log one warning and from then on read the variable whenever a hook needs the
        step after a run. `None` when there is no global step. A context the monitored session
        did not build reads the variable through `session` the first time a hook asks (in
        `before_run`), and keeps that value for the run.
        """
        if not self._step_asked:  # Once per run, however many hooks ask.
            self._step_before, self._step_asked = self._steps.global_step_before(), True
        return self._step_before

    def global_step_after(self, reaching: Callable[[int], bool] | None = None) -> int | None:
        """The global step after this run, as a host integer (in `after_run`).

        Eager mode knows it on the host: no device read. Graph mode expects `global_step + 1`
        and, as TensorFlow's hooks do before they act, reads the variable itself, at most once
        per run for all hooks: only when `reaching` accepts the expected value, or always
        without `reaching`.

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


def run_values(
    results: Results,
    options: tf.compat.v1.RunOptions | None,
    run_metadata: tf.compat.v1.RunMetadata | None,
) -> SessionRunValues:
    """`SessionRunValues(...)`, built without its Python `__new__` (every step, every hook)."""
    return tuple.__new__(SessionRunValues, (results, options, run_metadata))


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
        from monsession._api._types import get_global_step, read_global_step

        graph = getattr(self._session, "graph", None)
        if self._session is None or get_global_step(graph) is None:
            return None
        return read_global_step(self._session)


class RunContextLike(Protocol):
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

    def __init__(self, context: RunContextLike) -> None:
        super().__init__(context.original_args, context.session)
        self._context = context

    @property
    def stop_requested(self) -> bool:
        return bool(self._context.stop_requested)

    def request_stop(self) -> None:
        self._context.request_stop()


def as_run_context(run_context: SessionRunContext | RunContextLike) -> SessionRunContext:
    """`run_context` as a monsession `SessionRunContext`, whoever built it.

    Call it at the top of `before_run` and `after_run` in a hook that reads what monsession adds
    to the run context (`global_step`, `global_step_after()`, `silent_steps`, `silent_outputs`).
    A context the monitored session built (or an object that forwards to one) comes back
    unchanged (no cost). A context of TensorFlow's sessions
    (`tf.compat.v1.train.MonitoredSession` and the loops built on it), or one user code builds
    by hand, comes back as a view that reads the global step through `run_context.session` when
    asked, as TensorFlow's hooks do (`global_step` the first time a hook of the run asks,
    `global_step_after()` each time), with no silent steps; `request_stop()` on it stops the
    original.

    ```python
    def after_run(self, run_context, run_values):
        run_context = monsession.plugins.as_run_context(run_context)
        step = run_context.global_step_after(self._timer.should_trigger_for_step)
        ...
    ```

    Args:
      run_context: The context given to `before_run` / `after_run`: ours, or any object with
        TensorFlow's `original_args`, `session`, `request_stop()` and `stop_requested`.
    """
    if isinstance(run_context, SessionRunContext) or hasattr(run_context, "global_step_after"):
        # Ours, or a proxy of ours: it has the step service (no `cast` call: every hook, step).
        return run_context  # type: ignore[return-value]
    view = getattr(run_context, _VIEW, None)
    if view is None:
        view = _ForeignRunContext(run_context)
        try:  # One view per context: every hook of the run sees the same step before it.
            setattr(run_context, _VIEW, view)
        except AttributeError:
            pass
    return view


_VIEW = "_monsession_view"
