"""What a cell must show, where it follows from the plan alone (not from a reference run).

The training is plain arithmetic on known batches, so what a run trained,
where each session starts and where the run stops follow from the event:
`model` (final step, weight, step count, epochs yielded, the batch of each
step), `stop` and the steps `nan` names are computed here.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from driver_matrix import drivers, table


def stop_step(driver: str) -> int:
    """Where an uninterrupted run of a column stops: at the NaN (NanTensorHook stops it, or
    TerminateOnNaN in the Keras-callback columns)."""
    return table.NAN_AT


def stops(driver: str, event: str) -> list[int]:
    """The step each session of the run ends at (a killed one ends none; SIGTERM stops one
    after its step)."""
    last = stop_step(driver)
    if event == "resume":
        return [table.RESUME_FIRST, last]
    return [table.SIGTERM_AT, last] if event == "sigterm" else [last]


def weight(steps: int) -> np.float32:
    """The weight after `steps` steps of the plan."""
    order = drivers.order()
    w = np.float32(1.0)
    for step in range(steps):
        w = np.float32(0.9) * w + np.float32(order[step].sum()) / np.float32(100.0)
    return w


def model(driver: str, event: str) -> list[Any]:
    """The `model` observation (see observe.Run.model) the run must end with."""
    steps = stop_step(driver)
    order = drivers.order()
    w = weight(steps)
    epochs: list[list[int]] = []
    if table.DRIVERS[driver].epochs:
        epochs = [[10 * (epoch + 1), epoch] for epoch in range(steps // 10)]
        if event == "kill-epoch":
            # By design (Epochs docs): an epoch ends with the checkpoint of its last step;
            # a process killed after that checkpoint, before the loop yielded it, does
            # not end that epoch again after the restart.
            epochs = [item for item in epochs if item[0] != table.KILLS[event]]
    batches = [[step, *map(int, order[step])] for step in range(steps)]
    return [steps, round(float(w), 4), steps, epochs, batches]


def without_rates_left_by_a_restart(
    got: list[Any], want: list[Any], restored: int, earlier: list[Any] | None = None
) -> list[Any]:
    """The step counter's rates `got` (steps, in the order written) without those that an
    earlier process wrote past `restored`, the step a new process restarted from.

    As TensorFlow's, the step counter writes no `SessionLog.START` on a restart, so
    TensorBoard keeps what the earlier process wrote past that step (what reached its file).
    Those rates come before the new process's, and must be the first of `earlier` (the
    earlier process's rates uninterrupted; default `want`) past that step.
    """
    after = [step for step in got if step > restored]
    extra = max(len(after) - len([step for step in want if step > restored]), 0)
    would = [step for step in (want if earlier is None else earlier) if step > restored]
    assert after[:extra] == would[:extra], ("rates left by the earlier process", after, would)
    return [step for step in got if step <= restored] + after[extra:]
