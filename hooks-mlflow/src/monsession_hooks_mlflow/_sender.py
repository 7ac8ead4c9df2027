"""The background sender: every MLflow call of `MlflowHook`, off the training thread.

One daemon thread per hook takes tasks from a queue in order: start or resume
the run, log batches of metric rows (deduplicated against the run's history
when they come back from a checkpoint), set tags, end the run. The first
failure is logged once, as a WARNING naming the store and the error; the
sender then drops what it is given, so a dead store costs training nothing.
MLflow is imported in that thread, never on the training thread.
"""

from __future__ import annotations

import dataclasses
import os
import queue
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from monsession import tf_logging
from monsession.plugins import error_cause

_HOOK = "MlflowHook"
# MLflow's limit of metrics in one `log_batch` call.
_BATCH = 1000
# Metrics wait in the sender at most this long, or until this many rows, to go in one call.
_GATHER_SECS = 1.0
_GATHER_ROWS = 1000

Row = tuple[int, int, dict[str, float]]
"""One logging point: (global step, wall-clock milliseconds, {metric: value})."""


@dataclasses.dataclass(frozen=True)
class RunSpec:
    """Which run to start or resume, and what a new run gets."""

    tracking_uri: str | None
    experiment_name: str | None
    run_name: str | None
    run_id: str | None
    tags: Mapping[str, str]
    params: Mapping[str, str]


@dataclasses.dataclass
class _Batch:
    rows: list[Row]
    dedupe: bool


class Sender:
    """Sends a run's metrics, tags and status to MLflow from a daemon thread.

    Args:
      spec: The run to start or resume.
    """

    def __init__(self, spec: RunSpec) -> None:
        self._spec = spec
        self._tasks: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
        self._started = threading.Event()
        self._run_id: str | None = None
        self._waited_out = False
        self._failed = False
        self._client: Any = None
        self.sent: set[int] = set()
        """The ids of the batches sent (or skipped after a failure)."""
        self._thread = threading.Thread(target=self._work, name="monsession-mlflow", daemon=True)
        self._thread.start()
        self._tasks.put(("start", None))

    @property
    def store(self) -> str:
        """The tracking URI, as MLflow resolves it (for messages)."""
        if self._spec.tracking_uri:
            return self._spec.tracking_uri
        return os.environ.get("MLFLOW_TRACKING_URI") or "MLflow's default store"

    def run_id(self, timeout: float) -> str | None:
        """The run's id once started; `None` if it could not be.

        Waits up to `timeout` s for the start, once: after a wait that ran
        out (a store that does not answer), no call waits again.
        """
        if not self._waited_out:
            self._waited_out = not self._started.wait(timeout)
        return self._run_id

    def send(self, batch_id: int, rows: list[Row], dedupe: bool) -> None:
        """Logs `rows`; with `dedupe`, leaves out (metric, step) pairs the run already holds."""
        self._tasks.put(("metrics", (batch_id, _Batch(rows, dedupe))))

    def set_tags(self, tags: Mapping[str, str]) -> None:
        """Sets tags on the run."""
        self._tasks.put(("tags", dict(tags)))

    def flush(self, timeout: float) -> bool:
        """Waits at most `timeout` s for the tasks queued so far; returns whether they were done."""
        done = threading.Event()
        self._tasks.put(("flush", done))
        return done.wait(timeout)

    def close(self, status: str | None, timeout: float) -> bool:
        """Sends what is queued, ends the run with `status` (`None`: leave it running).

        Waits at most `timeout` seconds; returns whether everything was done.
        """
        self._tasks.put(("close", status))
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def pending_count(self) -> int:
        """About how many tasks are still queued (for messages)."""
        return self._tasks.qsize()

    def _next(self, gathered: list[tuple[int, _Batch]], deadline: float) -> tuple[str, Any]:
        """The next task; ``("send", None)`` once metrics gathered wait past `deadline`."""
        if not gathered:
            return self._tasks.get()
        try:
            return self._tasks.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            return "send", None

    def _work(self) -> None:
        # Metrics are gathered for up to _GATHER_SECS and sent in one call:
        # each call is a transaction (SQLite) or a request, whose Python work
        # would otherwise take the interpreter from training at every step.
        gathered: list[tuple[int, _Batch]] = []
        deadline = 0.0
        while True:
            kind, payload = self._next(gathered, deadline)
            if kind == "metrics":
                if not gathered:
                    deadline = time.monotonic() + _GATHER_SECS
                gathered.append(payload)
                if sum(len(batch.rows) for _, batch in gathered) < _GATHER_ROWS:
                    continue
                kind = "send"
            self._send(gathered)  # Before any other task: tasks keep their order.
            gathered = []
            if kind == "close":
                if payload is not None and self._run_id is not None:
                    self._call(self._client.set_terminated, self._run_id, status=payload)
                return
            try:
                self._do(kind, payload)
            finally:
                if kind == "start":
                    self._started.set()

    def _send(self, gathered: list[tuple[int, _Batch]]) -> None:
        """Logs the rows of the gathered batches: one call for those that need no dedupe."""
        if self._run_id is not None:
            plain = [row for _, batch in gathered if not batch.dedupe for row in batch.rows]
            if plain:
                self._call(self._log_rows, _Batch(plain, dedupe=False))
            for _, batch in gathered:
                if batch.dedupe:
                    self._call(self._log_rows, batch)
        self.sent.update(batch_id for batch_id, _ in gathered)

    def _do(self, kind: str, payload: Any) -> None:
        if kind == "start":
            self._call(self._start)
        elif kind == "flush":
            payload.set()
        elif kind == "tags" and self._run_id is not None:
            self._call(self._log_tags, payload)

    def _call(self, function: Any, *args: Any, **kwargs: Any) -> None:
        if self._failed:
            return
        try:
            function(*args, **kwargs)
        except Exception as error:
            self._failed = True
            tf_logging.warning(
                "%s: MLflow store %s failed: %s: %s. Training goes on; this hook sends "
                "nothing more to MLflow in this session.",
                _HOOK,
                self.store,
                type(error).__name__,
                error_cause(error),
            )

    def _start(self) -> None:
        from mlflow.entities import Param, RunStatus
        from mlflow.tracking import MlflowClient

        spec = self._spec
        self._client = client = MlflowClient(tracking_uri=spec.tracking_uri)
        run_id = spec.run_id or os.environ.get("MLFLOW_RUN_ID") or None
        if run_id is not None:
            client.get_run(run_id)  # Fails for an unknown run.
            client.update_run(run_id, status=RunStatus.to_string(RunStatus.RUNNING))
            self._run_id = run_id
            return
        run = client.create_run(
            self._experiment_id(client), run_name=spec.run_name, tags=dict(spec.tags)
        )
        self._run_id = run.info.run_id
        params = [Param(key, value) for key, value in spec.params.items()]
        if params:
            client.log_batch(self._run_id, params=params)

    def _experiment_id(self, client: Any) -> str:
        name = self._spec.experiment_name or os.environ.get("MLFLOW_EXPERIMENT_NAME")
        if name:
            experiment = client.get_experiment_by_name(name)
            if experiment is not None:
                return str(experiment.experiment_id)
            return str(client.create_experiment(name))
        return os.environ.get("MLFLOW_EXPERIMENT_ID") or "0"

    def _log_rows(self, batch: _Batch) -> None:
        from mlflow.entities import Metric

        rows = batch.rows
        have: dict[str, set[int]] = {}
        if batch.dedupe:
            keys = {key for _, _, values in rows for key in values}
            have = {key: self._logged_steps(key) for key in keys}
        metrics = [
            Metric(key, value, millis, step)
            for step, millis, values in rows
            for key, value in values.items()
            if step not in have.get(key, ())
        ]
        for start in range(0, len(metrics), _BATCH):
            self._client.log_batch(self._run_id, metrics=metrics[start : start + _BATCH])

    def _logged_steps(self, key: str) -> set[int]:
        return {metric.step for metric in self._client.get_metric_history(self._run_id, key)}

    def _log_tags(self, tags: Mapping[str, str]) -> None:
        from mlflow.entities import RunTag

        self._client.log_batch(
            self._run_id, tags=[RunTag(key, value) for key, value in tags.items()]
        )


def now_millis() -> int:
    """Wall-clock milliseconds, as MLflow stamps metrics."""
    return int(time.time() * 1000)


def as_rows(state: Sequence[Any]) -> list[Row]:
    """Rows read back from a hook state, checked."""
    rows: list[Row] = []
    for step, millis, values in state:
        rows.append((int(step), int(millis), {str(k): float(v) for k, v in values.items()}))
    return rows
