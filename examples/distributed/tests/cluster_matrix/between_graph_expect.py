"""What the tf1-cluster column's cells must show (see between_graph.py).

The workers take turns, so every run is exact: worker 1 runs the steps
that end on odd global steps, the chief the even ones. The NaN probe
stops worker 1 after step 25 (it runs it); the chief then runs step 26,
which is NaN too, and stops; so every fault-free job ends at global step
26, every update applied once. A worker's hooks act on the steps it runs:
the chief's step-based hooks trigger on even steps, worker 1's on odd.
"""

from __future__ import annotations

import itertools
import os
from typing import Any

import tensorflow as tf
from driver_matrix import drivers, expect

from cluster_matrix import table

FINAL = 26  # The global step every job that reaches the NaN ends at.
SUMMARY_STEPS, RATE_STEPS, LOG_ITERS = 3, 4, 4  # driver_matrix/rows.py's hooks.


def _w(step: int) -> float:
    return round(float(expect.weight(step)), 4)


def seen(role: str, first: int, last: int) -> list[int]:
    """The global steps a worker's runs end on, from `first` to `last`: a new ps gives
    worker 1 the first turn."""
    begin = first + (1 if role != "chief" else 2)
    return list(range(begin, last + 1, 2))


def triggers(steps: list[int], every: int, last: int | None = None) -> list[int]:
    """The steps a step timer fires on, from its last trigger `last` (None: the first fires)."""
    fired = []
    for step in steps:
        if last is None or step >= last + every:
            fired.append(step)
            last = step
    return fired


def fresh(row: str, role: str) -> Any:
    """The fault-free run's observation of a row on a worker."""
    steps = seen(role, 0, FINAL)
    if row == "stop":
        return [FINAL]
    if row == "model":
        order = drivers.order()
        batches = [[step, *map(int, order[step])] for step in range(FINAL)]
        return [FINAL, _w(FINAL), FINAL, [], batches]
    if row == "summary":
        return [[s, _w(s)] for s in triggers(steps, SUMMARY_STEPS)] if role == "chief" else []
    if row == "step-counter":
        return triggers(steps, RATE_STEPS)[1:]  # The first trigger starts the clock.
    if row == "logging":
        logged = steps[::LOG_ITERS]
        return [[s, _w(s), i > 0] for i, s in enumerate(logged)]
    assert row == "checkpoint", row
    if role != "chief":
        return {"files": [], "listed": [], "latest": None, "after_save": []}
    saved = [*triggers([0, *steps], table.SAVE_STEPS), FINAL]
    kept = saved[-5:]
    return {
        "files": [[s, [_w(s)]] for s in kept],
        "listed": kept,
        "latest": FINAL,
        "after_save": [[s, [_w(s)]] for s in saved],
    }


def new_worker(row: str, role: str, kept: int, first: int) -> Any:
    """A worker's row when what it recorded up to global step `kept` stays and a new process
    of it (no hook state: its timers start afresh) trains from global step `first` on."""
    want = fresh(row, role)
    steps = seen(role, first, FINAL)
    if row == "step-counter":
        return [step for step in want if step <= kept] + triggers(steps, RATE_STEPS)[1:]
    if row == "logging":  # A new process: its first line has no time.
        restarted = [[s, _w(s), i > 0] for i, s in enumerate(steps[::LOG_ITERS])]
        return [line for line in want if line[0] <= kept] + restarted
    return want


def ps_kill(row: str, role: str) -> Any:
    """The ps-kill event's observation of a row on a worker.

    Worker 1 kills the ps after its step 17, before it hands the turn over:
    the chief's last step was 16. Both fail; the whole job restarts from the
    chief's checkpoint of 12, worker 1 first, and ends at 26; what the first
    job recorded after 12 is superseded. The chief's hooks restore their
    state with the checkpoint: its rows are as without the fault, but the
    new session's first log line, which has no time. Worker 1 saves no
    state: its timers start afresh at 13, as after its own death.
    """
    restored = table.TF1_RESUMED
    if role != "chief":
        return new_worker(row, role, restored, restored)
    want = fresh(row, role)
    if row == "logging":
        first = next(line[0] for line in want if line[0] > restored)
        want = [[step, w, timed and step != first] for step, w, timed in want]
    return want


def _increasing(items: list[Any]) -> bool:
    return all(a < b for a, b in itertools.pairwise(items))


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
    if event in ("fresh", "aborted") or (event == "worker-kill" and role == "chief"):
        # A peer's in-process recovery, or its death and restart: the chief sees what it
        # saw without the fault; so does worker 1, its hooks recovered in the process.
        assert got == fresh(row, role), (got, fresh(row, role))
        return
    if event == "worker-kill":  # Worker 1, killed after step 17, restarted at 18.
        want = new_worker(row, role, table.AT, table.AT + 1)
        if row == "step-counter":  # SIGKILL lost what its writer had not flushed.
            got, want = ([step for step in steps if step > table.AT + 1] for steps in (got, want))
        assert got == want, (got, want)
        return
    if event == "ps-kill":
        # Every process failed naming the ps, with its writers flushed: all is kept to 12.
        assert got == ps_kill(row, role), (got, ps_kill(row, role))
        return
    assert event == "restart", event
    # Job 1 stops at 20 on the chief's step; worker 1 runs one more (asynchronous
    # workers each stop after their own step); the chief saves 21 at its end. Job 2
    # resumes from 21 on a new ps, worker 1 first, and ends at 26.
    first = table.RESTART_FIRST + 1
    assert run.start_steps() == [0, first], run.start_steps()
    if row in ("stop", "model"):
        want = [first, FINAL] if row == "stop" else fresh(row, role)
        assert got == want, (got, want)
    elif row == "checkpoint":
        want = fresh(row, role)
        if role == "chief":
            job1 = [*triggers([0, *seen(role, 0, first)], table.SAVE_STEPS), first]
            saved = [*job1, *triggers(seen(role, first, FINAL), table.SAVE_STEPS, first), FINAL]
            want = {
                "files": [[s, [_w(s)]] for s in saved[-5:]],
                "listed": saved[-5:],
                "latest": FINAL,
                "after_save": [[s, [_w(s)]] for s in saved],
            }
        assert got == want, (got, want)
    elif row == "summary":
        # Each step once (TensorBoard's reader after the restart), with its weight.
        if role != "chief":
            assert got == [], got
            return
        assert got and _increasing([s for s, _ in got]), got
        assert all(value == _w(step) for step, value in got), got
    elif row == "logging":
        assert got and _increasing([line[0] for line in got]), got
        assert all(line[1] == _w(line[0]) for line in got), got
    else:
        assert got and _increasing(got), got
