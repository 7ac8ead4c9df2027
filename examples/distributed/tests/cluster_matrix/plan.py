"""What a run must show, from the plan alone: the steps a worker runs and its hooks' periods.

The training is plain arithmetic on known batches and every hook acts on a
step schedule (driver_matrix/rows.py's `PERIODS`, or a column's own), so
each row of a fault-free session, and the steps its fused blocks may hold,
follow from the global steps the worker's runs end on (`steps`): no
reference run is needed to know them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from driver_matrix import expect, rows


def weight(step: int) -> float:
    """The weight after `step` steps, as the rows show it."""
    return round(float(expect.weight(step)), 4)


def periods(column_periods: Mapping[str, int] | None) -> dict[str, int]:
    return {**rows.PERIODS, **(column_periods or {})}


def triggers(steps: list[int], every: int, last: int | None = None) -> list[int]:
    """The steps a step timer fires on, from its last trigger `last` (None: the first fires)."""
    fired = []
    for step in steps:
        if last is None or step >= last + every:
            fired.append(step)
            last = step
    return fired


def saves(
    start: int, steps: list[int], every: int, final: int, last: int | None = None
) -> list[int]:
    """The steps a session's checkpoint saver saves: at the `start` of the session (but
    where it restored its last save, `last`), on its triggers, and at its end, `final`
    (unless it just saved that step)."""
    saved = triggers([start, *steps], every, last)
    return saved if saved[-1:] == [final] else [*saved, final]


def row(
    name: str,
    steps: list[int],
    every: Mapping[str, int],
    chief: bool = True,
    summaries: bool = True,
    start: int = 0,
) -> Any:
    """A row of a fault-free session that starts at `start` and whose runs end on `steps`
    (the last: where it stops).

    `chief`: whether it writes checkpoints; `summaries`: whether its step records
    `tf.summary` values (TensorFlow's rule: the job's first replica only).
    """
    final = steps[-1]
    if name == "summary":
        return [[s, weight(s)] for s in triggers(steps, every["summary"])] if summaries else []
    if name == "step-counter":
        return triggers(steps, every["step-counter"])[1:]  # The first trigger starts the clock.
    if name == "logging":
        return [[s, weight(s), i > 0] for i, s in enumerate(steps[:: every["logging"]])]
    assert name == "checkpoint", name
    if not chief:
        return {"files": [], "listed": [], "latest": None, "after_save": []}
    return checkpoints(saves(start, steps, every["checkpoint"], final))


def checkpoints(saved: list[int]) -> dict[str, Any]:
    """The checkpoint row of a chief that saved `saved` (it keeps the last 5)."""
    kept = saved[-5:]
    return {
        "files": [[s, [weight(s)]] for s in kept],
        "listed": kept,
        "latest": saved[-1],
        "after_save": [[s, [weight(s)]] for s in saved],
    }


def acting(steps: list[int], every: Mapping[str, int], also: tuple[int, ...] = ()) -> set[int]:
    """The steps of one session on which some hook acts (`also`: an interrupt's step)."""
    first, final = steps[0], steps[-1]
    timed = [*(triggers(steps, every[name]) for name in ("summary", "step-counter", "progress"))]
    acts = {step for fired in timed for step in fired}
    acts |= set(steps[:: every["logging"]]) | {final, *also}
    acts |= set(triggers([first - 1, *steps], every["checkpoint"])[1:])
    acts |= {step for step in steps if (step - first + 1) % every["nan"] == 0}
    acts |= set(triggers(steps, every["profiler"]))
    return acts


def blocks(steps: list[int], acts: set[int], skip: int) -> list[list[int]]:
    """The fused blocks the hooks allow: the longest runs of consecutive steps on which no
    hook acts, after the first `skip` runs of the session (which fuse nothing)."""
    free = [step for step in steps[skip:] if step not in acts]
    found: list[list[int]] = []
    for step in free:
        if found and found[-1][-1] == step - 1:
            found[-1].append(step)
        else:
            found.append([step])
    return found
