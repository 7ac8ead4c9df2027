"""The innermost layer of a monitored session: the hooks around each step.

`_HookedSession` asks the hooks what to add to a run (`before_run`), runs the merged step on the
session's `Backend` and hands each hook its results (`after_run`), all through the session's
`HookDispatcher`. It never asks which mode it runs in: the backend (`_backend.Backend`) does the
rest. With a `Fusion` (eager mode), a run first runs the steps on which no hook acts, or runs
quiet (`_fusion`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from typing import NoReturn

import tensorflow as tf

from monsession._api._hook_api import SessionRunHook
from monsession._api._run_context import (
    _NOTHING_KEPT,
    SessionRunArgs,
    SessionRunContext,
    run_args,
)
from monsession._api._types import FeedKey, Unchecked
from monsession._backends._backend import Backend, Session
from monsession._backends._mode import Mode, current_mode
from monsession._durability._files import file_error_behind
from monsession._fusion._fusion import Call, Fusion
from monsession._fusion._loop import StepSource
from monsession._session._hook_lifecycle import HookLifecycle
from monsession._session._session_layers import Results, RunCall, _WrappedSession


def _some_of(where: str, hooks: Unchecked, own: Iterable[SessionRunHook]) -> list[SessionRunHook]:
    """`hooks`, checked to be some of the session's `own` hooks."""
    if isinstance(hooks, (str, bytes)) or not isinstance(hooks, Iterable):
        raise TypeError(
            f"{where}: hooks must be an iterable of the session's hooks (or [] for none), "
            f"got {hooks!r}."
        )
    own_by_id = {id(hook): hook for hook in own}
    chosen = []
    for index, hook in enumerate(hooks):
        if id(hook) not in own_by_id:
            raise ValueError(
                f"{where}: hooks[{index}] is {hook!r}, which is not one of the hooks the "
                "session was created with; a call can only run some of the session's "
                "own hook instances (their begin() and end() belong to the session)."
            )
        chosen.append(own_by_id[id(hook)])
    return chosen


class HookSelection:
    """What the current `run()` is: the hooks it calls (`None`: all), and whether it trains.

    Shared by the monitored session and every `_HookedSession` it creates,
    so a call retried after a preemption runs with the same choice.
    """

    def __init__(self) -> None:
        self.hooks: frozenset[int] | None = None  # ids of the chosen hooks.
        self.training = True  # Whether the call is a training step (adds one).

    @staticmethod
    def check(
        owner: str, hooks: Unchecked, training: Unchecked, own: Iterable[SessionRunHook]
    ) -> tuple[list[SessionRunHook] | None, bool]:
        """Checks the `hooks` and `training` arguments of `owner.run()`; returns them resolved.

        `hooks`: `None` (all), or some of the session's `own` hooks.
        `training`: `None` means "unless `hooks` is given".
        """
        if hooks is None and training is None:  # Every step of most loops: nothing to check.
            return None, True
        where = f"{owner}.run()"
        chosen = None if hooks is None else _some_of(where, hooks, own)
        if training is None:
            return chosen, chosen is None
        if not isinstance(training, bool):
            raise TypeError(
                f"{where}: training must be True (the call is a training step: it adds one to "
                "the global step), False (it is not: an evaluation) or None (a training step "
                f"unless hooks= is given), got {training!r}."
            )
        return chosen, training

    @contextlib.contextmanager
    def choose(self, hooks: Iterable[SessionRunHook] | None, training: bool) -> Iterator[None]:
        """Within the block, runs call only `hooks` (all when `None`), as training steps or not."""
        previous = self.hooks, self.training
        self.hooks = None if hooks is None else frozenset(map(id, hooks))
        self.training = training
        try:
            yield
        finally:
            self.hooks, self.training = previous


_new_tuple = tuple.__new__
_ALL_HOOKS = Call(None)
"""A step calling all the hooks the call chose, no step before it without them."""
_NO_OWNERS: dict[FeedKey, str] = {}
"""Which hook fed each key of a step no hook fed (shared: never written to)."""


class _HookedSession(_WrappedSession[Session]):
    """Calls the hooks around each step and merges their requests into it.

    `hooks` is the session's `HookLifecycle` (or the hooks, in order, to build
    one); only hooks overriding `before_run` or `after_run` are called per step.
    `fusion` (eager mode) runs the steps on which no hook acts, or is `None`.
    """

    def __init__(
        self,
        sess: Session,
        hooks: HookLifecycle | Iterable[SessionRunHook],
        selection: HookSelection | None = None,
        mode: Mode | None = None,
        fusion: Fusion | None = None,
    ) -> None:
        super().__init__(sess)
        self.selection = selection or HookSelection()
        self._lifecycle = hooks if isinstance(hooks, HookLifecycle) else HookLifecycle(hooks)
        self._dispatcher = self._lifecycle.dispatcher
        # Whether a step with all the hooks calls some hook before (after) the run.
        self._before = bool(self._dispatcher.before_run_hooks)
        self._after = bool(self._dispatcher.after_run_hooks)
        self._should_stop = False
        mode = mode or current_mode()
        self.backend: Backend = mode.make_backend(sess, bool(self._dispatcher.per_step))
        # Hooks that asked for no options see empty protos, as in TensorFlow,
        # allocated once per session rather than on every step.
        self._empty_protos = (tf.compat.v1.RunOptions(), tf.compat.v1.RunMetadata())
        # One context for every run, its step fields set before each (`run_hooked`).
        self._context = SessionRunContext(run_args(None, None), sess, self.backend)
        self._fusion = fusion
        if fusion is not None:
            fusion.attach(self.backend)

    def _check_stop(self) -> bool:
        return self._should_stop

    def run_call(self, call: RunCall) -> Results:
        if self._should_stop or self._sess is None:
            raise RuntimeError("Run called even after should_stop requested.")
        if self._fusion is None:
            return self.run_hooked(call)
        step = self._fusion.prepare(call.fetches, call.feed_dict, self.selection)
        if step.quiet:
            self.backend.start_run()
            try:
                fetches, feed_dict, options, metadata = step.fetches, call.feed_dict, *call[2:]
                return self.backend.run(fetches, {}, feed_dict, options, metadata, _NO_OWNERS)[0]
            except tf.errors.OutOfRangeError as error:
                _raise_file_error(error)
        if step.fetches is None:  # The silent steps took a step source's last input.
            return None
        return self.run_hooked(call, step)

    def run_hooked(self, call: RunCall, fused: Call = _ALL_HOOKS) -> Results:
        """One step with the hooks; `fused` (eager mode) says which hooks, and the
        steps that ran without them (with the outputs kept from those steps).

        The step's plan was made before it: which hooks it calls (the
        dispatcher sorts them once per choice of hooks), the context it gives
        them (one per session). A hook that overrides neither per-step method
        costs nothing; a step with no hook to call runs only the backend.
        """
        fetches, feed_dict, options, run_metadata = call
        silent, kept, due, told = fused[2:]
        if fused.fetches is not None:
            fetches = fused.fetches
        elif isinstance(fetches, StepSource):
            fetches = fetches.bind(silent)
        selection, backend, context = self.selection, self.backend, self._context
        chosen = selection.hooks if due is None else due
        backend.start_run()
        if not selection.training:
            # Not a training step (an evaluation, a second optimizer): it may
            # not add one to the global step, which is read again when needed.
            backend.forget_step()
        args = context._original_args
        if args.fetches is not fetches or args.feed_dict is not feed_dict:
            context._original_args = _new_tuple(SessionRunArgs, (fetches, feed_dict, None))
        context._stop_requested = context._ran = context._step_asked = False
        context._silent_steps, context._silent_outputs = silent, kept or _NOTHING_KEPT
        if self._before or chosen is not None:
            hook_fetches, feed_dict, options, feed_owners = self._dispatcher.before_run(
                context, feed_dict, options, chosen, told
            )
        else:
            hook_fetches, feed_owners = {}, _NO_OWNERS
        if options is not None and run_metadata is None:
            run_metadata = tf.compat.v1.RunMetadata()
        try:
            results, hook_results = backend.run(
                fetches, hook_fetches, feed_dict, options, run_metadata, feed_owners
            )
        except tf.errors.OutOfRangeError as error:
            _raise_file_error(error)
        context._ran = True
        if self._after or chosen is not None:
            empty_options, empty_metadata = self._empty_protos
            self._lifecycle.after_run(
                context,
                hook_results,
                empty_options if options is None else options,
                empty_metadata if run_metadata is None else run_metadata,
                chosen,
                told,
            )
        if context._stop_requested:
            self._should_stop = True
        return results


def _raise_file_error(error: tf.errors.OutOfRangeError) -> NoReturn:
    """Raises the file error behind a step's `OutOfRangeError`, else the error (end of data)."""
    file_error = file_error_behind(error)
    if file_error is None:
        raise error
    raise file_error from error
