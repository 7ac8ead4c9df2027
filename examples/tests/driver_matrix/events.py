"""The lifecycle events as plans for child.py, and where each cell's run lives."""

from __future__ import annotations

import os
from typing import Any

from driver_matrix import table


def run_dir(root: str, driver: str, event: str) -> str:
    return os.path.join(root, driver, event)


def applies(driver: str, event: str) -> bool:
    return any(table.not_applicable(row, driver, event) is None for row in table.ROWS)


def _plan(directory: str, event: str, tf_hooks: bool = False) -> dict[str, Any]:
    plan: dict[str, Any] = {"dir": directory, "last_steps": [table.LAST_STEP], "tf_hooks": tf_hooks}
    if event.endswith("resume"):
        plan["last_steps"] = [table.RESUME_FIRST, table.LAST_STEP]
    elif event == "aborted":
        plan["abort_at"] = table.ABORT_AT
    return plan


def jobs(root: str) -> list[dict[str, Any]]:
    """Every training of the matrix: kills first (their restarts wait for them), then the rest."""
    kills: list[dict[str, Any]] = []
    others: list[dict[str, Any]] = []
    for driver, spec in table.DRIVERS.items():
        plans = []
        for event in table.EVENTS:
            if not applies(driver, event):
                continue
            directory = run_dir(root, driver, event)
            if event in table.KILLS:
                killed = {
                    **_plan(directory, event),
                    "kill_at": table.KILLS[event],
                    # Between checkpoints: the last one is complete before the kill.
                    "settle": event == "kill-between",
                }
                kills.append({"driver": driver, "plans": [killed]})
                others.append({"driver": driver, "plans": [_plan(directory, event)], "after": None})
                others[-1]["kill"] = len(kills) - 1
            else:
                plans.append(_plan(directory, event))
        if spec.tf_session:  # TensorFlow's own hooks under TensorFlow's session: the reference.
            for event in ("fresh", "resume"):
                plans.append(_plan(run_dir(root, driver, "ref-" + event), event, tf_hooks=True))
        others.append({"driver": driver, "plans": plans})
    for job in others:
        if "kill" in job:
            job["after"] = job.pop("kill")
    return kills + others
