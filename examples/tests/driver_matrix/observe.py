"""What a user sees of one run, per row, after a restart as after an uninterrupted run.

A run's records come from every process and session that trained in its
directory. Each session records the step it started at; what an earlier
session recorded after a step that a later one restored from (a killed or
aborted session's last steps, trained again) is superseded, as TensorBoard
purges orphaned events on a restart. Values are rounded (float32 training).
"""

from __future__ import annotations

import glob
import os
import re
from typing import Any

from tensorboard.backend.event_processing import event_file_loader
from tensorboard.util import tensor_util

from driver_matrix import keras_row, records, table

_LOGGED = re.compile(r"^step = (\d+)(?:\.0)?, w = (\S+?)( \([\d.]+ sec\))?$")
_PROGRESS = re.compile(r"^step (\d+)/\d+")


def _scalars(folder: str) -> list[dict[str, Any]]:
    found = []
    for path in sorted(glob.glob(os.path.join(folder, "events.*"))):
        for event in event_file_loader.LegacyEventFileLoader(path).Load():
            for value in event.summary.value:
                if value.HasField("simple_value"):
                    number = float(value.simple_value)
                else:
                    number = float(tensor_util.make_ndarray(value.tensor).reshape(()))
                found.append(
                    {"t": event.wall_time, "step": int(event.step), "tag": value.tag, "v": number}
                )
    return found


class Run:
    """One run directory, read back."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.records = records.read(directory)
        self.starts = sorted((r["t"], r["step"]) for r in self.records if r["kind"] == "start")
        self.errors = [r["error"] for r in self.records if r["kind"] == "error"]
        self.finals = [r for r in self.records if r["kind"] == "final"]

    def current(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The items (with `t` and `step`) that no later session superseded, by step."""
        kept: dict[Any, dict[str, Any]] = {}
        for item in sorted(items, key=lambda item: item["t"]):
            later = [step for t, step in self.starts if t > item["t"]]
            if item["step"] is None or all(item["step"] <= step for step in later):
                kept[item["step"]] = item
        return [kept[step] for step in sorted(kept, key=lambda s: -1 if s is None else s)]

    def logs(self, pattern: re.Pattern[str]) -> list[tuple[dict[str, Any], re.Match[str]]]:
        return [
            (r, m) for r in self.records if r["kind"] == "log" and (m := pattern.match(r["msg"]))
        ]

    # One method per row: what a user sees.

    def checkpoint(self) -> list[Any]:
        saves = [r for r in self.records if r["kind"] == "ckpt"]
        return [[r["step"], [round(w, 4) for w in r["w"]]] for r in self.current(saves)]

    def summary(self) -> list[Any]:
        events = [e for e in _scalars(os.path.join(self.directory, "summary")) if e["tag"] == "w"]
        return [[e["step"], round(e["v"], 4)] for e in self.current(events)]

    def step_counter(self) -> list[Any]:
        events = _scalars(os.path.join(self.directory, "steps"))
        return [e["step"] for e in self.current([e for e in events if e["tag"].endswith("/sec")])]

    def logging(self) -> list[Any]:
        lines = [
            {"t": r["t"], "step": int(m[1]), "w": round(float(m[2]), 4), "timed": bool(m[3])}
            for r, m in self.logs(_LOGGED)
        ]
        return [[line["step"], line["w"], line["timed"]] for line in self.current(lines)]

    def progress(self) -> list[Any]:
        lines = [{"t": r["t"], "step": int(m[1])} for r, m in self.logs(_PROGRESS)]
        return [line["step"] for line in self.current(lines)]

    def nan(self) -> int:
        return sum("diverged" in r["msg"] for r in self.records if r["kind"] == "log")

    def profiler(self) -> dict[str, Any]:
        folder = os.path.join(self.directory, "profile")
        timelines = sorted(
            int(m[1])
            for name in (os.listdir(folder) if os.path.isdir(folder) else [])
            if (m := re.match(r"timeline-(\d+)\.json$", name))
        )
        traces = glob.glob(os.path.join(folder, "plugins", "profile", "*", "*.xplane.pb"))
        return {"timelines": timelines, "traces": len(traces)}

    def stop(self) -> list[int]:
        return [r["step"] for r in self.finals]

    def earlystop(self) -> Any:
        last = self.finals[-1] if self.finals else {}
        best = last.get("best")
        return [
            last.get("best_step"),
            None if best is None else round(best, 4),
            last.get("stopped_step"),
        ]

    def model(self) -> Any:
        last = self.finals[-1] if self.finals else {}
        epochs = [r for r in self.records if r["kind"] == "epoch"]
        done = [[r["step"], r["epoch"]] for r in self.current(epochs)]
        return [last.get("step"), round(last.get("w", 0.0), 4), last.get("count"), done]

    def observe(self, row: str) -> Any:
        if table.ROWS[row].keras:
            return keras_row.observe(self, row)
        return getattr(self, row.replace("-", "_"))()
