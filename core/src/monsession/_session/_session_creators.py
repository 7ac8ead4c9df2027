"""Session creators: how the chief and the workers get a ready session."""

from __future__ import annotations

import abc
import logging
import os
from typing import Any

import tensorflow as tf

from monsession._api._arguments import check_directory, check_interval
from monsession._backends._eager import EagerSession
from monsession._backends._mode import current_mode
from monsession._backends._owned_step import add_to_checkpoint
from monsession._durability._checkpoint_files import (
    read_back,
    report_and_repair,
    restore_newest,
)
from monsession._durability._hook_state import record_restore
from monsession._session._scaffold import Scaffold

logger = logging.getLogger("monsession")


class SessionCreator(metaclass=abc.ABCMeta):
    """A factory for sessions."""

    @abc.abstractmethod
    def create_session(self) -> Any:
        """Returns a ready session (graph mode) or `EagerSession` (eager mode)."""
        raise NotImplementedError(f"create_session is not implemented for {self}.")


def check_creator_arguments(
    owner: str,
    scaffold: Any = None,
    master: Any = "",
    config: Any = None,
    checkpoint_dir: Any = None,
    checkpoint_filename_with_path: Any = None,
) -> None:
    """Checks the arguments a session creator takes, naming `owner` in errors.

    Args:
      owner: Who checks (e.g. ``"ChiefSessionCreator"``).
      scaffold: `None`, a `monsession.Scaffold` or a `tf.compat.v1.train.Scaffold`.
      master: A string.
      config: `None` or a `tf.compat.v1.ConfigProto`.
      checkpoint_dir: `None` or a directory path (it may be missing or read-only).
      checkpoint_filename_with_path: `None` or a checkpoint path (a string).

    Raises:
      TypeError: If an argument has the wrong type.
      ValueError: If `checkpoint_dir` is a file or lies under one, or
        `checkpoint_filename_with_path` is empty.
    """
    if scaffold is not None and not isinstance(scaffold, (Scaffold, tf.compat.v1.train.Scaffold)):
        raise TypeError(
            f"{owner}: scaffold must be a monsession.Scaffold (or None), got {_describe(scaffold)}."
        )
    if not isinstance(master, str):
        raise TypeError(
            f"{owner}: master must be a string (e.g. '' or 'grpc://host:port'), got "
            f"{_describe(master)}."
        )
    if config is not None and not isinstance(config, tf.compat.v1.ConfigProto):
        raise TypeError(
            f"{owner}: config must be a tf.compat.v1.ConfigProto (or None), got "
            f"{_describe(config)}."
        )
    if checkpoint_dir is not None:
        check_directory(owner, "checkpoint_dir", checkpoint_dir, writable=False)
    path = checkpoint_filename_with_path
    if path is not None:
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(
                f"{owner}: checkpoint_filename_with_path must be a checkpoint path (a string, "
                f"e.g. 'train/model.ckpt-100'), got {_describe(path)}."
            )
        if not os.fspath(path):
            raise ValueError(
                f"{owner}: checkpoint_filename_with_path must be a checkpoint path, got ''."
            )


def _describe(value: Any) -> str:
    if isinstance(value, type):
        return f"the class {value.__name__}"
    return f"{value!r} of type {type(value).__name__}"


class _ScaffoldedCreator(SessionCreator):
    """Shared by the chief and worker creators: a scaffold and a SessionManager."""

    # How often a waiting worker asks whether the chief's model is ready.
    # TensorFlow's SessionManager asks every 30 seconds; asking every second
    # costs one small session per second on the cluster and starts a worker
    # (or a recovering one) up to 29 seconds earlier.
    _poll_secs: float = 30

    def __init__(self, scaffold: Scaffold | None, master: str, config: Any) -> None:
        self._scaffold = scaffold or Scaffold()
        self._session_manager: Any = None
        self._master = master
        self._config = config

    def _get_session_manager(self) -> Any:
        if self._session_manager is None:
            self._session_manager = tf.compat.v1.train.SessionManager(
                local_init_op=self._scaffold.local_init_op,
                local_init_feed_dict=self._scaffold.local_init_feed_dict,
                ready_op=self._scaffold.ready_op,
                ready_for_local_init_op=self._scaffold.ready_for_local_init_op,
                graph=tf.compat.v1.get_default_graph(),
                recovery_wait_secs=self._poll_secs,
            )
        return self._session_manager


class ChiefSessionCreator(_ScaffoldedCreator):
    """Creates the chief's session: initializes, or restores the latest checkpoint.

    Graph mode: a `tf.compat.v1.Session` prepared by a `SessionManager` with the
    scaffold's ops and saver. Eager mode: the scaffold's `tf.train.Checkpoint`
    (or `CheckpointManager`) restores the latest checkpoint, otherwise the
    scaffold's `init_fn` runs.

    In both modes the checkpoint restored from `checkpoint_dir` is the newest
    one that reads back whole: a damaged latest checkpoint is skipped with a
    WARNING naming its files, and the state file is rewritten to name the
    restored one. The hooks' state saved beside the restored checkpoint
    (see `monsession.plugins.save_hook_state`) is loaded into the monitored
    session's hooks.

    Args:
      scaffold: A `Scaffold`; a default one when `None`.
      master: The TensorFlow master to connect to (graph mode).
      config: A `tf.compat.v1.ConfigProto` for the session (graph mode).
      checkpoint_dir: Directory whose latest checkpoint is restored.
      checkpoint_filename_with_path: A checkpoint file to restore instead.

    Raises:
      TypeError: If `scaffold` is not a `Scaffold`, `master` not a string,
        `config` not a `ConfigProto`, or `checkpoint_dir` or
        `checkpoint_filename_with_path` not a path.
      ValueError: If `checkpoint_dir` is a file or lies under a file.

    Raises (from `create_session`):
      DamagedCheckpointError: If `checkpoint_dir` holds checkpoint files but
        none can be read.
    """

    def __init__(
        self,
        scaffold: Scaffold | None = None,
        master: str = "",
        config: Any = None,
        checkpoint_dir: str | os.PathLike[str] | None = None,
        checkpoint_filename_with_path: str | os.PathLike[str] | None = None,
    ) -> None:
        check_creator_arguments(
            "ChiefSessionCreator",
            scaffold,
            master,
            config,
            checkpoint_dir,
            checkpoint_filename_with_path,
        )
        super().__init__(scaffold, master, config)
        self._checkpoint_dir = None if checkpoint_dir is None else os.fspath(checkpoint_dir)
        self._checkpoint_filename_with_path = (
            None
            if checkpoint_filename_with_path is None
            else os.fspath(checkpoint_filename_with_path)
        )

    def create_session(self) -> Any:
        self._scaffold.finalize()
        if current_mode().eager:
            return create_eager_session(
                self._scaffold,
                self._checkpoint_dir,
                self._checkpoint_filename_with_path,
                repair_state_file=True,
            )
        path = self._checkpoint_filename_with_path
        choice = session = None
        if path is None and self._checkpoint_dir and self._scaffold.saver is not None:
            # A restore that finds damaged data is re-run, with the next
            # checkpoint, in a new session: no variable keeps a damaged value.
            choice, session = restore_newest(self._checkpoint_dir, self._prepare_session)
            path = choice.path
        if session is None:
            session = self._prepare_session(path)
        if path is not None and self._scaffold.saver is not None:
            record_restore(session, path)
        if choice is not None and choice.path is not None:
            report_and_repair(choice, repair=True)
            # As SessionManager does: the saver manages (and in time deletes)
            # the checkpoints of the state file, now only readable ones.
            self._scaffold.saver.recover_last_checkpoints(list(choice.readable))
            logger.info("Restored checkpoint %s.", choice.path)
        return session

    def _prepare_session(self, path: str | None) -> Any:
        """A new session: `path` restored, or the model initialized when `None`."""
        return self._get_session_manager().prepare_session(
            self._master,
            saver=self._scaffold.saver,
            checkpoint_filename_with_path=path,
            config=self._config,
            init_op=self._scaffold.init_op,
            init_feed_dict=self._scaffold.init_feed_dict,
            init_fn=self._scaffold.init_fn,
        )


class WorkerSessionCreator(_ScaffoldedCreator):
    """Creates a worker's session: waits until the chief has initialized the model.

    Graph mode: a `SessionManager` connects to `master` and checks every
    second (TensorFlow: every 30 seconds) whether the chief has initialized or
    restored the model, for at most `max_wait_secs`. Eager mode has no shared
    session to wait for: `MonitoredTrainingSession` gives eager workers a
    creator that restores the chief's latest checkpoint instead.

    Args:
      scaffold: A `Scaffold`; a default one when `None`.
      master: The TensorFlow master to connect to (graph mode).
      config: A `tf.compat.v1.ConfigProto` for the session (graph mode).
      max_wait_secs: How long to wait for the session to become ready.

    Raises:
      TypeError: If `scaffold` is not a `Scaffold`, `master` not a string,
        `config` not a `ConfigProto` or `max_wait_secs` not a number.
      ValueError: If `max_wait_secs` is negative or NaN.
    """

    _poll_secs = 1

    def __init__(
        self,
        scaffold: Scaffold | None = None,
        master: str = "",
        config: Any = None,
        max_wait_secs: float = 30 * 60,
    ) -> None:
        check_creator_arguments("WorkerSessionCreator", scaffold, master, config)
        check_interval(
            "WorkerSessionCreator", "max_wait_secs", max_wait_secs, "secs", allow_zero=True
        )
        super().__init__(scaffold, master, config)
        self._max_wait_secs = max_wait_secs

    def create_session(self) -> Any:
        self._scaffold.finalize()
        if current_mode().eager:
            return EagerSession()
        return self._get_session_manager().wait_for_session(
            self._master, config=self._config, max_wait_secs=self._max_wait_secs
        )


def create_eager_session(
    scaffold: Scaffold,
    checkpoint_dir: str | None,
    checkpoint_path: str | None = None,
    repair_state_file: bool = False,
) -> EagerSession:
    """An `EagerSession` whose state is restored, or initialized by `scaffold.init_fn`.

    `repair_state_file`: see `restore_eager_checkpoint` (the chief only).
    """
    session = EagerSession()
    restored = restore_eager_checkpoint(
        scaffold.saver, checkpoint_dir, checkpoint_path, repair_state_file=repair_state_file
    )
    if restored is None:
        init_fn = scaffold.init_fn
        if init_fn is not None:
            init_fn(session)
    else:
        # The chief's hooks saved their state beside the checkpoint; every worker of an
        # eager job restores it with the chief's checkpoint (the same keys, the same schedule).
        record_restore(session, restored)
    return session


def restore_eager_checkpoint(
    saver: Any,
    checkpoint_dir: str | None,
    checkpoint_path: str | None = None,
    repair_state_file: bool = False,
) -> str | None:
    """Restores the newest readable eager checkpoint into `saver`; returns its prefix.

    Args:
      saver: A `tf.train.Checkpoint`, a `tf.train.CheckpointManager` or `None`.
      checkpoint_dir: Directory to take the latest checkpoint from. Defaults
        to the manager's directory for a `CheckpointManager`.
      checkpoint_path: A checkpoint prefix to restore instead.
      repair_state_file: Whether to rewrite the directory's state file when
        its latest checkpoint was damaged (the chief, which owns it).

    Returns:
      The prefix of the checkpoint restored, or `None` when there was none.

    Raises:
      ValueError: If there is a checkpoint to restore but no `tf.train.Checkpoint`
        to restore it into.
      DamagedCheckpointError: If `checkpoint_dir` holds checkpoint files but
        none can be read.
    """
    checkpoint = saver
    if isinstance(saver, tf.train.CheckpointManager):
        checkpoint = saver.checkpoint
        checkpoint_dir = checkpoint_dir or saver.directory
    add_to_checkpoint(checkpoint)

    def restore(prefix: str, whole: bool = True) -> None:
        if not isinstance(checkpoint, tf.train.Checkpoint):
            raise ValueError(
                f"Found checkpoint {prefix!r} to restore, but in eager mode there is nothing to "
                f"restore it into: Scaffold.saver is {saver!r}. Pass the state as "
                "Scaffold(saver=tf.train.Checkpoint(model=..., optimizer=..., step=global_step))."
            )
        # Every existing object must match: a restore re-run after damaged
        # data was found leaves no value of the damaged checkpoint behind.
        status = checkpoint.restore(prefix)
        status.assert_existing_objects_matched()
        if whole:
            try:
                status.assert_consumed()
            except AssertionError:
                # Values for objects not created yet (e.g. an optimizer's
                # slots) are read when they are, too late to fall back.
                read_back(prefix)

    path = checkpoint_path
    if path:
        restore(path, whole=False)
    elif checkpoint_dir:
        choice, _ = restore_newest(checkpoint_dir, restore)
        report_and_repair(choice, repair=repair_state_file)
        path = choice.path
    if not path:
        return None
    logger.info("Restored checkpoint %s.", path)
    return path
