"""What a user sees of one run, per row, after a restart as after an uninterrupted run.

A run's records come from every process and session that trained in its
directory. Each session records the step it started at; what an earlier
session recorded after a step that a later one restored from (a killed or
aborted session's last steps, trained again) is superseded, as TensorBoard
purges orphaned events on a restart. Everything else is kept, in the order
it happened: a record made twice shows twice. Summaries are read with
the `EventAccumulator` TensorBoard's server loads runs with, which purges
at each `SessionLog.START` exactly as TensorBoard shows them. Values are rounded
(float32 training).
"""

from __future__ import annotations

import glob
import os
import re
from typing import Any

from tensorboard.backend.event_processing import plugin_event_accumulator
from tensorboard.util import tensor_util

from driver_matrix import checkpoints, keras_row, records, table

_LOGGED = re.compile(r"^step = (\d+)(?:\.0)?, w = (\S+?)(?: \(([\d.]+) sec\))?$")
_PROGRESS = re.compile(r"^step (\d+)/\d+(?: \(\d+%\), ([-\d.e+]+) steps/sec)?")
_RATE = re.compile(r"^\S+/sec: (\S+)$")  # The global step's name: "global_step", "iteration".
_DIVERGED = re.compile(r"^Model diverged with loss = NaN(?: at global step (\d+))?")


def _scalars(folder: str) -> list[dict[str, Any]]:
    """Every scalar TensorBoard shows of the event files in `folder`, in the order written.

    Read with the accumulator TensorBoard's own server loads runs with (every
    value as a tensor, `simple_value` scalars converted), which drops what a
    `SessionLog.START` supersedes of any kind (the legacy accumulator keeps
    tensor summaries, the eager kind, past a START).
    """
    if not os.path.isdir(folder):
        return []
    accumulator = plugin_event_accumulator.EventAccumulator(
        folder, size_guidance={plugin_event_accumulator.TENSORS: 0}
    )
    accumulator.Reload()
    found = [
        (e.wall_time, e.step, tag, float(tensor_util.make_ndarray(e.tensor_proto).reshape(())))
        for tag in accumulator.Tags()[plugin_event_accumulator.TENSORS]
        if accumulator.SummaryMetadata(tag).plugin_data.plugin_name == "scalars"
        for e in accumulator.Tensors(tag)
    ]
    return [
        {"t": t, "step": int(step), "tag": tag, "v": float(value)}
        for t, step, tag, value in sorted(found, key=lambda item: item[0])
    ]


class Run:
    """One run directory, read back."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.records = records.read(directory)
        self.starts = sorted((r["t"], r["step"]) for r in self.records if r["kind"] == "start")
        self.errors = [r["error"] for r in self.records if r["kind"] == "error"]
        self.finals = [r for r in self.records if r["kind"] == "final"]

    def kinds(self, *kinds: str) -> list[dict[str, Any]]:
        return [r for r in self.records if r["kind"] in kinds]

    def current(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The items (with `t` and `step`, the step after which each was made) in time order,
        but those that a later session superseded: made after the step it restored from."""
        return [
            item
            for item in sorted(items, key=lambda item: item["t"])
            if item["step"] is None
            or all(item["step"] <= step for t, step in self.starts if t > item["t"])
        ]

    def logs(self, pattern: re.Pattern[str]) -> list[tuple[dict[str, Any], re.Match[str]]]:
        return [
            (r, m) for r in self.records if r["kind"] == "log" and (m := pattern.match(r["msg"]))
        ]

    # One method per row: what a user sees.

    # What the matrix checks of every run: the event happened, and where each session began.

    def begins(self) -> list[float]:
        """When each process that ran this run began it."""
        return [r["t"] for r in self.kinds("begin")]

    def exits(self) -> list[int]:
        """The exit status of each process that ran this run (-9: SIGKILL, -15: SIGTERM)."""
        return [r["status"] for r in self.kinds("exit")]

    def start_steps(self) -> list[int]:
        return [step for _, step in self.starts]

    def fused_steps(self) -> list[int]:
        """The steps that ran inside the session's fused loop (the `Fused` hook's records)."""
        return [step for r in self.kinds("fused") for step in r["steps"]]

    def rates(self) -> list[tuple[float, float]]:
        """(time, steps/sec) of each StepCounterHook log line."""
        return [(r["t"], float(m[1])) for r, m in self.logs(_RATE)]

    def timed_lines(self) -> list[tuple[float, float]]:
        """(time, seconds since the previous line) of each timed LoggingTensorHook line."""
        return [(r["t"], float(m[3])) for r, m in self.logs(_LOGGED) if m[3]]

    def progress_rates(self) -> list[float]:
        return [float(m[2]) for _, m in self.logs(_PROGRESS) if m[2]]

    # One method per row: what a user sees.

    def checkpoint(self) -> dict[str, Any]:
        """The checkpoints on disk, read back (see `checkpoints.on_disk`), and the listeners'
        `after_save` calls: each step, with the weights of the latest checkpoint then."""
        saves = [[r["step"], r["w"]] for r in self.current(self.kinds("ckpt"))]
        return {**checkpoints.on_disk(os.path.join(self.directory, "ckpt")), "after_save": saves}

    def summary(self) -> list[Any]:
        events = [e for e in _scalars(os.path.join(self.directory, "summary")) if e["tag"] == "w"]
        return [[e["step"], round(e["v"], 4)] for e in events]

    def step_counter(self) -> list[Any]:
        events = _scalars(os.path.join(self.directory, "steps"))
        return [e["step"] for e in events if e["tag"].endswith("/sec")]

    def logging(self) -> list[Any]:
        lines = [
            {"t": r["t"], "step": int(m[1]), "w": round(float(m[2]), 4), "timed": bool(m[3])}
            for r, m in self.logs(_LOGGED)
        ]
        return [[line["step"], line["w"], line["timed"]] for line in self.current(lines)]

    def progress(self) -> list[Any]:
        lines = [{"t": r["t"], "step": int(m[1])} for r, m in self.logs(_PROGRESS)]
        return [line["step"] for line in self.current(lines)]

    def nan(self) -> dict[str, Any]:
        """The steps the sessions stopped at, and the step each divergence line names."""
        named = [m[1] for _, m in self.logs(_DIVERGED)]
        return {
            "stopped": self.stop(),
            "diverged": [None if step is None else int(step) for step in named],
        }

    def profiler(self) -> dict[str, Any]:
        folder = os.path.join(self.directory, "profile")
        timelines = sorted(
            int(m[1])
            for name in (os.listdir(folder) if os.path.isdir(folder) else [])
            if (m := re.match(r"timeline-(\d+)\.json$", name))
        )
        traces = glob.glob(os.path.join(folder, "plugins", "profile", "*", "*.xplane.pb"))
        return {"timelines": timelines, "traces": len(traces)}

    def mlflow(self) -> dict[str, Any]:
        """The runs in the store (read back with MlflowClient): their status, the steps and
        values of `w`, the steps of the rate."""
        from mlflow.tracking import MlflowClient

        if not os.path.exists(os.path.join(self.directory, "mlflow.db")):
            return {}
        client = MlflowClient(tracking_uri="sqlite:///" + os.path.join(self.directory, "mlflow.db"))
        found = client.search_runs([e.experiment_id for e in client.search_experiments()])

        def steps(run: Any, key: str) -> list[Any]:
            return sorted(m.step for m in client.get_metric_history(run.info.run_id, key))

        return {
            "status": [run.info.status for run in found],
            "w": [
                [
                    [m.step, round(m.value, 4)]
                    for m in sorted(
                        client.get_metric_history(run.info.run_id, "w"), key=lambda m: m.step
                    )
                ]
                for run in found
            ],
            "rate": [steps(run, "global_step/sec") for run in found],
        }

    def stop(self) -> list[int]:
        return [r["step"] for r in self.finals]

    def earlystop(self) -> Any:
        """Best step and value, the step it stopped at, and the step the run ended at."""
        last = self.finals[-1] if self.finals else {}
        best = last.get("best")
        return [
            last.get("best_step"),
            None if best is None else round(best, 4),
            last.get("stopped_step"),
            last.get("step"),
        ]

    def model(self) -> Any:
        """The final step, weight and step count, the epochs yielded, the batch of each step."""
        last = self.finals[-1] if self.finals else {}
        done = [[r["step"], r["epoch"]] for r in self.current(self.kinds("epoch"))]
        return [
            last.get("step"),
            round(last.get("w", 0.0), 4),
            last.get("count"),
            done,
            last.get("batches"),
        ]

    def observe(self, row: str) -> Any:
        if table.ROWS[row].keras:
            return keras_row.observe(self, row)
        return getattr(self, row.replace("-", "_"))()
