"""The hook API: `SessionRunHook`, what it plans (`NextAction`), overrides, and lists of hooks.

The values passed to its methods are in `_run_context`. Nothing here imports
TensorFlow, so hook classes can be defined and listed without paying for it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, NamedTuple, Protocol, runtime_checkable

from monsession._api._types import HookState, HookStateWriter, SessionLike, Unchecked

if TYPE_CHECKING:
    import tensorflow as tf

    from monsession._api._run_context import SessionRunArgs, SessionRunContext, SessionRunValues


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
      in eager mode: when the hook next acts; the steps before that run
      without calling the hook (fused with `steps_per_execution` other than 1).
    * `on_failure(session, error)` (monsession only): once, when the `with`
      block exits with an error, instead of `end()`.
    * `state_dict()` / `load_state_dict(state)` (monsession only, see
      `StatefulHook`): the hook's state, saved beside every checkpoint and
      loaded back, before `after_create_session`, when the session is
      created from that checkpoint.
    * `epoch_begin(epoch)` / `epoch_end(epoch)` (monsession only): at the
      boundaries of the epochs of `monsession.Epochs.run`; an `epoch_end`
      that returns True ends the loop after that epoch.

    Every method is a no-op here. TensorFlow's sessions call the first five, so a subclass is
    also a valid `tf.compat.v1.train` hook; any object with those five runs too (see
    `hook_overrides`). A hook that reads what monsession adds to the run context (`global_step`,
    `global_step_after()`, `silent_steps`, `silent_outputs`) calls `as_run_context(run_context)`
    first, so that it also runs under TensorFlow's sessions. Hooks run unchanged in graph and
    eager mode.

    Asked for a Keras callback method (``set_model``, ``set_params``,
    ``on_*``), a hook raises an `AttributeError` saying to wrap it in
    ``monsession_hooks_keras.HooksCallback`` (``hasattr`` stays false).
    """

    state_key: str | None = None
    """The key of the hook's saved state (see `StatefulHook`).

    `None`: the class name and index among stateful hooks of that class
    (``"StepCounterHook[0]"``). Set a string if the class or position may change.
    """

    if not TYPE_CHECKING:  # Hidden from type checkers: attribute typos stay errors there.

        def __getattr__(self, name: str):
            # Only for attributes the hook lacks: no cost for the ones it has.
            raise AttributeError(_missing_attribute(type(self).__name__, name), name=name, obj=self)

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

        Called in eager mode before `run()`. The session may then run up to `steps - 1` steps
        (and until `at_time`) without calling this hook, fused (`steps_per_execution` other than
        1) or not, other hooks called on some. It may call `before_run`/`after_run` earlier
        (e.g. at an epoch's last step): they must then do nothing.
        `SessionRunContext.silent_steps` tells how many steps ran without it. Until the hook is
        called again, its answer stands, counted down by the global steps since (it is asked
        again, the answer unused).

        The default is "on the coming run". A `SecondOrStepTimer` answers it:
        ``return self._timer.next_action(global_step + 1)`` (as `TimedHook` does).

        `global_step` is the global step before the coming run (host int).
        """
        return NextAction(steps=1)

    def on_failure(self, session: SessionLike, error: BaseException) -> None:
        """Called once when the session fails, instead of `end()`.

        The `with` block raised `error` (anything but the `OutOfRangeError`
        or `StopIteration` that end it cleanly, `KeyboardInterrupt` included).
        Called in list order before the session closes (`session` still
        runs); an exception raised here is logged, and `error` propagates.

        Args:
          session: A session-like object with `run(fetches, feed_dict=None)`.
          error: The exception the `with` block raised.
        """

    def state_dict(self) -> HookState:
        """The hook's state, saved beside each checkpoint (see `StatefulHook`); default: none."""
        return None

    def load_state_dict(self, state: HookState) -> None:
        """Takes back a state returned by `state_dict()` (see `StatefulHook`); default: nothing."""

    def use_hook_state(self, hook_state: HookStateWriter) -> None:
        """Takes the `HookStateWriter` a hook that writes checkpoints saves with; default: none."""

    def epoch_begin(self, epoch: int) -> None:
        """Called by `monsession.Epochs.run` before the first step of epoch `epoch` (0: first).

        Not called for an epoch resumed in its middle (after a restart).
        """

    def epoch_end(self, epoch: int) -> bool | None:
        """Called by `monsession.Epochs.run` after the last step of epoch `epoch` (0: first).

        Returns True to end the loop after this epoch, `None` or False to go on.
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
      keep: Names of entries of the mapping the step returns that the hook needs from every
        step, including silent ones: the session stacks them on the device and hands them over
        in `SessionRunContext.silent_outputs`.
    """

    steps: int | None = None
    at_time: float | None = None
    keep: tuple[str, ...] = ()


@runtime_checkable
class StatefulHook(Protocol):
    """The optional hook methods that make a hook's state survive restarts.

    A hook that overrides both methods has its state written beside every checkpoint
    `CheckpointSaverHook` writes (``<checkpoint prefix>.hooks.json``, before the checkpoint's
    state file names it) and loaded back when a session is created from that checkpoint: at a
    restart, after a preemption error, and from an older checkpoint when the newest is damaged.
    Hooks before the `CheckpointSaverHook` in the list saved the state including the saved step,
    hooks after it (user hooks of `MonitoredTrainingSession`) the step before.

    The state is keyed by `SessionRunHook.state_key`. A hook with no saved
    state, or whose `load_state_dict` raises, is named in a WARNING and
    keeps its state (the one it had before the call is loaded back).

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

    def state_dict(self) -> HookState:
        """The hook's state as plain JSON data; times as wall-clock (`time.time()`)."""

    def load_state_dict(self, state: HookState) -> None:
        """Takes back a state returned by `state_dict()`, in another process.

        Anything it raises (e.g. for a state of an older version) is warned about.
        """


def hook_overrides(hook: SessionRunHook, name: str) -> bool:
    """Whether `hook` has its own `name` method, not a hook base class's default.

    The bases are monsession's and TensorFlow's `SessionRunHook`; a method
    set on the instance counts. monsession calls a hook's optional methods
    (`next_action`, `on_failure`, `state_dict`, ...) only when this is true.

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


def _missing_attribute(hook: str, name: str) -> str:
    """The message of a hook's missing attribute: for Keras's callback methods, the fix."""
    if name in ("set_model", "set_params") or name.startswith("on_"):
        return (
            f"{hook} is a monsession hook, not a Keras callback (Keras asked it for {name!r}). "
            "To run monsession hooks in model.fit, wrap them in a callback: "
            "model.fit(..., callbacks=[HooksCallback([...your hooks])]), with "
            "`from monsession_hooks_keras import HooksCallback` "
            "(pip install monsession-hooks-keras)."
        )
    return f"{hook!r} object has no attribute {name!r}"


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
"""The five methods of TensorFlow's `SessionRunHook`, which every hook has, in call order."""


def _describe(value: Unchecked) -> str:
    if value is None:
        return "None"
    if isinstance(value, type):
        return f"the class {value.__name__}"
    return f"{value!r} of type {type(value).__name__}"


def check_hooks(owner: str, name: str, hooks: Unchecked) -> list[SessionRunHook]:
    """`hooks` (an iterable, or `None`) as a list of hook instances, else `TypeError`.

    A hook has the five methods of `TF_HOOK_METHOD_NAMES`; the error names
    `owner`, `name` and the index.
    """
    if hooks is None:
        return []
    if isinstance(hooks, (str, bytes, Mapping)) or not isinstance(hooks, Iterable):
        hint = "." if _missing(hooks) else f"; did you mean {name}=[{type(hooks).__name__}(...)]?"
        raise TypeError(
            f"{owner}: {name} must be a list of SessionRunHook instances, got "
            f"{_describe(hooks)}{hint}"
        )
    checked = list(hooks)
    for index, hook in enumerate(checked):
        _check_hook(f"{owner}: {name}[{index}] is", hook)
    return checked


def _missing(hook: Unchecked) -> list[str]:
    """The methods of TensorFlow's hook that `hook` lacks (or has but cannot call)."""
    return [method for method in TF_HOOK_METHOD_NAMES if not callable(getattr(hook, method, None))]


def _check_hook(where: str, hook: Unchecked) -> None:
    """Raises the `TypeError` of `check_hooks` for an item that is not a hook instance."""
    if isinstance(hook, type) and not _missing(hook):
        raise TypeError(
            f"{where} the class {hook.__name__}, not an instance; did you mean "
            f"{hook.__name__}(...)?"
        )
    if hook is None or isinstance(hook, type):
        lacks = ""
    else:
        missing = _missing(hook)
        if not missing:
            return
        lacks = f", which lacks {', '.join(missing)}"
    raise TypeError(
        f"{where} {_describe(hook)}{lacks}; expected a SessionRunHook instance (or an "
        f"object with the methods {', '.join(TF_HOOK_METHOD_NAMES)})."
    )
