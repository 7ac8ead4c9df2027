"""The driver matrix: every first-party hook x every driver x every lifecycle event.

One training per (driver, event) with every applicable hook installed
together (forked from one process, see child.py), then one test per cell
comparing what a user sees of one hook with the reference: TensorFlow's own
hook of that name under TensorFlow's session in graph mode, otherwise the
uninterrupted single-step run of the eager loop (of the Keras-callback loop
for the KerasCallbacksHook rows); `model`, `stop` and `nan` with what the
plan implies (expect.py). Every cell first checks that its event happened
as named and that each session started where the durability contract says
(`check_event`). The tables are in table.py and, for readers, on the site's
contributors page (docs/contributors.md, "The driver matrix").
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from typing import Any

import pytest

from driver_matrix import events, expect, table
from driver_matrix.observe import Run
from driver_matrix.table import reference

CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "child.py")


@pytest.fixture(scope="session")
def matrix_root(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = str(tmp_path_factory.mktemp("driver_matrix"))
    jobs = events.jobs(root)
    child = subprocess.Popen(
        [sys.executable, CHILD, json.dumps(jobs)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # Its own process group: a timeout ends the forks too.
    )
    try:
        out, err = child.communicate(timeout=900)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        out, err = child.communicate()
        pytest.fail(f"the matrix's trainings took more than 900 s: {err[-3000:]}")
    assert child.returncode == 0, err[-3000:]
    statuses = dict(line.split() for line in out.split("\n") if line.strip())
    # Every job ended; each run's cells check its statuses (check_event).
    assert sorted(statuses) == sorted(map(str, range(len(jobs)))), err[-3000:]
    return root


# The rows read from event files, and the step of each item. A SIGKILL loses what the
# writer had not written out yet, as with TensorFlow's writers (graph mode's FileWriter
# writes from a queue thread and flushes every 120 s): of what the killed process wrote,
# a cell can only require a prefix.
EVENT_FILE_ROWS = {"summary": lambda item: item[0], "step-counter": lambda item: item}


def after_kill(row: str, run: Run, got: list[Any], want: list[Any]) -> tuple[list[Any], ...]:
    """What the restart wrote, observed and expected, once what the killed process left
    (up to the step the restart restored) is checked to be a prefix of the reference's."""
    step_of, restored = EVENT_FILE_ROWS[row], run.starts[-1][1]
    kept = [item for item in got if step_of(item) <= restored]
    made = [item for item in want if step_of(item) <= restored]
    assert kept == made[: len(kept)], ("the killed process's events", kept, made)
    if row == "step-counter":
        got = expect.without_rates_left_by_a_restart(got, want, restored)
    return tuple([item for item in items if step_of(item) > restored] for items in (got, want))


def check_event(run: Run, driver: str, event: str) -> None:
    """The event happened as its name says, and each session started where it must."""
    assert not run.errors, run.errors
    records = run.records
    if event in table.RESTARTED:
        how, at = table.RESTARTED[event]
        signum = signal.SIGKILL if how == "kill" else signal.SIGTERM
        assert run.exits() == [-signum, 0], (run.exits(), "the first process must die by it")
        hit = run.kinds("killed" if how == "kill" else "sigterm")
        assert [r["step"] for r in hit] == [at], hit
        after = records[records.index(hit[0]) + 1 :]
        if how == "kill":
            # The kill came right after its record: the killed process recorded nothing more.
            assert after[0]["kind"] == "exit", after[:3]
        else:
            # The session stopped after that step (no step ran after it), then the process
            # died of the signal handed on.
            ended = after[: [r["kind"] for r in after].index("exit")]
            assert [r["step"] for r in ended if r["kind"] == "final"] == [at], ended
            assert not [r for r in ended if r["kind"] == "start"], ended
    else:
        assert run.exits() == [0], run.exits()
    aborted = run.kinds("aborted")
    if event == "aborted":
        assert [r["step"] for r in aborted] == [table.ABORT_AT], aborted
        assert run.starts[-1][0] > aborted[0]["t"], "no session was created after the error"
    else:
        assert not aborted, aborted
    assert run.start_steps() == table.STARTS[event]
    if table.DRIVERS[driver].fused:
        # Fused steps come only from the session's fused loop: a fallback to single steps
        # (each with the hooks, or quiet) leaves none.
        assert run.fused_steps(), "no step ran fused"


def check_times(row: str, event: str, run: Run) -> None:
    """No rate <= 0; after a restart no elapsed time counts the time between the processes.

    The bound is behaviour, not timing, all of it from recorded events: a
    rate (over the 4 steps between two StepCounterHook lines) or a
    LoggingTensorHook "(x sec)" after a restart may count the seconds both
    processes ran, never the downtime, from the end of the first process
    (its `exit` record) to the begin of the restart, when neither ran. The
    first rate after the restart spans the two processes: its elapsed time
    must be below the downtime, which a rate that counted the downtime
    cannot be (`table.DOWNTIME` only makes the downtime long enough to be
    seen), and at most what the processes ran.
    """
    if row == "step-counter":
        assert run.rates() and all(rate > 0 for _, rate in run.rates()), run.rates()
    if row == "progress":
        assert run.progress_rates() and all(rate > 0 for rate in run.progress_rates())
    if event not in table.RESTARTED:
        return
    (old, new), ended = run.begins(), run.kinds("exit")[0]["t"]
    # A kill ends the training at its record; a SIGTERM's process runs on to save.
    stopped = run.kinds("killed")[0]["t"] if table.RESTARTED[event][0] == "kill" else ended
    downtime = new - ended
    if row == "step-counter":
        after = [(t, 4 / rate) for t, rate in run.rates() if t > new]
        bounds = [(elapsed, (t - new) + (stopped - old) + 0.01) for t, elapsed in after]
        assert after and after[0][1] < downtime, (after, downtime)
        assert all(elapsed <= bound for elapsed, bound in bounds), (bounds, downtime)
    if row == "logging":
        lines = [(seconds, (t - new) + 0.001) for t, seconds in run.timed_lines() if t > new]
        assert lines and lines[0][1] < downtime, (lines, downtime)
        assert all(seconds <= bound for seconds, bound in lines), (lines, downtime)


def sigterm_save(want: dict[str, Any]) -> dict[str, Any]:
    """The reference's checkpoints with the save SIGTERM made at `table.SIGTERM_AT`, off the
    schedule: the other saves are the uninterrupted run's, at the same steps (the restart's
    schedule is not moved by it), the files those the savers keep (as many as the
    reference's) and its `after_save` called in the stopping process's `end()`."""
    at = table.SIGTERM_AT
    made = [at, [round(float(expect.weight(at)), 4)]]
    files = sorted([*want["files"], made])[-len(want["files"]) :]
    kept = [step for step, _ in files]
    return {
        "files": files,
        "listed": kept,
        "latest": kept[-1],
        "after_save": sorted([*want["after_save"], made]),
    }


def confirmed(calls: list[Any], driver: str, event: str, run: Run, ref: Any) -> list[Any]:
    """The reference's `after_save` calls, as the cell's run must have made them."""
    if ref[1].startswith("ref-"):
        # TensorFlow's hook saves the restored step again when a session starts; by the
        # durability contract monsession's does not.
        calls = [item for i, item in enumerate(calls) if item not in calls[:i]]
    if event in table.KILLS and table.DRIVERS[driver].saves_in_background:
        # The durability contract (hooks-checkpoint/README.md, "Durability: what a background
        # save promises"): a background save is confirmed, its after_save called, at the
        # next save, end(), on_failure() or a recovery. The kill came after the files of the
        # newest save were complete (the restart resumed from it) and before any of these:
        # its files are kept and restored (the files, compared with the reference's), and its
        # after_save never runs.
        restored = run.starts[-1][1]
        unconfirmed = [item for item in calls if item[0] == restored]
        assert len(unconfirmed) == 1, (ref, restored, calls)
        calls = [item for item in calls if item[0] != restored]
    return calls


def expected(row: str, driver: str, event: str, run: Run, root: str) -> Any:
    if row == "stop":
        return expect.stops(driver, event)
    if row == "model":
        return expect.model(driver, event)
    ref = reference(row, driver, event)
    assert ref is not None
    want = Run(events.row_dir(root, row, *ref)).observe(row)
    assert want or not isinstance(want, list), f"the reference {ref} recorded nothing"
    if row == "nan":
        # Stopped by the NaN, and said where (TensorFlow's hook names no step).
        stopped = expect.stops(ref[0], "resume" if ref[1].endswith("resume") else "fresh")
        named = None if ref[1].startswith("ref-") else table.NAN_AT
        assert want == {"stopped": stopped, "diverged": [named]}, (ref, want)
        return {"stopped": expect.stops(driver, event), "diverged": [table.NAN_AT]}
    if row == "checkpoint":
        want = {**want, "after_save": confirmed(want["after_save"], driver, event, run, ref)}
        if event == "sigterm":
            want = sigterm_save(want)
    if row == "mlflow":
        # One run, finished, w logged every 2 steps from the first to the NaN stop.
        steps = list(range(1, table.NAN_AT + 1, 2))
        assert want["status"] == ["FINISHED"], (ref, want)
        assert [step for step, _ in want["w"][0]] == steps and want["rate"] == [steps[1:]], want
    if row == "earlystop":
        # It stopped the run early, at the step it says.
        assert want[2] is not None and want[2] == want[3] < table.LAST_STEP, (ref, want)
    restarts = [] if event == "aborted" else [step for _, step in run.starts[1:]]
    if row == "logging":  # A new session's first line has no time, as TensorFlow's.
        for start in restarts:
            first = next((line for line in want if line[0] > start), None)
            if first is not None:
                first[2] = False
    if row == "progress":  # And every session's end() writes a line (also where one was).
        ref_run = Run(events.row_dir(root, row, *ref))
        assert ref_run.stop() == want[-1:], "the reference's last line is its end()'s"
        want = sorted(want[:-1] + run.stop())
    return want


def _cells() -> list[Any]:
    cells = []
    for row, driver, event in table.cells():
        if table.not_applicable(row, driver, event) is not None:
            continue
        marks = []
        if (row, driver, event) in table.KNOWN_FAILURES:
            marks.append(
                pytest.mark.xfail(strict=True, reason=table.KNOWN_FAILURES[(row, driver, event)])
            )
        cells.append(pytest.param(row, driver, event, marks=marks, id=f"{row}-{driver}-{event}"))
    return cells


@pytest.mark.parametrize(("row", "driver", "event"), _cells())
def test_cell(matrix_root: str, row: str, driver: str, event: str) -> None:
    run = Run(events.row_dir(matrix_root, row, driver, event))
    check_event(run, driver, event)
    ref = reference(row, driver, event)
    assert ref is not None
    assert not Run(events.row_dir(matrix_root, row, *ref)).errors, ref
    check_times(row, event, run)
    got, want = run.observe(row), expected(row, driver, event, run, matrix_root)
    if row in EVENT_FILE_ROWS and event in table.KILLS:
        got, want = after_kill(row, run, got, want)
    assert got == want


DOC_TABLE_INTRO = "Cells that do not apply, and why (generated from `table.py`"


def doc_table(page: str, intro: str) -> str:
    """The markdown table that follows the paragraph starting with `intro` on `page`."""
    with open(page) as stream:
        text = stream.read()
    assert text.count(intro) == 1, f"{page} must hold one paragraph starting {intro!r}"
    lines = text[text.index(intro) :].split("\n")
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    return "\n".join(lines[start:end]) + "\n"


def test_the_contributors_page_lists_the_cells_that_do_not_apply():
    page = os.path.join(os.path.dirname(CHILD), "..", "..", "..", "docs", "contributors.md")
    assert doc_table(page, DOC_TABLE_INTRO) == table.not_applicable_markdown()
