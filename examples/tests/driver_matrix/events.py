"""The lifecycle events as plans for child.py, and where each cell's run lives."""

from __future__ import annotations

import os
from typing import Any

from driver_matrix import table


def run_dir(root: str, driver: str, event: str) -> str:
    return os.path.join(root, driver, event)


def row_dir(root: str, row: str, driver: str, event: str) -> str:
    """The run a cell observes: the earlystop row has its own (it stops the run early)."""
    directory = run_dir(root, driver, event)
    return os.path.join(directory, "earlystop") if row == "earlystop" else directory


def applies(driver: str, event: str) -> bool:
    return any(table.not_applicable(row, driver, event) is None for row in table.ROWS)


def _plan(directory: str, event: str, tf_hooks: bool = False) -> dict[str, Any]:
    plan: dict[str, Any] = {"dir": directory, "last_steps": [table.LAST_STEP], "tf_hooks": tf_hooks}
    if event.endswith("resume"):
        plan["last_steps"] = [table.RESUME_FIRST, table.LAST_STEP]
    elif event == "aborted":
        plan["abort_at"] = table.ABORT_AT
    return plan


def _plans(root: str, driver: str, event: str) -> list[dict[str, Any]]:
    """The runs of one (driver, event): every hook together, and the earlystop row alone."""
    plans = [_plan(run_dir(root, driver, event), event)]
    if table.not_applicable("earlystop", driver, event) is None:
        alone = _plan(row_dir(root, "earlystop", driver, event), event)
        plans.append({**alone, "earlystop": True})
    return plans


def jobs(root: str) -> list[dict[str, Any]]:
    """Every training of the matrix: the runs a kill or SIGTERM ends first, then the rest.

    A job is `{"driver", "plans", "after", "downtime"}` (see child.py): the
    restart after a kill (or SIGTERM) waits for the ended job, then
    `table.DOWNTIME` seconds more.
    """
    kills: list[dict[str, Any]] = []
    others: list[dict[str, Any]] = []
    for driver, spec in table.DRIVERS.items():
        plans = []
        for event in table.EVENTS:
            if not applies(driver, event):
                continue
            if event in table.RESTARTED:
                how, at = table.RESTARTED[event]
                restarts = _plans(root, driver, event)
                after = []
                for plan in restarts:
                    after.append(len(kills))
                    killed = {**plan, f"{how}_at": at}
                    kills.append({"driver": driver, "plans": [killed], "after": []})
                others.append(
                    {
                        "driver": driver,
                        "plans": restarts,
                        "after": after,
                        "downtime": table.DOWNTIME,
                    }
                )
            else:
                plans += _plans(root, driver, event)
        if spec.tf_session:  # TensorFlow's own hooks under TensorFlow's session: the reference.
            for event in ("fresh", "resume"):
                plans.append(_plan(run_dir(root, driver, "ref-" + event), event, tf_hooks=True))
        others.append({"driver": driver, "plans": plans, "after": []})
    return kills + others
