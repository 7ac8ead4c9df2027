"""`CheckpointSaverHook`: saves checkpoints every N steps or seconds, in both modes."""

from __future__ import annotations

import contextlib
import os
import weakref
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

import tensorflow as tf

from monsession import (
    Scaffold,
    SessionRunContext,
    SessionRunValues,
    TimedHook,
    is_chief,
    tf_logging,
)
from monsession.plugins import (
    as_run_context,
    check_directory,
    check_flag,
    check_schedule,
    error_cause,
    lock_checkpoint_dir,
    prune_hook_state,
    read_global_step,
    require_global_step,
    settle,
)
from monsession_hooks_checkpoint._directory import (
    ensure_writable_directory,
    remove_unmerged_shards,
)
from monsession_hooks_checkpoint._eager_saving import check_manager_directory, is_object_checkpoint
from monsession_hooks_checkpoint._listener import LISTENER_METHODS, CheckpointSaverListener
from monsession_hooks_checkpoint._saving import Saving, make_saving

if TYPE_CHECKING:
    from monsession.plugins import HookStateWriter

_HOOK = "CheckpointSaverHook"
_PREEMPTION_ERRORS = (tf.errors.AbortedError, tf.errors.UnavailableError)


class CheckpointSaveError(OSError):
    """Writing a checkpoint failed (disk full, file too large, permission lost...).

    Raised instead of TensorFlow's error, which for a file-size limit is an
    `OutOfRangeError` that a session would take for the end of the data.
    """


def _check_listeners(listeners: Iterable[Any] | None) -> list[Any]:
    checked = list(listeners or [])
    for index, listener in enumerate(checked):
        missing = [name for name in LISTENER_METHODS if not callable(getattr(listener, name, None))]
        if missing:
            raise TypeError(
                f"{_HOOK}: listeners[{index}] is {listener!r}, which lacks {', '.join(missing)}; "
                f"expected a {CheckpointSaverListener.__name__}."
            )
    return checked


def _unsafe_to_save(error: BaseException) -> str | None:
    """Why saving after `error` could lose or spoil work, or `None` when it is safe."""
    if not isinstance(error, Exception):
        return "an interruption, not an error"
    if isinstance(error, (tf.errors.AbortedError, tf.errors.UnavailableError)):
        return "a preemption error: the session is being recovered or is gone"
    # TensorFlow's and monsession-hooks-debug's class: raised after the update
    # that made the loss NaN, so the variables hold it.
    if any(cls.__name__ == "NanLossDuringTrainingError" for cls in type(error).__mro__):
        return "the variables hold the update that made the loss NaN"
    return None


def _check_max_to_keep(max_to_keep: int | None) -> None:
    if max_to_keep is not None and (
        isinstance(max_to_keep, bool) or not isinstance(max_to_keep, int) or max_to_keep < 0
    ):
        raise ValueError(
            f"{_HOOK}: max_to_keep must be None or a non-negative int, got {max_to_keep!r}."
        )


def _check_basename(basename: Any) -> None:
    if not isinstance(basename, str) or not basename:
        raise (TypeError if not isinstance(basename, str) else ValueError)(
            f"{_HOOK}: checkpoint_basename must be a non-empty file name such as "
            f"'model.ckpt', got {basename!r}."
        )


def _check_scaffold(scaffold: Any) -> None:
    if scaffold is not None and not isinstance(scaffold, (Scaffold, tf.compat.v1.train.Scaffold)):
        raise TypeError(
            f"{_HOOK}: scaffold must be a monsession.Scaffold (or None), got {scaffold!r} of "
            f"type {type(scaffold).__name__}."
        )


class CheckpointSaverHook(TimedHook):
    """Saves checkpoints every N steps or seconds.

    A checkpoint is saved when the session is created, whenever `save_secs`
    seconds or `save_steps` steps have passed since the last scheduled one,
    and at `end()` if the last step was not saved yet.

    The schedule is kept across restarts: a save off the schedule (at
    `end()`, so at a stop step or after SIGTERM/SIGINT, or in
    `on_failure()`) does not move it, and a job restarted from that save
    (its timer restored with it, see `monsession.StatefulHook`) saves at the
    steps of the run that was never stopped: with ``save_steps=10``, a
    SIGTERM after step 31 saves 31, and the restart saves 40, 50, ...
    (TensorFlow's hook, which counts from the save restored, would save 41,
    51, ...). A fresh session (no checkpoint, or one without this hook's
    state) starts the schedule at the step it starts from, as TensorFlow's.

    Graph mode behaves as `tf.compat.v1.train.CheckpointSaverHook`: the
    `Saver` writes ``<checkpoint_dir>/<checkpoint_basename>-<step>``; with
    `save_graph_def`, ``graph.pbtxt`` is written when the session is created
    and a ``.meta`` file with every checkpoint; the graph, the meta graph and
    a CHECKPOINT `SessionLog` per save go to the directory's event file
    (`tf.compat.v1.summary.FileWriterCache`).

    Eager mode saves the `tf.train.Checkpoint` given as `saver` or as
    `scaffold.saver` (or a `tf.train.CheckpointManager`) through a
    `tf.train.CheckpointManager`, numbering the checkpoints by the global
    step, so that `tf.train.latest_checkpoint(checkpoint_dir)` finds them and
    the chief restores them when a session is created. No graph, meta graph
    or event file is written.

    Args:
      checkpoint_dir: Directory for the checkpoint files; created if needed.
      save_secs: Save every this many seconds.
      save_steps: Save every this many global steps.
      saver: Graph mode: a `tf.compat.v1.train.Saver`. Eager mode: a
        `tf.train.Checkpoint` or `tf.train.CheckpointManager`. By default the
        scaffold's saver, else (graph mode) the graph's only `Saver`.
      checkpoint_basename: File name prefix of the checkpoints.
      scaffold: A `Scaffold` whose `saver` to use.
      listeners: `CheckpointSaverListener`s called around every save.
      save_graph_def: Graph mode: whether to write ``graph.pbtxt`` and the
        ``.meta`` files.
      max_to_keep: Eager mode: how many recent checkpoints to keep (`None` or
        0 keeps all). Ignored for a given `CheckpointManager`, which keeps its
        own setting; in graph mode the `Saver` decides.
      async_save: `None` (the default) or `True`: eager mode writes the
        checkpoint files in a background thread, so the step that saves only
        reads the values and training goes on while the files are written.
        The write is waited for, and the save confirmed (its log line, its
        `after_save` listeners; a write that failed raises
        `CheckpointSaveError`), before the next save, in `end()`,
        `on_failure()` and when a recovery re-creates the session; every
        restore in the process waits for it first. A hard kill loses at
        most the save in flight. `False`: every save is written, and
        confirmed, before the step returns. Graph mode saves synchronously
        (`True` raises `ValueError` there).
      save_on_failure: Also save when the session fails (in `on_failure()`,
        which monsession calls instead of `end()` when the `with` block
        raises), if the step reached is not saved yet. Never for an error of
        this hook's own saving, for TensorFlow's preemption errors
        (`AbortedError`, `UnavailableError`), for a NaN loss
        (`NanLossDuringTrainingError`) or for interruptions that are not
        `Exception`s (`KeyboardInterrupt`, `SystemExit`).

    Raises:
      ValueError: If not exactly one of `save_secs` and `save_steps` is given,
        if the given one is not positive, if both `saver` and `scaffold` are
        given, if `checkpoint_dir` is a file (or lies under one), or if a
        `CheckpointManager` saves into another directory.
      TypeError: If `save_steps` is not an int or `save_secs` not a number
        (a `bool` or a string never is), or `checkpoint_dir`, `saver`, a
        listener, `scaffold`, `checkpoint_basename`, `save_graph_def`,
        `async_save` (`None` or a `bool`) or `save_on_failure` has the wrong
        type (a flag must be a `bool`).
      PermissionError: If `checkpoint_dir` cannot be created or written to.

    Raises (from `begin`):
      DirectoryLockedError: If another live process holds `checkpoint_dir`:
        on the chief the hook holds the directory's lock
        (`monsession.plugins.lock_checkpoint_dir`) from `begin()` (for
        `MonitoredTrainingSession`, from when the family builds it) to
        `end()` or `on_failure()`, with any session; it is the lock's only
        owner (core takes none).

    `checkpoint_dir` is checked at construction, before TensorFlow touches
    it; it is created in `begin()`.

    The hook fetches nothing: it learns the global step from the step
    service (`run_context.global_step_after`). On a step where it does not
    save it costs no `Session.run` and no device read; graph mode reads the
    global step once before a save, as TensorFlow does.

    Under `ParameterServerStrategy` with a `ClusterCoordinator`, each save
    and `end()` first wait for the closures in flight (`monsession.plugins.settle`),
    so a checkpoint holds exactly the steps its number counts.
    """

    def __init__(
        self,
        checkpoint_dir: str | os.PathLike[str],
        save_secs: float | None = None,
        save_steps: int | None = None,
        saver: Any = None,
        checkpoint_basename: str = "model.ckpt",
        scaffold: Any = None,
        listeners: Iterable[CheckpointSaverListener] | None = None,
        save_graph_def: bool = True,
        *,
        max_to_keep: int | None = 5,
        async_save: bool | None = None,
        save_on_failure: bool = False,
    ) -> None:
        tf_logging.info("Create CheckpointSaverHook.")
        if saver is not None and scaffold is not None:
            raise ValueError(
                f"{_HOOK}: You cannot provide both saver and scaffold. Pass the saver as "
                "Scaffold(saver=...) or to the hook, not both."
            )
        check_directory(_HOOK, "checkpoint_dir", checkpoint_dir)
        check_schedule(_HOOK, "save_steps", save_steps, "save_secs", save_secs)
        super().__init__(every_secs=save_secs, every_steps=save_steps)
        _check_max_to_keep(max_to_keep)
        _check_basename(checkpoint_basename)
        _check_scaffold(scaffold)
        check_flag(_HOOK, "save_graph_def", save_graph_def)
        if async_save is not None:
            check_flag(_HOOK, "async_save", async_save)
        if saver is not None and not (
            is_object_checkpoint(saver) or callable(getattr(saver, "save", None))
        ):
            raise TypeError(
                f"{_HOOK}: saver must be a tf.compat.v1.train.Saver (graph mode) or a "
                f"tf.train.Checkpoint / tf.train.CheckpointManager (eager mode); got {saver!r}."
            )
        self._checkpoint_dir = os.fspath(checkpoint_dir)
        if isinstance(saver, tf.train.CheckpointManager):
            check_manager_directory(saver, self._checkpoint_dir)
        self._save_path = os.path.join(self._checkpoint_dir, checkpoint_basename)
        self._checkpoint_basename = checkpoint_basename
        self._saver = saver
        self._scaffold = scaffold
        self._save_secs = save_secs
        self._save_steps = save_steps
        self._listeners = _check_listeners(listeners)
        self._save_graph_def = save_graph_def
        self._max_to_keep = max_to_keep
        self._async_save = None if async_save is None else bool(async_save)
        if not isinstance(save_on_failure, bool):
            raise TypeError(f"{_HOOK}: save_on_failure must be a bool, got {save_on_failure!r}.")
        self._save_on_failure = save_on_failure
        self._saving: Saving | None = None
        self._save_error: BaseException | None = None
        # The step of the save not yet confirmed (written in the background):
        # it counts as done, and its `after_save` listeners run, at the next
        # confirmation point (see `_confirm_pending`).
        self._pending_step: int | None = None
        # The step of the latest checkpoint written or restored: end() and
        # on_failure() do not write it twice. Not the timer's last trigger,
        # which off-schedule saves leave alone.
        self._saved_step: int | None = None
        # A listener asked to stop where no run context could take it.
        self._stop_asked = False
        # Releases this hook's share of the lock of `checkpoint_dir` once (also
        # if the hook is dropped unused, e.g. a session that was never built).
        self._directory_lock: weakref.finalize[[], CheckpointSaverHook] | None = None
        # What saves the hooks' state beside each checkpoint: handed over by
        # monsession's sessions after `begin()` (none under TensorFlow's).
        self._hook_state: HookStateWriter | None = None

    @property
    def checkpoint_dir(self) -> str:
        """The directory of the checkpoints (where a driver finds the one it resumes from)."""
        return self._checkpoint_dir

    # Whether this hook holds the one-chief lock of `checkpoint_dir`; the
    # workers' hook, which saves into a temporary directory, does not.
    _locks_checkpoint_dir = True

    def begin(self) -> None:
        ensure_writable_directory(self._checkpoint_dir, _HOOK)
        self._lock_checkpoint_dir()  # First: a second chief fails before anything is done.
        try:
            self._pending_step = None
            self._saved_step = None
            self._stop_asked = False
            self._hook_state = None
            self._saving = make_saving(
                self._checkpoint_dir,
                self._checkpoint_basename,
                self._saver,
                self._scaffold,
                save_graph_def=self._save_graph_def,
                max_to_keep=self._max_to_keep,
                async_save=self._async_save,
            )
            require_global_step(_HOOK)
            for listener in self._listeners:
                listener.begin()
        except BaseException:
            self._release_checkpoint_dir()
            raise

    def use_hook_state(self, hook_state: HookStateWriter) -> None:
        """Keeps what writes the hooks' state beside each checkpoint, before the checkpoint."""
        self._hook_state = hook_state

    def _lock_checkpoint_dir(self, chief: bool | None = None) -> None:
        """On the chief, takes the lock of `checkpoint_dir` now, until `end()` or `on_failure()`.

        `begin()` takes it (if not held yet). The family takes it as it builds
        the hook of `MonitoredTrainingSession`, before any hook's `begin()`,
        so that a second chief fails before the hooks in front of this one
        write anything (e.g. event files into the same directory).

        Args:
          chief: Whether this process is the chief; by default `is_chief()`.

        Raises:
          DirectoryLockedError: If another live process holds `checkpoint_dir`.
        """
        if not self._locks_checkpoint_dir or self._directory_lock is not None:
            return
        if not (is_chief() if chief is None else chief):
            return
        handle = lock_checkpoint_dir(self._checkpoint_dir)
        if handle is not None:
            self._directory_lock = weakref.finalize(self, handle.release)

    def _release_checkpoint_dir(self) -> None:
        lock, self._directory_lock = self._directory_lock, None
        if lock is not None:
            lock()  # The handle's release(), once.

    def after_create_session(self, session: Any, coord: Any) -> None:
        assert self._saving is not None, "begin() must be called first."
        # A recovery: the session restored after the save begun before the
        # error was complete (every restore waits for it); confirm it first.
        self._stop_asked |= self._confirm_pending(session)
        global_step = read_global_step(session)
        self._saving.after_create_session(session)
        # A timer restored with the checkpoint (or kept through a recovery)
        # goes on with its schedule; a fresh one starts it at this step.
        starts_schedule = self._timer.last_triggered_step() is None
        if starts_schedule:
            # Before saving, so that the state saved with it holds this trigger.
            self._timer.update_last_triggered_step(global_step)
        if self._already_saved(global_step):
            # Just restored from it: rewriting it in place could only lose it.
            tf_logging.info(
                "Checkpoint for step %d already saved; not writing it again.", global_step
            )
            self._saved_step = global_step
        else:
            self._save(session, global_step)

    def _already_saved(self, global_step: int) -> bool:
        """Whether the directory's latest checkpoint is the one of `global_step`."""
        assert self._saving is not None
        return self._saving.holds(global_step)

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        run_context = as_run_context(run_context)
        if self._stop_asked:
            self._stop_asked = False
            run_context.request_stop()
        global_step = run_context.global_step_after(self._timer.should_trigger_for_step)
        if global_step is None:
            return  # Not time to save: nothing was read or fetched.
        self._timer.update_last_triggered_step(global_step)
        if self._save(run_context.session, global_step):
            run_context.request_stop()

    def end(self, session: Any) -> None:
        assert self._saving is not None, "begin() must be called first."
        try:
            settle(session)  # The closures in flight count in the step read.
            last_step = read_global_step(session)
            if last_step != self._saved_step:
                # Off the schedule: the timer keeps its last trigger, so a
                # restart from this save saves at the uninterrupted run's steps.
                self._save(session, last_step)
            self._confirm_pending(session)
            for listener in self._listeners:
                listener.end(session, last_step)
        finally:
            try:
                self._saving.end()
            finally:
                self._release_checkpoint_dir()

    @contextlib.contextmanager
    def _save_errors(self, prefix: str) -> Iterator[None]:
        """Turns a failed write into `CheckpointSaveError` naming `prefix` and the directory.

        A failed save leaves no files of its own behind (its unmerged shards,
        its hook state); the checkpoints before it stay as they are.
        """
        try:
            yield
        except BaseException as error:
            remove_unmerged_shards(prefix)
            prune_hook_state(prefix, failed=True)
            if isinstance(error, _PREEMPTION_ERRORS):
                raise  # The session recovers from the latest checkpoint.
            if not isinstance(error, (tf.errors.OpError, OSError)):
                raise
            raise CheckpointSaveError(
                f"{_HOOK}: writing {prefix} into {self._checkpoint_dir} failed: "
                f"{type(error).__name__}: {error_cause(error)}. The previous checkpoint, "
                f"{tf.train.latest_checkpoint(self._checkpoint_dir)}, is kept."
            ) from error

    def on_failure(self, session: Any, error: BaseException) -> None:
        """Completes what was saved; with `save_on_failure`, saves the step reached.

        A pending background write is waited for (its `after_save` listeners
        run; if it failed, `CheckpointSaveError` is raised, which the session
        logs) and (graph mode) the event file flushed, as in `end()`.
        Listeners see `before_save`/`after_save` for a save made here, but no
        `end()`.
        """
        assert self._saving is not None, "begin() must be called first."
        try:
            self._confirm_pending(session)
            self._finish_on_failure(session, error)
        finally:
            try:
                self._saving.end()
            finally:
                self._release_checkpoint_dir()

    def _finish_on_failure(self, session: Any, error: BaseException) -> None:
        reason = _unsafe_to_save(error) if self._save_error is None else "this hook's save failed"
        if reason is not None:
            if self._save_on_failure:
                tf_logging.warning(
                    "%s: not saving after %s: %s.", _HOOK, type(error).__name__, reason
                )
            return
        if self._save_on_failure:
            step = read_global_step(session)
            if step == self._saved_step:
                tf_logging.info("%s: the session failed; step %d is already saved.", _HOOK, step)
            else:
                tf_logging.warning(
                    "%s: the session failed (%s: %s); saving step %d.",
                    _HOOK,
                    type(error).__name__,
                    error,
                    step,
                )
                self._save(session, step)  # Off the schedule, as in end().
                self._confirm_pending(session)

    def _save(self, session: Any, step: int) -> bool:
        """Saves a checkpoint for `step`; returns whether a listener asked to stop."""
        try:
            should_stop = self._save_and_notify(session, step)
        except BaseException as error:
            self._save_error = error
            raise
        self._saved_step = step
        return should_stop

    def _confirm_pending(self, session: Any) -> bool:
        """Waits for the save not yet confirmed, then counts it as done.

        The one point at which a save counts as done: its log line, its
        `after_save` listeners and the pruning of the hook state of the
        checkpoints `max_to_keep` deleted. A synchronous save is confirmed
        when it returns; a background one when the hook next waits for it:
        before the next save, in `end()`, `on_failure()`, and when the
        session is re-created (a recovery), never at a step chosen by the
        writer thread's timing. Returns whether a listener asked to stop.

        Raises:
          CheckpointSaveError: If the write failed.
        """
        assert self._saving is not None
        step, self._pending_step = self._pending_step, None
        if step is None:
            return False
        try:
            with self._save_errors(self._saving.prefix(step)):
                self._saving.finish()
                prune_hook_state(self._saving.prefix(step))  # Of checkpoints max_to_keep deleted.
        except BaseException as error:
            self._save_error = error
            raise
        return self._after_save(session, step)

    def _save_and_notify(self, session: Any, step: int) -> bool:
        assert self._saving is not None
        settle(session)  # The checkpoint holds exactly the steps counted.
        # The previous checkpoint is complete before listeners see a new one.
        should_stop = self._confirm_pending(session)
        tf_logging.info("Calling checkpoint listeners before saving checkpoint %d...", step)
        for listener in self._listeners:
            listener.before_save(session, step)
        tf_logging.info("Saving checkpoints for %d into %s.", step, self._save_path)
        with self._save_errors(f"{self._save_path}-{step}"):
            # The hooks' state first: the checkpoint is the latest only once
            # it is complete, and then its hook state is already beside it.
            if self._hook_state is not None:
                self._hook_state.save(self._saving.prefix(step))
            self._saving.save(session, step)
        self._pending_step = step
        if self._saving.background:
            return should_stop
        return self._confirm_pending(session) or should_stop

    def _after_save(self, session: Any, step: int) -> bool:
        """Runs the `after_save` listeners; returns whether one asked to stop."""
        tf_logging.info("Calling checkpoint listeners after saving checkpoint %d...", step)
        should_stop = False
        for listener in self._listeners:
            if listener.after_save(session, step):
                tf_logging.info(
                    "A CheckpointSaverListener requested that training be stopped. listener: %r",
                    listener,
                )
                should_stop = True
        return should_stop
