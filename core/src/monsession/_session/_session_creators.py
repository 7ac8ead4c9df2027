"""Session creators: how a monitored session gets a ready session.

The chief restores the newest readable checkpoint through the mode (`ChiefSessionCreator`,
`Mode.create_chief_session`), workers wait for it, and `CoordinatedSessionCreator` starts the
session's threads and tells the hooks. Also the checks of a session's arguments.
"""

from __future__ import annotations

import abc
import dataclasses
import inspect
import logging
import os

import tensorflow as tf

from monsession._api._types import Unchecked, check_directory, check_interval
from monsession._backends._backend import ChiefRestore, CreatedSession, Session, WorkerRestore
from monsession._backends._mode import Mode, current_mode
from monsession._durability._retry import RetryPolicy, retry_policy_of
from monsession._fusion._fusion import Fusion
from monsession._session._hook_lifecycle import HookLifecycle
from monsession._session._hooked_session import HookSelection, _HookedSession
from monsession._session._scaffold import Scaffold
from monsession._session._session_layers import TFSessionCreator, _CoordinatedSession

logger = logging.getLogger("monsession")


class SessionCreator(metaclass=abc.ABCMeta):
    """A factory for sessions; a monitored session calls `create_restored()`."""

    retry_policy: RetryPolicy = RetryPolicy()
    """How a monitored session retries preemption errors of this creator's sessions."""

    @abc.abstractmethod
    def create_session(self) -> Session:
        """Returns a ready session (graph mode) or `EagerSession` (eager mode)."""
        raise NotImplementedError(f"create_session is not implemented for {self}.")

    def create_restored(self) -> CreatedSession:
        """A ready session and the checkpoint it was restored from (`None`: none)."""
        return CreatedSession(self.create_session(), None)


def check_step_fn(step_fn: Unchecked) -> None:
    """Checks that `run_step_fn` can call `step_fn(step_context)`."""
    try:
        if not callable(step_fn):
            raise TypeError(step_fn)
        names = tuple(inspect.signature(step_fn).parameters)
    except (TypeError, ValueError) as error:
        raise ValueError(f"`step_fn` must be a function; got {step_fn!r}.") from error
    if names not in (("step_context",), ("self", "step_context")):
        raise ValueError(
            "`step_fn` may either have one `step_context` argument, or `self` and "
            f"`step_context` arguments if it's an instance method. Got {names} instead."
        )


def check_session_arguments(
    owner: str, session_creator: Unchecked, stop_grace_period_secs: Unchecked
) -> None:
    """Checks the session creator (an instance with `create_session`) and the grace period
    (a number, not negative or NaN) a monitored session is given."""
    if session_creator is not None and (
        isinstance(session_creator, type)
        or not callable(getattr(session_creator, "create_session", None))
    ):
        raise TypeError(
            f"{owner}: session_creator must be a SessionCreator instance (e.g. "
            f"ChiefSessionCreator(...)) or None, got {_describe(session_creator)}."
        )
    check_interval(owner, "stop_grace_period_secs", stop_grace_period_secs, "secs", allow_zero=True)


def check_creator_arguments(
    owner: str,
    scaffold: Unchecked = None,
    master: Unchecked = "",
    config: Unchecked = None,
    checkpoint_dir: Unchecked = None,
    checkpoint_filename_with_path: Unchecked = None,
) -> None:
    """Checks the arguments a session creator takes, naming `owner` in errors."""
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


def _describe(value: Unchecked) -> str:
    if isinstance(value, type):
        return f"the class {value.__name__}, not an instance"
    return f"{value!r} of type {type(value).__name__}"


class _ScaffoldedCreator(SessionCreator):
    """Shared by the chief and worker creators: a scaffold and a SessionManager."""

    # How often a waiting worker asks whether the chief's model is ready (TensorFlow: 30 s;
    # every second costs one small session per second and starts a worker up to 29 s earlier).
    _poll_secs: float = 30

    def __init__(
        self, scaffold: Scaffold | None, master: str, config: tf.compat.v1.ConfigProto | None
    ) -> None:
        self._scaffold = scaffold or Scaffold()
        self._session_manager: tf.compat.v1.train.SessionManager | None = None
        self._master = master
        self._config = config

    def create_session(self) -> Session:
        return self.create_restored().session

    def _get_session_manager(self) -> tf.compat.v1.train.SessionManager:
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

    Graph mode: a `tf.compat.v1.Session` prepared by a `SessionManager` with the scaffold's ops
    and saver. Eager mode: the scaffold's `tf.train.Checkpoint` (or `CheckpointManager`)
    restores the latest checkpoint, otherwise the scaffold's `init_fn` runs.

    The checkpoint restored from `checkpoint_dir` is the newest that reads
    back whole: a damaged one is skipped with a WARNING naming its files, and
    the state file is rewritten to name the restored one. The hooks' state
    saved beside it (`SessionRunHook.use_hook_state`) is loaded into the hooks.

    Args:
      scaffold: A `Scaffold`; a default one when `None`.
      master: The TensorFlow master to connect to (graph mode).
      config: A `tf.compat.v1.ConfigProto` for the session (graph mode).
      checkpoint_dir: Directory whose latest checkpoint is restored.
      checkpoint_filename_with_path: A checkpoint file to restore instead.

    Raises:
      TypeError: If an argument has the wrong type.
      ValueError: If `checkpoint_dir` is a file or lies under a file.
      DamagedCheckpointError: From `create_session`, if `checkpoint_dir`
        holds checkpoint files but none can be read.
    """

    def __init__(
        self,
        scaffold: Scaffold | None = None,
        master: str = "",
        config: tf.compat.v1.ConfigProto | None = None,
        checkpoint_dir: str | os.PathLike[str] | None = None,
        checkpoint_filename_with_path: str | os.PathLike[str] | None = None,
    ) -> None:
        path = checkpoint_filename_with_path
        check_creator_arguments(
            "ChiefSessionCreator", scaffold, master, config, checkpoint_dir, path
        )
        super().__init__(scaffold, master, config)
        self._checkpoint_dir = None if checkpoint_dir is None else os.fspath(checkpoint_dir)
        self._checkpoint_filename_with_path = None if path is None else os.fspath(path)

    def create_restored(self) -> CreatedSession:
        """The chief's session and the checkpoint restored into it (`None`: initialized)."""
        self._scaffold.finalize()
        return current_mode().create_chief_session(
            ChiefRestore(
                saver=self._scaffold.saver,
                init_fn=self._scaffold.init_fn,
                checkpoint_dir=self._checkpoint_dir,
                checkpoint_path=self._checkpoint_filename_with_path,
                prepare=self._prepare_session,
            )
        )

    def _prepare_session(self, path: str | None) -> Session:
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
    restored the model, for at most `max_wait_secs`. Eager workers of
    `MonitoredTrainingSession` restore the chief's latest checkpoint instead.

    Args:
      scaffold: A `Scaffold`; a default one when `None`.
      master: The TensorFlow master to connect to (graph mode).
      config: A `tf.compat.v1.ConfigProto` for the session (graph mode).
      max_wait_secs: How long to wait for the session to become ready.

    Raises:
      TypeError: If an argument has the wrong type.
      ValueError: If `max_wait_secs` is negative or NaN.
    """

    _poll_secs = 1

    def __init__(
        self,
        scaffold: Scaffold | None = None,
        master: str = "",
        config: tf.compat.v1.ConfigProto | None = None,
        max_wait_secs: float = 30 * 60,
    ) -> None:
        check_creator_arguments("WorkerSessionCreator", scaffold, master, config)
        check_interval(
            "WorkerSessionCreator", "max_wait_secs", max_wait_secs, "secs", allow_zero=True
        )
        super().__init__(scaffold, master, config)
        self._max_wait_secs = max_wait_secs
        if max_wait_secs > 0:
            self.retry_policy = RetryPolicy(deadline_secs=float(max_wait_secs))

    def create_restored(self) -> CreatedSession:
        """The worker's session, once the chief's model is ready (see `_worker_restore`)."""
        self._scaffold.finalize()
        return current_mode().create_worker_session(self._worker_restore())

    def _worker_restore(self) -> WorkerRestore:
        """What the mode creates the session from: this worker restores nothing itself."""
        return WorkerRestore(self._wait_for_chief)

    def _wait_for_chief(self) -> Session:
        return self._get_session_manager().wait_for_session(
            self._master, config=self._config, max_wait_secs=self._max_wait_secs
        )


@dataclasses.dataclass(eq=False)
class CoordinatedSessionCreator(SessionCreator):
    """A monitored session's creator: the raw session (restored), its threads, the hooks told.

    Each session created (again after a preemption error): the raw session
    from `session_creator` (ours, or one of TensorFlow's), a coordinator and
    the queue runners, then `HookLifecycle.created`, then the hooked and
    coordinated layers. `fusion`: the session's `Fusion`, or `None`.
    """

    session_creator: SessionCreator | TFSessionCreator
    mode: Mode
    lifecycle: HookLifecycle
    stop_grace_period_secs: float
    fusion: Fusion | None
    selection: HookSelection
    coord: tf.train.Coordinator | None = dataclasses.field(default=None, init=False)
    tf_sess: Session | None = dataclasses.field(default=None, init=False)

    def __post_init__(self) -> None:
        # Its sessions are retried as `session_creator`'s, under the strategy of now.
        self.retry_policy = retry_policy_of(self.session_creator)

    def create_session(self) -> _CoordinatedSession:
        creator = self.session_creator
        if isinstance(creator, SessionCreator):
            created = creator.create_restored()
        else:  # TensorFlow's own creators.
            created = CreatedSession(creator.create_session(), None)
        self.tf_sess = created.session
        self.coord = tf.train.Coordinator(clean_stop_exception_types=[])
        self.mode.start_queue_runners(self.tf_sess, self.coord)
        self.lifecycle.created(self.tf_sess, self.coord, created.restored_from)
        hooked = _HookedSession(
            self.tf_sess, self.lifecycle, self.selection, self.mode, self.fusion
        )
        return _CoordinatedSession(hooked, self.coord, self.stop_grace_period_secs)
