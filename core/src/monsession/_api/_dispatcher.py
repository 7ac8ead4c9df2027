"""`HookDispatcher`: the one place that calls a session's hooks.

A monitored session builds one from its hook list when it is created (as
Keras builds its `CallbackList`), and every layer, loop and service of the
session calls the hooks through it. It sorts the hooks once by the methods
they override (`hook_overrides`), so a hook that overrides neither
`before_run` nor `after_run` costs nothing per step, and it names the
hooks whose state is saved beside checkpoints. The per-step calls are plain
loops over lists built here, in the hooks' order (pluggy never runs them).

Nothing here imports TensorFlow until a hook asks for run options or an
`after_run` raises.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from monsession._api._hook_api import NextAction, SessionRunHook, hook_overrides
from monsession._api._run_context import SessionRunArgs, SessionRunContext, SessionRunValues
from monsession._api._types import FeedKey, HookState, HookStateWriter, SessionLike, Unchecked

if TYPE_CHECKING:
    import tensorflow as tf

logger = logging.getLogger("monsession")

_new_tuple = tuple.__new__  # Builds a named tuple with no Python call (every step, every hook).
_NO_OWNERS: dict[Any, str] = {}
"""Which hook fed each key, when none did (shared: never written to)."""


def _name(hook: SessionRunHook | None) -> str:
    return type(hook).__name__


_Hooks = tuple[SessionRunHook, ...]


def _is_run_args(value: Unchecked) -> bool:
    """Accepts ours and `tf.compat.v1.train.SessionRunArgs` (same fields)."""
    return isinstance(value, tuple) and getattr(type(value), "_fields", None) == (
        SessionRunArgs._fields
    )


def _raise_if_feeds_intersect(
    feeds1: Iterable[FeedKey], feeds2: Iterable[FeedKey], message: str
) -> None:
    conflicts = set(feeds1) & set(feeds2)
    if conflicts:
        raise RuntimeError(f"{message} Conflict(s): {list(conflicts)}")


def _merge_run_options(options: tf.compat.v1.RunOptions, incoming: tf.compat.v1.RunOptions) -> None:
    """Merges `incoming` into `options`: numbers take the larger, flags OR."""
    options.trace_level = max(options.trace_level, incoming.trace_level)
    options.timeout_in_ms = max(options.timeout_in_ms, incoming.timeout_in_ms)
    options.inter_op_thread_pool = max(options.inter_op_thread_pool, incoming.inter_op_thread_pool)
    options.output_partition_graphs = (
        options.output_partition_graphs or incoming.output_partition_graphs
    )
    options.debug_options.debug_tensor_watch_opts.extend(
        incoming.debug_options.debug_tensor_watch_opts
    )
    options.debug_options.reset_disk_byte_usage = (
        options.debug_options.reset_disk_byte_usage or incoming.debug_options.reset_disk_byte_usage
    )
    options.report_tensor_allocations_upon_oom = (
        options.report_tensor_allocations_upon_oom or incoming.report_tensor_allocations_upon_oom
    )


def _merged_options(
    merged: tf.compat.v1.RunOptions | None,
    caller: tf.compat.v1.RunOptions | None,
    incoming: tf.compat.v1.RunOptions,
) -> tf.compat.v1.RunOptions:
    """`incoming` merged into the options `merged` so far (as TensorFlow: the caller's if given)."""
    if merged is None:
        if caller is None:
            import tensorflow as tf

            caller = tf.compat.v1.RunOptions()
        merged = caller
    _merge_run_options(merged, incoming)
    return merged


def _add_feeds(
    hook: SessionRunHook,
    feeds: Mapping[Any, Any],
    merged: dict[Any, Any] | None,
    owners: dict[Any, str],
) -> tuple[dict[Any, Any], dict[Any, str]]:
    """The hooks' `merged` feeds and their `owners` (new ones for the first), with `hook`'s."""
    if merged is None:
        merged, owners = {}, {}
    _raise_if_feeds_intersect(merged, feeds, "Same tensor is fed by two hooks.")
    merged.update(feeds)
    owners.update(dict.fromkeys(feeds, _name(hook)))
    return merged, owners


def _ends_the_data(error: BaseException) -> bool:
    """Whether `error` is an `OutOfRangeError` or `StopIteration` (the end of the input data)."""
    if isinstance(error, StopIteration):
        return True
    import tensorflow as tf

    return isinstance(error, tf.errors.OutOfRangeError)


def _state_key(hook: SessionRunHook) -> str | None:
    """`hook.state_key`; `None` for a hook of no monsession base that declares none."""
    if isinstance(hook, SessionRunHook):
        return hook.state_key
    return getattr(hook, "state_key", None)


def _keyed_states(hooks: Iterable[SessionRunHook], owner: str) -> dict[str, SessionRunHook]:
    """The hooks with state (`state_dict` and `load_state_dict` their own), by key."""
    keyed: dict[str, SessionRunHook] = {}
    counts: dict[str, int] = {}
    for hook in hooks:
        if not (hook_overrides(hook, "state_dict") and hook_overrides(hook, "load_state_dict")):
            continue
        key = _state_key(hook)
        if key is None:
            name = _name(hook)
            key = f"{name}[{counts.get(name, 0)}]"
            counts[name] = counts.get(name, 0) + 1
        elif not isinstance(key, str) or not key:
            raise TypeError(
                f"{owner}: {_name(hook)}.state_key must be a non-empty string "
                f"naming the hook's saved state, got {key!r}."
            )
        if key in keyed:
            raise ValueError(
                f"{owner}: {_name(hook)} and {_name(keyed[key])} "
                f"both save their state under the key {key!r}; give one of them another "
                "state_key."
            )
        keyed[key] = hook
    return keyed


def _checked_request(hook: SessionRunHook, request: Unchecked) -> SessionRunArgs:
    """`request`, what `hook.before_run` returned (not `None`), if a `SessionRunArgs`."""
    if type(request) is not SessionRunArgs and not _is_run_args(request):
        raise TypeError(
            f"{_name(hook)}.before_run() returned {request!r}; expected a SessionRunArgs or None."
        )
    return request  # type: ignore[return-value]


def _not_an_action(hook: SessionRunHook, action: Unchecked) -> TypeError:
    """The error for `action`, what `hook.next_action` returned: not a `NextAction`."""
    return TypeError(
        f"{_name(hook)}.next_action() returned {action!r}; expected a monsession.NextAction."
    )


def _not_the_end_of_data(hook: SessionRunHook | None, error: BaseException) -> RuntimeError:
    """The error raised for a hook's `OutOfRangeError` or `StopIteration` in `after_run`.

    E.g. a checkpoint or event file write failing with EFBIG, which TensorFlow
    reports as `OutOfRangeError`: not the end of the input data.
    """
    return RuntimeError(
        f"{_name(hook)}.after_run() failed with {type(error).__name__}: "
        f"{error}. An error of a hook is not the end of the input data: training "
        "stops with this error."
    )


class HookDispatcher:
    """Calls every method of one session's `hooks`, in their order (`owner`: the
    session's class name, for messages).

    Built once per session; the hook list does not change afterwards. Each
    method is called only on the hooks that override it (`hook_overrides`),
    except the five of TensorFlow's API other than the per-step pair, which
    every hook has and which are called on every hook, as TensorFlow does.
    Raises `TypeError` for a `state_key` that is not a non-empty string,
    `ValueError` for two stateful hooks with the same key.
    """

    def __init__(self, hooks: Iterable[SessionRunHook], owner: str = "MonitoredSession") -> None:
        self.hooks = tuple(hooks)
        self.before_run_hooks = self._overriding("before_run")
        self.after_run_hooks = self._overriding("after_run")
        before, after = set(map(id, self.before_run_hooks)), set(map(id, self.after_run_hooks))
        # Hooks that run per step, and of them those that plan ahead (`next_action`).
        self.per_step = tuple(h for h in self.hooks if id(h) in before or id(h) in after)
        self.planning = tuple(h for h in self.per_step if hook_overrides(h, "next_action"))
        self.every_step = tuple(h for h in self.per_step if not hook_overrides(h, "next_action"))
        self._ending = self._overriding("end")
        self._failing = self._overriding("on_failure")
        self._epoch_beginning = self._overriding("epoch_begin")
        self._epoch_ending = self._overriding("epoch_end")
        # The hooks whose state is saved, by key: a hook's `state_key`, else its class
        # name and its index among the stateful hooks of that class ("StepCounterHook[0]"),
        # and the hooks that save it.
        self.stateful = _keyed_states(self.hooks, owner)
        self.state_writers = self._overriding("use_hook_state")
        self._subsets: dict[frozenset[int], tuple[_Hooks, _Hooks]] = {}  # By `_chosen`.

    def _overriding(self, name: str) -> tuple[SessionRunHook, ...]:
        return tuple(hook for hook in self.hooks if hook_overrides(hook, name))

    def _chosen(self, chosen: frozenset[int]) -> tuple[_Hooks, _Hooks]:
        """Those of the hooks overriding `before_run`, and `after_run`, whose ids are `chosen`."""
        subsets = self._subsets.get(chosen)
        if subsets is None:
            before = tuple(hook for hook in self.before_run_hooks if id(hook) in chosen)
            after = tuple(hook for hook in self.after_run_hooks if id(hook) in chosen)
            subsets = self._subsets[chosen] = (before, after)
        return subsets

    @property
    def has_end_work(self) -> bool:
        """Whether some hook overrides `end()` (has work to do at a clean stop)."""
        return bool(self._ending)

    def has_epoch_end_work(self) -> bool:
        """Whether some hook overrides `epoch_end()` (it may read the epoch's last step)."""
        return bool(self._epoch_ending)

    def begin(self) -> None:
        """Calls every hook's `begin()`."""
        for hook in self.hooks:
            hook.begin()

    def use_hook_state(self, hook_state: HookStateWriter) -> None:
        """Hands `hook_state` to the hooks that override `use_hook_state` (`state_writers`)."""
        for hook in self.state_writers:
            hook.use_hook_state(hook_state)

    def after_create_session(
        self, session: SessionLike, coord: tf.train.Coordinator | None
    ) -> None:
        """Calls every hook's `after_create_session(session, coord)`."""
        for hook in self.hooks:
            hook.after_create_session(session, coord)

    def before_run(
        self,
        run_context: SessionRunContext,
        user_feeds: Mapping[Any, Any] | None,
        options: tf.compat.v1.RunOptions | None,
        chosen: frozenset[int] | None = None,
        told: Mapping[Any, int] | None = None,
    ) -> tuple[dict[Any, Any], Any, Any, dict[Any, str]]:
        """Calls `before_run` of the hooks `chosen` (ids; `None`: all), each told its
        silent steps when they differ (`told`), and merges their requests.

        Returns the fetches of each hook, the merged feeds and options, and which
        hook fed each key (for error messages). Raises `TypeError` for a request
        that is no `SessionRunArgs`, `RuntimeError` when two hooks, or a hook and
        the caller, feed the same key.
        """
        hook_fetches: dict[Any, Any] = {}
        hook_feeds: dict[Any, Any] | None = None
        feed_owners: dict[Any, str] = _NO_OWNERS
        merged_options = None
        if chosen is None:
            hooks = self.before_run_hooks
        else:  # Looked up without a call once known.
            hooks = (self._subsets.get(chosen) or self._chosen(chosen))[0]
        for hook in hooks:
            if told is not None:
                run_context._silent_steps = told[hook]
            request = hook.before_run(run_context)
            if request is None:
                continue
            if type(request) is not SessionRunArgs:
                request = _checked_request(hook, request)
            fetches, feeds, request_options = request
            if fetches is not None:
                hook_fetches[hook] = fetches
            if feeds:
                hook_feeds, feed_owners = _add_feeds(hook, feeds, hook_feeds, feed_owners)
            if request_options:
                merged_options = _merged_options(merged_options, options, request_options)
        if hook_feeds:
            user_feeds = _merge_feeds(user_feeds, hook_feeds)
        return hook_fetches, user_feeds, merged_options or options, feed_owners

    def after_run(
        self,
        run_context: SessionRunContext,
        hook_results: Mapping[Any, Any],
        run_options: tf.compat.v1.RunOptions | None,
        run_metadata: tf.compat.v1.RunMetadata | None,
        chosen: frozenset[int] | None = None,
        told: Mapping[Any, int] | None = None,
    ) -> None:
        """Calls `after_run` with each hook's results (`None` for a hook that asked for none);
        `chosen` and `told` as for `before_run`. Raises `RuntimeError` for a hook raising
        `OutOfRangeError` or `StopIteration`: not the end of the input data."""
        no_results = _new_tuple(SessionRunValues, (None, run_options, run_metadata))
        if chosen is None:
            hooks = self.after_run_hooks
        else:  # Looked up without a call once known.
            hooks = (self._subsets.get(chosen) or self._chosen(chosen))[1]
        hook: SessionRunHook | None = None
        try:
            for hook in hooks:
                if told is not None:
                    run_context._silent_steps = told[hook]
                if hook_results and hook in hook_results:
                    values = (hook_results[hook], run_options, run_metadata)
                    hook.after_run(run_context, _new_tuple(SessionRunValues, values))
                else:
                    hook.after_run(run_context, no_results)
        except Exception as error:
            if not _ends_the_data(error):
                raise
            raise _not_the_end_of_data(hook, error) from error

    def end(self, session: SessionLike) -> None:
        """Calls every hook's `end(session)`."""
        for hook in self.hooks:
            hook.end(session)

    def on_failure(self, session: SessionLike, error: BaseException) -> None:
        """Calls `on_failure(session, error)` of the hooks that override it, in order;
        what one raises is logged, and the next one called."""
        for hook in self._failing:
            try:
                hook.on_failure(session, error)
            except Exception:
                logger.exception(
                    "%s.on_failure() raised; the session's own error (%s: %s) propagates.",
                    _name(hook),
                    type(error).__name__,
                    error,
                )

    def next_actions(self, global_step: int) -> list[NextAction]:
        """Asks each hook that plans ahead when it next acts (`next_action`); raises
        `TypeError` for an answer that is not a `NextAction`."""
        actions = []
        for hook in self.planning:  # No comprehension: a call fewer, on every step.
            actions.append(action := hook.next_action(global_step))
            if not isinstance(action, NextAction):
                raise _not_an_action(hook, action)
        return actions

    state_keys = property(lambda self: list(self.stateful), doc="The keys of `stateful`.")

    def state_owner(self, key: str) -> str:
        """The class name of the hook whose state is saved under `key`."""
        return _name(self.stateful[key])

    def state_dict(self, key: str) -> HookState:
        """`state_dict()` of the hook whose state is saved under `key`."""
        return self.stateful[key].state_dict()

    def load_state_dict(self, key: str, state: HookState) -> None:
        """`load_state_dict(state)` of the hook whose state is saved under `key`."""
        self.stateful[key].load_state_dict(state)

    def epoch_begin(self, epoch: int) -> None:
        """Calls `epoch_begin(epoch)` of the hooks that override it."""
        for hook in self._epoch_beginning:
            hook.epoch_begin(epoch)

    def epoch_end(self, epoch: int) -> bool:
        """Calls `epoch_end(epoch)` of the hooks that override it; whether one returned True."""
        stop = False
        for hook in self._epoch_ending:
            stop = hook.epoch_end(epoch) is True or stop
        return stop


def _merge_feeds(
    user_feeds: Mapping[Any, Any] | None, hook_feeds: dict[Any, Any]
) -> Mapping[Any, Any] | None:
    if not user_feeds:
        return hook_feeds
    _raise_if_feeds_intersect(
        user_feeds, hook_feeds, "Same tensor is fed by a SessionRunHook and user."
    )
    hook_feeds.update(user_feeds)
    return hook_feeds
