"""`HookLifecycle`: the one order in which every driver (the monitored session,
`HooksCallback`) takes its hooks through a run; `HookStates`: the hooks' state, written
as ``<checkpoint prefix>.hooks.json`` (one rename) before each checkpoint."""

from __future__ import annotations

import json
import logging
import os
import weakref
from collections.abc import Hashable, Iterable, Mapping
from typing import TYPE_CHECKING

from monsession._api._dispatcher import HookDispatcher
from monsession._api._hook_api import SessionRunHook
from monsession._api._run_context import SessionRunContext
from monsession._api._types import HookState, SessionLike
from monsession._attributes import deprecated
from monsession._backends._backend import settle

if TYPE_CHECKING:
    import tensorflow as tf

    from monsession._backends._backend import HookResults

logger = logging.getLogger("monsession")

STATE_SUFFIX = ".hooks.json"
_FORMAT = 1
_INDEX_SUFFIX = ".index"


class HookStates:
    """The state of one driver's stateful hooks, saved beside checkpoints (a `HookStateWriter`).

    Args:
      hooks: The driver's `HookDispatcher`, which names the stateful hooks
        and their keys (`HookDispatcher.stateful`).
    """

    def __init__(self, hooks: HookDispatcher) -> None:
        # Weakly: a hook keeps this object (`use_hook_state`), and the driver the hooks.
        self._hooks = weakref.ref(hooks)
        self._keys = list(hooks.stateful)
        self._in_after_run = False
        self._written_in_step: str | None = None

    def _dispatcher(self) -> HookDispatcher:
        dispatcher = self._hooks()
        if dispatcher is None:
            raise RuntimeError("The hooks whose state this is are gone with their session.")
        return dispatcher

    @property
    def keys(self) -> list[str]:
        """The keys of the stateful hooks, in the hooks' order."""
        return list(self._keys)

    def collect(self) -> dict[str, HookState]:
        """Every stateful hook's `state_dict()`, by key, checked to be plain JSON.

        Raises:
          TypeError: If a hook returns something JSON cannot hold (names the hook).
        """
        states: dict[str, HookState] = {}
        dispatcher = self._dispatcher()
        for key in self._keys:
            hook = dispatcher.stateful[key]
            state = hook.state_dict()
            _strict_json(state, f"{type(hook).__name__}.state_dict() (key {key!r})")
            states[key] = state
        return states

    def save(self, checkpoint_prefix: str) -> str | None:
        """See `HookStateWriter.save`; also deletes the state files of deleted checkpoints."""
        if not self._keys or self._hooks() is None:  # No state, or its driver is gone.
            return None
        prefix = os.fspath(checkpoint_prefix)
        if self._in_after_run:
            self._written_in_step = prefix
        text = json.dumps({"format": _FORMAT, "hooks": self.collect()}, allow_nan=True, indent=1)
        import tensorflow as tf

        path = prefix + STATE_SUFFIX
        directory = os.path.dirname(prefix) or "."
        tf.io.gfile.makedirs(directory)  # The saver would create it too.
        temporary = f"{path}.monsession-tmp-{os.getpid()}"
        with tf.io.gfile.GFile(temporary, "w") as state_file:
            state_file.write(text)
        tf.io.gfile.rename(temporary, path, overwrite=True)
        _prune(directory, keep=path)
        return path

    def after_run_starts(self) -> None:
        """Before a step's `after_run` calls: a state saved during them is saved again after.

        The hooks after the one that saved have not seen the step yet; once all
        returned (`after_run_ends`), every hook's state is as of the end of the step.
        """
        self._in_after_run, self._written_in_step = True, None

    def after_run_ends(self, returned: bool) -> None:
        """After them: saves a state saved meanwhile again if every `after_run` `returned`."""
        self._in_after_run = False
        prefix, self._written_in_step = self._written_in_step, None
        if returned and prefix is not None:
            self.save(prefix)

    def load(self, checkpoint_prefix: str) -> None:
        """Loads ``<checkpoint_prefix>.hooks.json`` into the hooks; warns for each one it cannot.

        A missing file is an INFO line (the hooks start fresh); an unreadable
        one, or a hook whose state is missing or fails to load, a WARNING
        naming it (that hook keeps the state it had).
        """
        if not self._keys:
            return
        import tensorflow as tf

        path = os.fspath(checkpoint_prefix) + STATE_SUFFIX
        if not tf.io.gfile.exists(path):
            logger.info(
                "No hook state beside checkpoint %s (%s is missing: the checkpoint was not "
                "written by a monsession CheckpointSaverHook); the hooks %s start fresh.",
                checkpoint_prefix,
                path,
                ", ".join(self._keys),
            )
            return
        try:
            with tf.io.gfile.GFile(path, "r") as state_file:
                states = json.loads(state_file.read())["hooks"]
            if not isinstance(states, Mapping):
                raise ValueError("'hooks' is not a mapping")
        except Exception as error:
            logger.warning(
                "The hook state file %s cannot be read (%s: %s); the hooks %s start fresh.",
                path,
                type(error).__name__,
                error,
                ", ".join(self._keys),
            )
            return
        for key in self._keys:
            self._load_one(key, states, path)

    def _load_one(self, key: str, states: Mapping[str, HookState], path: str) -> None:
        hook = self._dispatcher().stateful[key]
        name = type(hook).__name__
        if key not in states:
            logger.warning(
                "%s (key %r) has no saved state in %s; it starts fresh.", name, key, path
            )
            return
        before = hook.state_dict()
        try:
            hook.load_state_dict(states[key])
        except Exception as error:
            logger.warning(
                "%s (key %r) could not load its saved state from %s (%s: %s); it starts fresh.",
                name,
                key,
                path,
                type(error).__name__,
                error,
            )
            hook.load_state_dict(before)
            return
        logger.info("%s (key %r): state restored from %s.", name, key, path)


class HookLifecycle:
    """Takes one driver's hooks through their lifecycle, through one `HookDispatcher`.

    Args:
      hooks: The hooks, in order.
      owner: The session's (or driver's) class name, for messages.

    Raises:
      TypeError: If a stateful hook's `state_key` is not a non-empty string.
      ValueError: If two stateful hooks have the same key.
    """

    def __init__(self, hooks: Iterable[SessionRunHook], owner: str = "MonitoredSession") -> None:
        self.dispatcher = HookDispatcher(hooks, owner)
        """The `HookDispatcher` that calls the hooks (`before_run` goes straight to it)."""
        self.hook_state = HookStates(self.dispatcher)
        """The hooks' `HookStates`: what `use_hook_state` hands the hooks."""
        if not self.hook_state.keys:
            self.after_run = self.dispatcher.after_run  # type: ignore[method-assign]

    def begin(self) -> None:
        """Calls every hook's `begin()`, then hands `hook_state` to the hooks that take it."""
        self.dispatcher.begin()
        self.dispatcher.use_hook_state(self.hook_state)

    def created(
        self,
        session: SessionLike,
        coord: tf.train.Coordinator | None,
        restored_from: str | None,
    ) -> None:
        """A session was created: loads the hooks' state, then calls `after_create_session`.

        Args:
          session: The session the hooks are given.
          coord: The session's coordinator (graph mode), or `None`.
          restored_from: The checkpoint the session was restored from, or `None`:
            the hooks' state saved beside it is loaded first (a restored
            timer decides whether they act on the first step).
        """
        _attach(session, self.hook_state, self.dispatcher)  # For the deprecated functions.
        if restored_from is not None:
            self.hook_state.load(restored_from)
        self.dispatcher.after_create_session(session, coord)

    def after_run(
        self,
        run_context: SessionRunContext,
        hook_results: HookResults,
        run_options: tf.compat.v1.RunOptions | None,
        run_metadata: tf.compat.v1.RunMetadata | None,
        chosen: frozenset[int] | None = None,
        told: Mapping[Hashable, int] | None = None,
    ) -> None:
        """Calls `after_run`; a hook state written meanwhile is rewritten once all returned.

        Without hook states this is the dispatcher's own `after_run` (set in
        `__init__`: no call in between on every step).
        """
        states = self.hook_state
        states.after_run_starts()
        try:
            self.dispatcher.after_run(
                run_context, hook_results, run_options, run_metadata, chosen, told
            )
        except BaseException:
            states.after_run_ends(returned=False)
            raise
        states.after_run_ends(returned=True)

    def end(self, session: SessionLike) -> None:
        """A clean stop: waits for the steps in flight (`settle`), then every hook's `end()`."""
        settle(session)  # Hooks end on the steps counted.
        self.dispatcher.end(session)

    def failed(self, session: SessionLike, error: BaseException) -> None:
        """The run failed: `on_failure(session, error)` of the hooks that override it."""
        self.dispatcher.on_failure(session, error)


def _strict_json(value: HookState, where: str) -> str:
    """`value` as JSON text; raises TypeError naming `where` for anything else."""
    try:
        return json.dumps(value, allow_nan=True, sort_keys=True)
    except (TypeError, ValueError) as error:
        raise TypeError(
            f"{where} returned {value!r}, which is not plain JSON data ({error}). Return "
            "dicts, lists, strings, numbers, booleans and None (convert NumPy values with "
            "float() or int())."
        ) from error


def _prune(directory: str, keep: str) -> None:
    """Deletes the hook-state files of `directory` whose checkpoint index is gone."""
    import tensorflow as tf

    try:
        names = tf.io.gfile.listdir(directory)
    except Exception:
        return
    present = set(names)
    for name in names:
        path = os.path.join(directory, name)
        prefix = name[: -len(STATE_SUFFIX)]
        if name.endswith(STATE_SUFFIX) and path != keep and prefix + _INDEX_SUFFIX not in present:
            try:
                tf.io.gfile.remove(path)
            except Exception as error:
                logger.debug("Could not delete %s: %s", path, error)


def prune_hook_state(checkpoint_prefix: str, failed: bool = False) -> None:
    """Deletes the hook-state files beside checkpoints that no longer exist.

    Call it after writing the checkpoint `checkpoint_prefix` (its saver may
    have deleted older ones, `max_to_keep`). Its own file is kept, even before
    its index exists (an asynchronous save), unless the save `failed`.

    Args:
      checkpoint_prefix: The prefix of the checkpoint just written.
      failed: Whether writing it failed (its file goes too if it has no index).
    """
    prefix = os.fspath(checkpoint_prefix)
    _prune(os.path.dirname(prefix) or ".", keep="" if failed else prefix + STATE_SUFFIX)


# Deprecated since 1.1: the hook state by session, read only by the functions below.
_by_session: weakref.WeakKeyDictionary[SessionLike, tuple[HookStates, HookDispatcher]] = (
    weakref.WeakKeyDictionary()
)


def _attach(session: SessionLike, states: HookStates, hooks: HookDispatcher) -> None:
    try:
        _by_session[session] = (states, hooks)
    except TypeError:
        logger.debug("%r cannot be weakly referenced: its hooks' state is not saved.", session)


def _warn(name: str, stacklevel: int = 3) -> None:
    entry = deprecated(f"monsession.plugins.{name}")
    assert entry is not None
    entry.warn(stacklevel)


def _attached(session: SessionLike, name: str) -> HookStates | None:
    _warn(name, stacklevel=4)
    try:
        attached = _by_session.get(session)
    except TypeError:
        return None
    return None if attached is None else attached[0]


def save_hook_state(session: SessionLike, checkpoint_prefix: str) -> str | None:
    """Deprecated: writes the hooks' state of `session`'s monitored session beside a checkpoint.

    Use the `HookStateWriter` a hook is given by `SessionRunHook.use_hook_state`:
    ``hook_state.save(checkpoint_prefix)``.

    Returns:
      The path written, or `None` when `session` belongs to no monitored
      session or none of its hooks has state.
    """
    states = _attached(session, "save_hook_state")
    return None if states is None else states.save(checkpoint_prefix)


def attach_hook_state(session: SessionLike, hooks: Iterable[SessionRunHook], owner: str) -> None:
    """Deprecated: makes the stateful `hooks` the ones `save_hook_state(session, ...)` saves.

    Use `HookLifecycle(hooks, owner)`: it hands the hooks their `HookStates`
    and loads it in `created(session, coord, restored_from)`.
    """
    _warn("attach_hook_state")
    dispatcher = HookDispatcher(hooks, owner)
    _attach(session, HookStates(dispatcher), dispatcher)


def load_hook_state(session: SessionLike, checkpoint_prefix: str) -> bool:
    """Deprecated: loads ``<checkpoint_prefix>.hooks.json`` into the hooks of `session`.

    Use `HookLifecycle.created(session, coord, restored_from=checkpoint_prefix)`,
    or `HookLifecycle.hook_state.load(checkpoint_prefix)`.

    Returns:
      Whether `session` has hooks whose state is kept (`False`: nothing to load).
    """
    states = _attached(session, "load_hook_state")
    if states is None:
        return False
    states.load(checkpoint_prefix)
    return True
