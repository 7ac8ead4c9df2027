"""What the session layers get from a mode: the raw session, its `Backend`, how it is created.

A backend runs one merged step (the caller's fetches and the hooks'), and
knows the global step of every run on the host (a `StepCounter`): the *step
service* behind `SessionRunContext.global_step`. The session layers speak
only to these types and never ask which mode they are in.
"""

from __future__ import annotations

import logging
import operator
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, NamedTuple, Protocol, TypeAlias

from monsession._api._types import FeedDict, FeedKey, Fetches, Results, SessionLike

if TYPE_CHECKING:  # Not at import: `monsession.plugins.settle` imports no TensorFlow.
    import tensorflow as tf

    from monsession._fusion._loop import LoopRunner

logger = logging.getLogger("monsession")


HookResults = dict[object, Results]
"""What each hook that asked for something fetches, or got, keyed by the hook (any hook object)."""


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
    "tf.compat.v1.train.Saver | tf.train.Checkpoint | tf.train.CheckpointManager"
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


class Backend(Protocol):
    """Runs steps and knows the global step, in one execution mode."""

    def start_run(self) -> None:
        """Called before the hooks' `before_run` of every run."""

    def forget_step(self) -> None:
        """The current run (after `start_run`) is not a training step: the step after it
        is read from the device when a hook asks, and the next run starts from that read."""

    def global_step_before(self) -> int | None:
        """The global step before the current run, or `None` (see `SessionRunContext`)."""

    def global_step_after(self, reaching: Callable[[int], bool] | None = None) -> int | None:
        """The global step after the last run, or `None` (see `SessionRunContext`)."""

    def run(
        self,
        fetches: Fetches,
        hook_fetches: HookResults,
        feed_dict: FeedDict | None,
        options: tf.compat.v1.RunOptions | None,
        run_metadata: tf.compat.v1.RunMetadata | None,
        feed_owners: Mapping[FeedKey, str],
    ) -> tuple[Results, HookResults]:
        """Runs one step (the caller's fetches, or step) with each hook's fetches; returns
        `(caller_results, {hook: hook_results})`. `options`: merged, or `None` when nobody
        asked for any; `feed_owners`: the hook that fed each key, for error messages."""

    def loop_runner(self) -> LoopRunner | None:
        """What runs this backend's fused loops (see `_fusion`); `None`: it runs single steps."""


class StepCounter:
    """The global step on the host: counted per training run, read when unknown.

    Each training run that calls a step adds one on the host, so no run needs a device read to
    know its step. A run that is not a training step (`forget_step`) leaves the step unknown
    until it is read again. When a value read from the device shows that runs do not add one
    each, the counter logs it once and is *drifted*: from then on the backend reads the device
    whenever a hook needs the step.

    Args:
      read: Reads the global step from the device now; `None` when there
        is no global step (the step is then never known).
      value: The step read as the session starts, or `None` (unknown).
    """

    def __init__(self, read: Callable[[], int] | None, value: int | None = None) -> None:
        self._read = read
        self._before = value
        self._after = value
        self._stale = False
        self._uncounted = False
        self._drifted = False

    # Read-only properties, read on every run (made below the class: no Python call).
    before: int | None  # The step before the current run, or `None` (unknown).
    after: int | None  # The step after the last run (the next one's start), or `None`.
    stale: bool  # Whether the last run left the step unknown (`forget_step`), and no read followed.
    uncounted: bool  # Whether the current run is not a training step.
    drifted: bool  # Whether runs were seen not to add one each.

    def start_run(self, read_if_stale: bool = True) -> None:
        """A run begins: the step before it is the step after the last one (read first if
        the last run left it unknown and `read_if_stale`)."""
        if self._stale:
            self._stale = False
            if read_if_stale:
                self.refresh()
        self._before = self._after
        self._uncounted = False

    def forget_step(self) -> None:
        """The current run is not a training step: it does not add one."""
        self._uncounted = True

    def end_run(self, counted_step: bool) -> None:
        """The current run is over; `counted_step`: it called a step that adds one."""
        if self._uncounted:
            self._after, self._stale = None, self._read is not None
        elif counted_step and self._after is not None:
            self._after += 1

    def refresh(self) -> int:
        """Reads the device: the step after the last run."""
        assert self._read is not None
        self._after = int(self._read())
        self._stale = False
        return self._after

    def read_before(self) -> int:
        """Reads the device before a run starts (or the session): the step before it."""
        self._before = self.refresh()
        return self._before

    def learn_before(self, value: int) -> None:
        """The step before the current run, learned once asked (it was unknown)."""
        self._before = value

    def adopt(self, value: int | None) -> None:
        """The device showed `value` after the last run (`None`: only a read can tell)."""
        self._after, self._stale = value, False

    def advance(self, steps: int) -> None:
        """`steps` steps were scheduled (run later, on workers): counted now."""
        assert self._after is not None, "advance() needs a known step."
        self._after += steps

    def known_after(self) -> int | None:
        """The step after the last run, read first if the last run left it unknown."""
        if self._stale:
            self.refresh()
        return self._after

    def drift(self, message: str, *args: object) -> None:
        """Runs do not add one each: logs `message` once, and reads from now on."""
        if not self._drifted:
            logger.warning(message, *args)
        self._drifted = True


for _field in ("before", "after", "stale", "uncounted", "drifted"):
    setattr(StepCounter, _field, property(operator.attrgetter(f"_{_field}")))


def settle(session: SessionLike) -> None:
    """Waits until every step run so far has executed (joins the coordinator).

    For hooks that save or read state that the global step must describe, e.g.
    `CheckpointSaverHook` before each save and in `end()`. After the join the session compares
    the global step with the steps it ran, and warns once if a closure advanced it more than
    once (run again after its worker died). In graph mode, and in eager mode without a
    `ClusterCoordinator`, steps are done when `run()` returns: it returns at once.

    Args:
      session: The session a hook was given (`after_create_session`,
        `run_context.session`, `end`).

    Raises:
      Exception: Whatever a scheduled closure raised (as `ClusterCoordinator.join()`).
    """
    settle_closures = getattr(session, "settle", None)  # An `EagerSession`'s.
    if settle_closures is not None:
        settle_closures()
