"""The execution mode: what differs between graph and eager around the steps.

Everything that differs by mode before and around a session (building the
graph, resolving what hooks fetch, owning the global step, creating and
restoring the session, fusing steps) is a member of the `Mode` protocol,
implemented by `_graph_mode` and `_eager_mode`; `_current_mode` picks one.
Per-step work is the `Backend`'s (`_backend`). This module imports no
implementation.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, NamedTuple, ParamSpec, Protocol, TypeAlias

import tensorflow as tf

from monsession._api._types import Fetches, Results, SessionLike, Unchecked

if TYPE_CHECKING:
    from monsession._backends._backend import Backend, FeedDict

_P = ParamSpec("_P")


class Session(SessionLike, Protocol):
    """A raw session: a `tf.compat.v1.Session` (graph) or an `EagerSession` (eager)."""

    @property
    def graph(self) -> tf.Graph | None:
        """The session's graph; `None` in eager mode."""

    @property
    def sess_str(self) -> str:
        """The master it is connected to (graph mode)."""

    def run(
        self,
        fetches: Fetches,
        feed_dict: FeedDict | None = None,
        options: tf.compat.v1.RunOptions | None = None,
        run_metadata: tf.compat.v1.RunMetadata | None = None,
    ) -> Results:
        """Runs `fetches` (without hooks) and returns their values."""

    def close(self) -> None:
        """Closes the session."""


ScaffoldSaver: TypeAlias = (
    tf.compat.v1.train.Saver | tf.train.Checkpoint | tf.train.CheckpointManager
)
"""What saves and restores: a `Saver` (graph), or the state, object-based (see `Scaffold`)."""


class CreatedSession(NamedTuple):
    """A new raw session and the checkpoint it was restored from (`None`: none)."""

    session: Session
    restored_from: str | None


class ChiefRestore(NamedTuple):
    """What the chief's session is created from (see `ChiefSessionCreator`).

    Args:
      saver: The scaffold's saver (graph) or `tf.train.Checkpoint` /
        `CheckpointManager` (eager), or `None`.
      init_fn: The scaffold's `init_fn(session)`, or `None`.
      checkpoint_dir: Directory whose newest readable checkpoint is restored.
      checkpoint_path: A checkpoint to restore instead.
      prepare: Graph mode: a new session with the checkpoint at the given
        path restored, or the model initialized when `None`.
    """

    saver: ScaffoldSaver | None
    init_fn: Callable[[Session], None] | None
    checkpoint_dir: str | None
    checkpoint_path: str | None
    prepare: Callable[[str | None], Session]


class WorkerRestore(NamedTuple):
    """What a worker's session is created from (see `WorkerSessionCreator`).

    Args:
      wait: Graph mode: waits until the chief's model is ready; the session.
      saver: The scaffold's `tf.train.Checkpoint` (eager mode), or `None`.
      init_fn: The scaffold's `init_fn(session)`, or `None`.
      checkpoint_dir: The chief's checkpoint directory, or `None`.
      restores: Eager mode: whether this worker restores its own copy of the
        state from `checkpoint_dir` (or runs `init_fn`), as the workers of
        `MonitoredTrainingSession` do; otherwise its session starts empty.
      wait_for_peers: Eager mode: called once restored, to wait for the
        other workers of a multi-worker strategy.
    """

    wait: Callable[[], Session]
    saver: ScaffoldSaver | None = None
    init_fn: Callable[[Session], None] | None = None
    checkpoint_dir: str | None = None
    restores: bool = False
    wait_for_peers: Callable[[], None] | None = None


class Mode(Protocol):
    """What one execution mode decides before and around a session's steps."""

    eager: bool
    """Whether this is eager mode (`TrainingSettings.eager`, for plugins)."""

    fuses_steps: bool
    """Whether `steps_per_execution` may run several steps per call."""

    def build_graph(self, build: Callable[[], None]) -> None:
        """Runs `build`, which builds graph pieces; eager mode has no graph to build."""

    def keep_graph_finalization(self) -> Callable[[], None]:
        """Notes whether the default graph is finalized; returns what undoes finalizing it."""

    def own_global_step(self) -> None:
        """Gives the session a global step of its own when the program made none."""

    def check_hooks(self, owner: str, hooks: Sequence[Unchecked]) -> None:
        """Refuses hooks that cannot run in this mode, naming what to use instead."""

    def prepare_graph(self) -> None:
        """Adds what the backend fetches to the graph, after the hooks' `begin()`."""

    def create_chief_session(self, restore: ChiefRestore) -> CreatedSession:
        """The chief's session: the newest readable checkpoint restored, or initialized."""

    def create_worker_session(self, worker: WorkerRestore) -> CreatedSession:
        """A worker's session: graph mode waits for the chief's; eager mode may restore."""

    def multi_worker_strategy(self) -> tf.distribute.Strategy | None:
        """The current `tf.distribute` strategy if it spans several workers (eager mode)."""

    def make_backend(self, sess: Session, follow_step: bool) -> Backend:
        """The backend that runs the steps of `sess` (see `_backend.Backend`).

        `follow_step`: whether hooks are called per step (they may ask for
        the global step on every run).
        """

    def start_queue_runners(self, sess: Session, coord: tf.train.Coordinator) -> None:
        """Starts the graph's queue runners, if any, under `coord`."""

    def bind_call(
        self, owner: str, step: Callable[_P, Results], /, *args: _P.args, **kwargs: _P.kwargs
    ) -> object:
        """The fetches of `owner.call(step, *args, **kwargs)`; raises in graph mode."""

    def reruns_after_recovery(self, fetches: Fetches) -> bool:
        """Whether a run of `fetches` runs again once a preemption error re-created the session."""

    def resolve_fetch(self, owner: str, argument: str, target: Unchecked) -> Fetches:
        """What a hook fetches for `target` (see `monsession.plugins.resolve_fetch`)."""
