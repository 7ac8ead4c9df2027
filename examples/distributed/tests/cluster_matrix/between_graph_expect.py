"""What the tf1-cluster column's cells must show (see between_graph.py).

The workers take turns, so every run is exact: worker 1 runs the steps
that end on odd global steps, the chief the even ones. The NaN probe
stops worker 1 after step 25 (it runs it); the chief then runs step 26,
which is NaN too, and stops; so every fault-free job ends at global step
26, every update applied once. A worker's hooks act on the steps it runs:
the chief's step-based hooks trigger on even steps, worker 1's on odd.
"""

from __future__ import annotations

import os
from typing import Any

import tensorflow as tf
from driver_matrix import drivers, expect
from driver_matrix.test_driver_matrix import after_kill

from cluster_matrix import plan, table

FINAL = 26  # The global step every job that reaches the NaN ends at.
EVERY = plan.periods(None)  # driver_matrix/rows.py's hooks.


def seen(role: str, first: int, last: int) -> list[int]:
    """The global steps a worker's runs end on, from `first` to `last`: a new ps gives
    worker 1 the first turn."""
    begin = first + (1 if role != "chief" else 2)
    return list(range(begin, last + 1, 2))


def _row(row: str, role: str, steps: list[int], start: int = 0) -> Any:
    chief = role == "chief"
    return plan.row(row, steps, EVERY, chief=chief, summaries=chief, start=start)


def fresh(row: str, role: str) -> Any:
    """The fault-free run's observation of a row on a worker."""
    if row == "stop":
        return [FINAL]
    if row == "model":
        order = drivers.order()
        batches = [[step, *map(int, order[step])] for step in range(FINAL)]
        return [FINAL, plan.weight(FINAL), FINAL, [], batches]
    return _row(row, role, seen(role, 0, FINAL))


def new_worker(row: str, role: str, kept: int, first: int) -> Any:
    """A worker's row when what it recorded up to global step `kept` stays and a new process
    of it (no hook state: its timers start afresh) trains from global step `first` on."""
    want = fresh(row, role)
    if row not in ("step-counter", "logging"):
        return want
    before = [item for item in want if (item if row == "step-counter" else item[0]) <= kept]
    return before + _row(row, role, seen(role, first, FINAL), first)


def resumed(row: str, role: str, restored: int) -> Any:
    """A row on a worker when the whole job restarts from the chief's checkpoint `restored`.

    ps-kill: worker 1 kills the ps after its step 17, before it hands the
    turn over: the chief's last step was 16. Both fail; the whole job
    restarts from the chief's checkpoint of 12. sigterm: the chief stops on
    SIGTERM after its step 18, holding the turn, and saves 18; worker 1
    then runs on alone to the NaN (25); the whole job restarts from 18. The
    new job runs worker 1 first and ends at 26; what the first recorded
    after `restored` is superseded. The chief's hooks restore their state
    with the checkpoint: its rows are as without the fault, but the new
    session's first log line, which has no time. Worker 1 saves no state:
    its timers start afresh, as after its own death.
    """
    if role != "chief":
        return new_worker(row, role, restored, restored)
    want = fresh(row, role)
    if row == "logging":
        first = next(line[0] for line in want if line[0] > restored)
        want = [[step, w, timed and step != first] for step, w, timed in want]
    return want


def restart(row: str, role: str) -> Any:
    """The restart event's observation of a row on a worker.

    Job 1 stops at 20 on the chief's step; worker 1 runs one more
    (asynchronous workers each stop after their own step); the chief saves 21
    at its end. Job 2 resumes from 21 on a new ps, worker 1 first, and ends
    at 26. The chief's hooks restore their state with checkpoint 21: its rows
    are those of one session over both jobs' steps (the save at 21 is off
    the schedule, which goes on); worker 1's hooks start afresh in job 2.
    """
    first = table.RESTART_FIRST + 1
    jobs = seen(role, 0, first), seen(role, first, FINAL)
    if row == "stop":
        return [first, FINAL]
    if row == "model":
        return fresh(row, role)
    if role != "chief":
        if row == "checkpoint":
            return fresh(row, role)
        return _row(row, role, jobs[0]) + _row(row, role, jobs[1], first)
    if row == "checkpoint":  # The save at job 1's end (21) is off the schedule: it goes on.
        every = EVERY["checkpoint"]
        job1, last = plan.saves(0, jobs[0], every, first), plan.triggers([0, *jobs[0]], every)
        return plan.checkpoints(job1 + plan.saves(first, jobs[1], every, FINAL, last[-1]))
    want = _row(row, role, jobs[0] + jobs[1])
    if row == "logging":  # A new session's first line has no time.
        later = [line for line in want if line[0] > first][:1]
        want = [[s, w, timed and [s, w, timed] not in later] for s, w, timed in want]
    return want


def _holds_its_step(directory: str, steps: list[int]) -> None:
    """Every checkpoint holds exactly the global step of its name."""
    for step in steps:
        reader = tf.train.load_checkpoint(os.path.join(directory, f"model.ckpt-{step}"))
        assert reader.get_tensor("global_step") == step, step


def cell(row: str, event: str, role: str, run: Any) -> None:
    """Asserts what the run must show of `row` on `role` after `event`."""
    got = run.observe(row)
    if row == "checkpoint":
        _holds_its_step(os.path.join(run.directory, "ckpt"), got["listed"])
    if row == "stop" and event == "sigterm":  # The chief at 18; worker 1, alone, at 25.
        want = [table.AT + 1 if role == "chief" else expect.stop_step("eager"), FINAL]
    elif event in ("fresh", "aborted") or (event == "worker-kill" and role == "chief"):
        # A peer's in-process recovery, or its death and restart: the chief sees what it
        # saw without the fault; so does worker 1, its hooks recovered in the process.
        want = fresh(row, role)
    elif event == "worker-kill":  # Worker 1, killed after step 17, restarted at 18.
        want = new_worker(row, role, table.AT, table.AT + 1)
        if row == "step-counter":  # SIGKILL lost what its writer had not flushed: a prefix.
            got, want = after_kill(row, run, got, want)
    elif event in ("ps-kill", "sigterm"):
        # ps-kill: every process failed naming the ps, with its writers flushed: all is kept
        # to 12. sigterm: the job restarts from the chief's save at 18.
        restored = table.TF1_RESUMED if event == "ps-kill" else table.AT + 1
        want = resumed(row, role, restored)
        if row == "step-counter":
            got = expect.without_rates_left_by_a_restart(got, want, restored, fresh(row, role))
    else:
        assert event == "restart", event
        assert run.start_steps() == [0, table.RESTART_FIRST + 1], run.start_steps()
        want = restart(row, role)
    assert got == want, (got, want)
