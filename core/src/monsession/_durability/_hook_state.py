"""Hook state that survives restarts: saved beside each checkpoint, restored with it.

A hook takes part by overriding two methods of `SessionRunHook` (whose
defaults mean "no state"):
`state_dict()` returns its state as plain JSON values, and
`load_state_dict(state)` takes such a value back. Core keeps the stateful
hooks of each monitored session (`HookStates`); the checkpoint family calls
`save_hook_state(session, prefix)` just before it writes the checkpoint
`prefix`, which writes ``<prefix>.hooks.json`` (through a temporary file and
one rename). The checkpoint's state file is updated only after that, so a
checkpoint that is the latest always has its hook state beside it.

When the chief's session creator restores a checkpoint (at start, after a
preemption, or an older one when the newest is damaged), it records which
(in eager mode every worker's creator does: each worker restores the
chief's checkpoint, hook state included);
the monitored session then loads ``<prefix>.hooks.json`` into the hooks
before their `after_create_session`. A hook whose state is missing or
cannot be loaded is named in a WARNING and keeps the state it had (a fresh
one on a restart).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import weakref
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from monsession._api._dispatcher import HookDispatcher
from monsession._api._hook_api import SessionRunHook
from monsession._api._types import HookState, SessionLike

logger = logging.getLogger("monsession")

STATE_SUFFIX = ".hooks.json"
_FORMAT = 1
_INDEX_SUFFIX = ".index"


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


class HookStates:
    """The stateful hooks of one monitored session, each under a stable key.

    The session's `HookDispatcher` names the hooks with state and their keys
    (`HookDispatcher.state_keys`) and calls their state methods.

    Args:
      hooks: The session's `HookDispatcher`.
    """

    def __init__(self, hooks: HookDispatcher) -> None:
        self._dispatcher = hooks
        self._keys = hooks.state_keys
        self._in_after_run = False
        self._written_in_step: str | None = None

    @property
    def keys(self) -> list[str]:
        """The keys of the stateful hooks, in the session's order."""
        return list(self._keys)

    def collect(self) -> dict[str, Any]:
        """Every stateful hook's `state_dict()`, by key, checked to be plain JSON.

        Raises:
          TypeError: If a hook returns something JSON cannot hold (names the hook).
        """
        states = {}
        for key in self._keys:
            state = self._dispatcher.state_dict(key)
            _strict_json(state, f"{self._dispatcher.state_owner(key)}.state_dict() (key {key!r})")
            states[key] = state
        return states

    def write(self, prefix: str) -> str | None:
        """Writes ``<prefix>.hooks.json`` in one rename; returns its path (`None`: no hook).

        Also deletes the hook-state files of checkpoints whose index file is
        gone (deleted by the saver's `max_to_keep`).
        """
        if not self._keys:
            return None
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

    @contextlib.contextmanager
    def after_run_calls(self) -> Iterator[None]:
        """Wraps one step's `after_run` calls: a state written during them is rewritten after.

        A hook's checkpoint is written from its `after_run`, before the hooks
        that come after it have seen the step. Once every `after_run` has
        returned, the state file is written again, so all the hooks' states
        are as of the end of the checkpoint's step. Not when one raises.
        """
        self._in_after_run, self._written_in_step = True, None
        try:
            yield
        finally:
            self._in_after_run = False
        prefix, self._written_in_step = self._written_in_step, None
        if prefix is not None:
            self.write(prefix)

    def restore(self, prefix: str) -> None:
        """Loads ``<prefix>.hooks.json`` into the hooks; warns for each one it cannot."""
        if not self._keys:
            return
        import tensorflow as tf

        path = prefix + STATE_SUFFIX
        if not tf.io.gfile.exists(path):
            logger.info(
                "No hook state beside checkpoint %s (%s is missing: the checkpoint was not "
                "written by a monsession CheckpointSaverHook); the hooks %s start fresh.",
                prefix,
                path,
                ", ".join(self._keys),
            )
            return
        try:
            with tf.io.gfile.GFile(path, "r") as state_file:
                saved = json.loads(state_file.read())
            states = saved["hooks"]
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
            self._restore_one(key, states, path)

    def _restore_one(self, key: str, states: Mapping[str, Any], path: str) -> None:
        name = self._dispatcher.state_owner(key)
        if key not in states:
            logger.warning(
                "%s (key %r) has no saved state in %s; it starts fresh.", name, key, path
            )
            return
        before = self._dispatcher.state_dict(key)
        try:
            self._dispatcher.load_state_dict(key, states[key])
        except Exception as error:
            logger.warning(
                "%s (key %r) could not load its saved state from %s (%s: %s); it starts fresh.",
                name,
                key,
                path,
                type(error).__name__,
                error,
            )
            self._dispatcher.load_state_dict(key, before)
            return
        logger.info("%s (key %r): state restored from %s.", name, key, path)


def _prune(directory: str, keep: str) -> None:
    """Deletes the hook-state files of `directory` whose checkpoint index is gone."""
    import tensorflow as tf

    try:
        names = tf.io.gfile.listdir(directory)
    except Exception:
        return
    present = set(names)
    for name in names:
        if not name.endswith(STATE_SUFFIX):
            continue
        path = os.path.join(directory, name)
        prefix = name[: -len(STATE_SUFFIX)]
        if path != keep and prefix + _INDEX_SUFFIX not in present:
            try:
                tf.io.gfile.remove(path)
            except Exception as error:
                logger.debug("Could not delete %s: %s", path, error)


_by_session: weakref.WeakKeyDictionary[Any, HookStates] = weakref.WeakKeyDictionary()


def attach(session: SessionLike, states: HookStates) -> None:
    """Makes `states` the hook states saved for checkpoints of `session`."""
    try:
        _by_session[session] = states
    except TypeError:
        logger.debug("%r cannot be weakly referenced: its hooks' state is not saved.", session)


def save_hook_state(session: SessionLike, checkpoint_prefix: str) -> str | None:
    """Writes the state of the hooks of `session`'s monitored session beside a checkpoint.

    Call it just before writing the checkpoint `checkpoint_prefix` (the path
    the saver will give it, e.g. ``<dir>/model.ckpt-<step>``), so that the
    file exists before the checkpoint's state file names the checkpoint:
    ``<checkpoint_prefix>.hooks.json``, written in one rename. The session
    restores it into the hooks when it is next created from that checkpoint.
    `CheckpointSaverHook` calls this for every checkpoint it writes; a hook
    package that writes its own checkpoints calls it too.

    ```python
    def after_run(self, run_context, run_values):
        prefix = f"{self._directory}/model.ckpt-{step}"
        monsession.plugins.save_hook_state(run_context.session, prefix)
        self._saver.save(run_context.session, prefix)
    ```

    Args:
      session: The session handed to the hook (`after_create_session`, `end`,
        `run_context.session`).
      checkpoint_prefix: The prefix of the checkpoint about to be written.

    Returns:
      The path written, or `None` when `session` belongs to no monitored
      session or none of its hooks has state.

    Raises:
      TypeError: If a hook's `state_dict()` is not plain JSON data (names the hook).
    """
    try:
        states = _by_session.get(session)
    except TypeError:
        return None
    if states is None:
        return None
    return states.write(os.fspath(checkpoint_prefix))


def attach_hook_state(session: SessionLike, hooks: Iterable[SessionRunHook], owner: str) -> None:
    """Makes the stateful hooks of `hooks` the ones saved and loaded for `session`.

    For a driver that runs hooks outside a monitored session (e.g. the Keras
    family's `HooksCallback`): afterwards `save_hook_state(session, prefix)`
    (called by `CheckpointSaverHook`) writes their state, and
    `load_hook_state(session, prefix)` loads it, as the monitored session does.

    Args:
      session: The session the driver hands to its hooks.
      hooks: The driver's hooks, in order (keys as in the monitored session).
      owner: The driver's name, for error messages.

    Raises:
      TypeError: If a hook's `state_key` is not a non-empty string.
      ValueError: If two hooks have the same key.
    """
    attach(session, HookStates(HookDispatcher(hooks, owner)))


def load_hook_state(session: SessionLike, checkpoint_prefix: str) -> bool:
    """Loads ``<checkpoint_prefix>.hooks.json`` into the hooks of `session`.

    What the monitored session does when it is created from a checkpoint:
    a missing state file is an INFO line (the hooks start fresh), an
    unreadable one or a hook whose state is missing or fails to load a
    WARNING naming it (that hook keeps the state it had).

    Args:
      session: A session of a monitored session, or one given to
        `attach_hook_state`.
      checkpoint_prefix: The prefix of the checkpoint training resumes from.

    Returns:
      Whether `session` has hooks whose state is kept (`False`: nothing to load).
    """
    try:
        states = _by_session.get(session)
    except TypeError:
        return False
    if states is None:
        return False
    states.restore(os.fspath(checkpoint_prefix))
    return True


def prune_hook_state(checkpoint_prefix: str, failed: bool = False) -> None:
    """Deletes the hook-state files beside checkpoints that no longer exist.

    Call it after writing the checkpoint `checkpoint_prefix`: the saver may
    have deleted older checkpoints (`max_to_keep`), whose
    ``.hooks.json`` files then go too. The file of `checkpoint_prefix`
    itself is kept, even before its index exists (an asynchronous save),
    unless the save `failed`.

    Args:
      checkpoint_prefix: The prefix of the checkpoint just written.
      failed: Whether writing it failed (its file goes too if it has no index).
    """
    prefix = os.fspath(checkpoint_prefix)
    _prune(os.path.dirname(prefix) or ".", keep="" if failed else prefix + STATE_SUFFIX)
