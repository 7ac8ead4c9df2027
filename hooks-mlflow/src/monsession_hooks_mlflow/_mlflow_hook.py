"""`MlflowHook`: logs a training run to MLflow, each step once across restarts."""

from __future__ import annotations

import signal
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

import monsession
from monsession import (
    NextAction,
    SessionRunArgs,
    SessionRunContext,
    SessionRunValues,
    TimedHook,
    tf_logging,
)
from monsession.plugins import as_run_context, check_flag, check_interval, check_schedule
from monsession_hooks_mlflow._sender import Row, RunSpec, Sender, as_rows, now_millis

_HOOK = "MlflowHook"
_RATE = "global_step/sec"
_CHECKPOINT_TAG = "monsession.checkpoint"
_CHECKPOINT_METRIC = "checkpoint"
# Rows kept in the hook state while the store does not take them (a dead store).
_MAX_KEPT_ROWS = 10_000
_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def _check_strings(argument: str, value: object, values: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise TypeError(
            f"{_HOOK}: {argument} must be a mapping of names to {values}, "
            f"got {type(value).__name__}."
        )
    checked = {}
    for key, item in value.items():
        if not isinstance(key, str) or not key:
            raise TypeError(f"{_HOOK}: {argument} keys must be non-empty strings, got {key!r}.")
        if isinstance(item, (str, int, float, bool)) and not (
            values == "strings" and not isinstance(item, str)
        ):
            checked[key] = str(item)
        else:
            raise TypeError(f"{_HOOK}: {argument}[{key!r}] must be one of {values}, got {item!r}.")
    return checked


def _check_metrics(metrics: object) -> dict[str, object]:
    if metrics is None:
        return {}
    if isinstance(metrics, str):
        return {metrics: metrics}
    if isinstance(metrics, Mapping):
        named = dict(metrics)
    elif isinstance(metrics, Sequence):
        named = {}
        for name in metrics:
            if not isinstance(name, str):
                raise TypeError(
                    f"{_HOOK}: metrics must be names, or a mapping of MLflow metric names to "
                    f"what to fetch; got {name!r} in the list."
                )
            named[name] = name
    else:
        raise TypeError(
            f"{_HOOK}: metrics must be a name, a list of names or a mapping of MLflow "
            f"metric names to fetches, got {type(metrics).__name__}."
        )
    for key in named:
        if not isinstance(key, str) or not key:
            raise TypeError(f"{_HOOK}: metrics keys must be non-empty strings, got {key!r}.")
        if key in (_RATE, _CHECKPOINT_METRIC):
            raise ValueError(f"{_HOOK}: metrics must not name {key!r}: the hook logs it.")
    return named


def _scalar(key: str, value: Any) -> float:
    array = np.asarray(value, dtype=np.float64)
    if array.size == 0:
        raise ValueError(f"{_HOOK}: metric {key!r} is empty; expected one number.")
    return float(array.mean())  # Several elements (one per replica): their mean.


class _CheckpointListener:
    """Tells the hook of each checkpoint `CheckpointSaverHook` completes."""

    def __init__(self, hook: MlflowHook, checkpoint_dir: str) -> None:
        self._hook = hook
        self._checkpoint_dir = checkpoint_dir

    def begin(self) -> None:
        """The saver began: the hook ends the run only after the saver's last save."""
        self._hook._listeners_open += 1

    def before_save(self, session: Any, global_step_value: int) -> None:
        """Nothing to do."""

    def after_save(self, session: Any, global_step_value: int) -> None:
        """The checkpoint of `global_step_value` is complete: its metrics may go."""
        import tensorflow as tf

        path = tf.train.latest_checkpoint(self._checkpoint_dir)
        self._hook._checkpoint_saved(int(global_step_value), path)

    def end(self, session: Any, global_step_value: int) -> None:
        """After the saver's last save: the hook may end the run."""
        self._hook._listener_ended()


class MlflowHook(TimedHook):
    """Logs metrics, parameters and the step rate of training to an MLflow run.

    Every `every_n_steps` global steps (or `every_n_secs` seconds) it fetches
    `metrics` and logs them, with the global steps per second since the last
    time (``global_step/sec``), at the global step reached. It starts the run
    when the session is created (or resumes one), logs `params` once, and
    ends the run when the session ends: ``FINISHED`` after a clean stop,
    ``FAILED`` from `on_failure`, ``KILLED`` when SIGTERM or SIGINT stopped it.

    **Each step once, across restarts.** The run id and the metrics not yet
    sent are saved with each checkpoint (its `state_key` is ``"MlflowHook"``),
    so a restarted job, or a session recovering from a preemption error,
    continues the same run. Metrics of a step reach MLflow only once a
    checkpoint at or after that step is complete: when the next checkpoint is
    begun (the checkpoint family completes the previous one first), at once
    with `checkpoint_listener`, and at the end. A restart therefore never
    finds in MLflow a step past the checkpoint it restored, and logs the steps
    after it with the continuing job's values. Pass ``exactly_once=False`` to
    send each logging point at once (no checkpoints, or duplicates accepted).

    **Never in training's way.** MLflow calls run in a background thread; on
    the steps where nothing is due `before_run` returns `None` and
    `next_action` lets fused steps run up to the next logging point. A store
    that cannot be reached or fails is named in one WARNING, and training
    goes on without tracking. `end()` waits at most `flush_timeout_secs`.

    On the chief only: under a multi-worker strategy the other workers' hooks
    do nothing (`monsession.is_chief()`).

    Args:
      metrics: What to log: a name or list of names (eager: entries of the
        mapping the step returns; graph: tensor names), or a mapping of MLflow
        metric names to fetches (names, tensors, variables, callables in
        eager mode). Each must hold one number (several: their mean).
      every_n_steps: Log every N global steps. Exactly one of `every_n_steps`
        and `every_n_secs`.
      every_n_secs: Log every N seconds.
      tracking_uri: The tracking store, e.g. ``"sqlite:///mlflow.db"`` or
        ``"http://host:5000"``; by default MLflow's (``MLFLOW_TRACKING_URI``).
      experiment_name: The experiment of a new run (created if missing); by
        default ``MLFLOW_EXPERIMENT_NAME``, ``MLFLOW_EXPERIMENT_ID`` or
        MLflow's default experiment.
      run_name: The name of a new run.
      run_id: An existing run to log into; by default ``MLFLOW_RUN_ID``. The
        run saved with a checkpoint takes precedence.
      tags: Tags of the run (strings).
      params: Parameters logged once, when the run is created (strings,
        numbers or booleans).
      exactly_once: Hold metrics until a checkpoint covers them (see above).
      flush_timeout_secs: The longest `end()` and `on_failure()` wait for
        MLflow.

    Raises:
      ValueError: If both or neither of `every_n_steps` and `every_n_secs`
        are given or one is not positive, or `metrics` names
        ``global_step/sec`` or ``checkpoint``, which the hook logs itself.
      TypeError: If an argument has the wrong type.
    """

    state_key = _HOOK
    _last_ended: MlflowHook | None = None  # The hook whose run a signal may still mark KILLED.

    def __init__(
        self,
        metrics: str | Sequence[str] | Mapping[str, Any] | None = None,
        every_n_steps: int | None = 100,
        every_n_secs: float | None = None,
        tracking_uri: str | None = None,
        experiment_name: str | None = None,
        run_name: str | None = None,
        run_id: str | None = None,
        tags: Mapping[str, str] | None = None,
        params: Mapping[str, Any] | None = None,
        exactly_once: bool = True,
        flush_timeout_secs: float = 30.0,
    ) -> None:
        check_schedule(_HOOK, "every_n_steps", every_n_steps, "every_n_secs", every_n_secs)
        for name, value in (
            ("tracking_uri", tracking_uri),
            ("experiment_name", experiment_name),
            ("run_name", run_name),
            ("run_id", run_id),
        ):
            if value is not None and (not isinstance(value, str) or not value):
                raise TypeError(f"{_HOOK}: {name} must be a non-empty string, got {value!r}.")
        check_flag(_HOOK, "exactly_once", exactly_once)
        check_interval(_HOOK, "flush_timeout_secs", flush_timeout_secs, "secs")
        super().__init__(every_steps=every_n_steps, every_secs=every_n_secs)
        self._metrics = _check_metrics(metrics)
        self._spec = RunSpec(
            tracking_uri=tracking_uri,
            experiment_name=experiment_name,
            run_name=run_name,
            run_id=run_id,
            tags=_check_strings("tags", tags, "strings"),
            params=_check_strings("params", params, "strings, numbers or booleans"),
        )
        self._exactly_once = bool(exactly_once)
        self._timeout = float(flush_timeout_secs)
        self._sender: Sender | None = None
        self._chief = True
        self._fetches: dict[str, object] = {}
        self._due = False
        self._lock = threading.Lock()  # Rows: training thread and checkpoint listener.
        self._reset_rows()
        self._restored: list[Row] = []
        self._restored_run_id: str | None = None
        self._previous_handlers: dict[int, Any] = {}
        self._next_batch = 0
        self._closed: Sender | None = None  # The sender of the run ended last.
        self._listeners_open = 0  # Checkpoint listeners begun and not yet ended.
        self._end_pending = False  # end() came before a listener's end().

    def _reset_rows(self) -> None:
        self._held: list[Row] = []  # Not yet covered by a complete checkpoint.
        self._in_flight: dict[int, list[Row]] = {}  # Handed to the sender, not yet sent.
        # The checkpoint begun and not known complete: (the global step before
        # the run that saved it, the last step of the metrics it holds).
        self._saving: tuple[int, int] | None = None
        self._released_here: set[int] = set()  # Batches released for the checkpoint begun.
        self._saved_in: int | None = None  # The run of the last state asked for.
        self._step_now: int | None = None  # The global step before the current run.

    @property
    def run_id(self) -> str | None:
        """The MLflow run's id once started (waits for the start); `None` before or without."""
        sender = self._sender or self._closed
        return None if sender is None else sender.run_id(self._timeout)

    def flush(self, timeout_secs: float | None = None) -> bool:
        """Waits until the metrics released so far (those a complete checkpoint covers, or
        all with ``exactly_once=False``) have reached the store.

        Args:
          timeout_secs: The longest wait; by default `flush_timeout_secs`.

        Returns:
          Whether they were sent (or dropped after a store failure) in time; `True`
          when no run is open.
        """
        if self._sender is None:
            return True
        return self._sender.flush(self._timeout if timeout_secs is None else timeout_secs)

    def checkpoint_listener(self, checkpoint_dir: str) -> _CheckpointListener:
        """A `CheckpointSaverListener` that reports each checkpoint to this hook.

        Pass it to the `CheckpointSaverHook` that saves into `checkpoint_dir`:
        metrics are then sent as soon as the checkpoint covering them is
        complete (instead of when the next one is begun), and each
        checkpoint is logged: its step as the metric ``checkpoint`` (value
        and step: the global step), its path as the tag
        ``monsession.checkpoint``.

        Args:
          checkpoint_dir: The saver's `checkpoint_dir`.
        """
        if not isinstance(checkpoint_dir, str) or not checkpoint_dir:
            raise TypeError(
                f"{_HOOK}: checkpoint_dir must be a non-empty string, got {checkpoint_dir!r}."
            )
        return _CheckpointListener(self, checkpoint_dir)

    def begin(self) -> None:
        MlflowHook._last_ended = None
        self._end_pending = False
        self._chief = monsession.is_chief()
        self._timer.reset()
        self._reset_rows()
        self._restored, self._restored_run_id = [], None
        if not self._chief:
            return
        self._fetches = {
            key: monsession.plugins.resolve_fetch(_HOOK, "metrics", fetch)
            for key, fetch in self._metrics.items()
        }
        self._install_signal_handlers()

    def load_state_dict(self, state: Any) -> None:
        """Takes back the run id, the schedule and the metrics saved with a checkpoint."""
        rows = as_rows(state["rows"])
        run_id = state["run_id"]
        super().load_state_dict(state)
        with self._lock:
            self._reset_rows()
        self._restored = rows
        self._restored_run_id = None if run_id is None else str(run_id)

    def state_dict(self) -> dict[str, Any]:
        """The run id, the schedule and every metric row not yet sent (a checkpoint is begun)."""
        state = super().state_dict()
        if not self._chief:
            return {**state, "run_id": None, "rows": []}
        with self._lock:
            self._mark_saving()
            # Sent batches leave the state, but those released for this very
            # checkpoint stay in it whether sent yet or not (a restart leaves
            # out what the run holds): what it holds does not depend on the
            # sender's speed.
            sent = self._sender.sent if self._sender is not None else set()
            gone = [b for b in self._in_flight if b in sent and b not in self._released_here]
            for batch_id in gone:
                del self._in_flight[batch_id]
            unsent = [row for rows in self._in_flight.values() for row in rows] + self._held
        unsent = sorted(unsent, key=lambda row: row[0])[-_MAX_KEPT_ROWS:]
        return {**state, "run_id": self.run_id, "rows": [list(row) for row in unsent]}

    def _mark_saving(self) -> None:
        """A checkpoint is being saved in the current run (lock held).

        The session may ask for the state more than once per checkpoint (again
        once every hook saw the step); a checkpoint is told from the next by
        the run it is saved in. The checkpoint family completes a checkpoint
        before it begins the next: the metrics the previous one covers may go.
        """
        if self._step_now is None:
            return  # Asked before any run (when a session restores).
        if self._step_now != self._saved_in:
            self._saved_in, self._released_here = self._step_now, set()
        if self._saving is not None and self._saving[0] != self._step_now:
            first = self._next_batch
            self._release(self._saving[1])
            self._released_here = set(range(first, self._next_batch))
            self._saving = None
        if self._held:
            self._saving = (self._step_now, self._held[-1][0])

    def after_create_session(self, session: Any, coord: Any) -> None:
        if not self._chief:
            return
        if self._sender is None:
            run_id = self._restored_run_id or self._spec.run_id
            self._sender = Sender(RunSpec(**{**vars(self._spec), "run_id": run_id}))
        elif self._restored_run_id not in (None, self._sender.run_id(self._timeout)):
            tf_logging.warning(
                "%s: the checkpoint restored names run %s; this session goes on logging into %s.",
                _HOOK,
                self._restored_run_id,
                self._sender.run_id(self._timeout),
            )
        if self._restored:
            # Covered by the checkpoint restored: sent, leaving out what the
            # run holds already (the previous process may have sent them).
            with self._lock:
                self._hand_over(self._restored, dedupe=True)
            self._restored = []

    def next_action(self, global_step: int) -> NextAction:
        self._step_now = global_step
        if not self._chief or self._sender is None:
            return NextAction()
        return super().next_action(global_step)

    def before_run(self, run_context: SessionRunContext) -> SessionRunArgs | None:
        run_context = as_run_context(run_context)
        step = self._step_now = run_context.global_step
        self._due = (
            self._sender is not None
            and step is not None
            and self._timer.should_trigger_for_step(step + 1)
        )
        if self._due and self._fetches:
            return SessionRunArgs(self._fetches)
        return None

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        if not self._due:
            return
        run_context = as_run_context(run_context)
        step = run_context.global_step_after(self._timer.should_trigger_for_step)
        if step is None:
            return
        elapsed_secs, elapsed_steps = self._timer.update_last_triggered_step(step)
        values = {key: _scalar(key, value) for key, value in (run_values.results or {}).items()}
        if elapsed_secs and elapsed_steps:
            values[_RATE] = elapsed_steps / elapsed_secs
        if values:
            self._add((step, now_millis(), values))

    def _add(self, row: Row) -> None:
        with self._lock:
            self._held.append(row)
            if not self._exactly_once:
                self._release(row[0])

    def _checkpoint_saved(self, step: int, path: str | None) -> None:
        """A checkpoint of `step` is complete (from the checkpoint listener)."""
        if self._sender is None:
            return
        with self._lock:
            self._held.append((step, now_millis(), {_CHECKPOINT_METRIC: float(step)}))
            self._held.sort(key=lambda row: row[0])
            self._release(step)
            if self._saving is not None and self._saving[1] <= step:
                self._saving = None
        if path:
            self._sender.set_tags({_CHECKPOINT_TAG: path})

    def _release(self, through: int) -> None:
        """Hands the held rows up to step `through` to the sender (lock held)."""
        ready = [row for row in self._held if row[0] <= through]
        if ready:
            self._held = self._held[len(ready) :]
            self._hand_over(ready, dedupe=False)

    def _hand_over(self, rows: list[Row], dedupe: bool) -> None:
        assert self._sender is not None
        batch_id, self._next_batch = self._next_batch, self._next_batch + 1
        self._in_flight[batch_id] = rows
        self._sender.send(batch_id, rows, dedupe)

    def end(self, session: Any) -> None:
        """Sends every metric and ends the run as ``FINISHED``."""
        if self._sender is None:
            return
        with self._lock:
            if self._held:
                self._release(self._held[-1][0])
        if self._listeners_open:
            self._end_pending = True  # A checkpoint saver's final save is still to come.
        else:
            self._close("FINISHED")

    def _listener_ended(self) -> None:
        self._listeners_open -= 1
        if self._end_pending and not self._listeners_open and self._sender is not None:
            self._end_pending = False
            self._close("FINISHED")

    def on_failure(self, session: Any, error: BaseException) -> None:
        """Sends what a complete checkpoint covers and ends the run as ``FAILED`` (``KILLED``
        for `KeyboardInterrupt`).

        The metrics after the last complete checkpoint are not sent: a restart
        from it logs those steps again.
        """
        self._listeners_open = 0
        if self._sender is None:
            return
        self._close("KILLED" if isinstance(error, KeyboardInterrupt) else "FAILED")

    def _close(self, status: str) -> None:
        assert self._sender is not None
        sender, self._sender = self._sender, None
        if not sender.close(status, self._timeout):
            tf_logging.warning(
                "%s: MLflow store %s did not take everything within flush_timeout_secs=%g; "
                "%d tasks were left.",
                _HOOK,
                sender.store,
                self._timeout,
                sender.pending_count(),
            )
        self._closed = sender
        MlflowHook._last_ended = self

    # Signals: core stops the session on SIGTERM/SIGINT, closes it (our
    # `end()` marks the run FINISHED), then delivers the signal again to the
    # handler that was there before its own: ours, installed in `begin()`.
    # It marks the run KILLED and passes the signal on.

    def _install_signal_handlers(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return  # Python takes signal handlers in the main thread only.
        for signum in _SIGNALS:
            previous = signal.getsignal(signum)
            if previous is None or previous == signal.SIG_IGN:
                continue
            self._previous_handlers[signum] = previous
            signal.signal(signum, self._on_signal)

    def _on_signal(self, signum: int, frame: Any) -> None:
        previous = self._previous_handlers.pop(signum, signal.SIG_DFL)
        signal.signal(signum, previous)
        if self._sender is not None:
            self._close("KILLED")
        elif self._closed is not None and MlflowHook._last_ended is self:
            self._mark_killed(self._closed)
        signal.raise_signal(signum)

    def _mark_killed(self, sender: Sender) -> None:
        run_id = sender.run_id(0)
        if run_id is None:
            return
        marker = Sender(RunSpec(**{**vars(self._spec), "run_id": run_id}))
        marker.close("KILLED", self._timeout)
