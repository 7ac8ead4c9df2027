"""The driver matrix: every first-party hook x every driver x every lifecycle event.

One training per (driver, event) with every applicable hook installed
together (forked from one process, see child.py), then one test per cell
comparing what a user sees of one hook with the reference: TensorFlow's own
hook of that name under TensorFlow's session in graph mode, otherwise the
uninterrupted single-step run of the eager loop (of the Keras-callback loop
for the KerasCallbacksHook row). The tables are in table.py and, for
readers, on the site's contributors page (docs/contributors.md, "The driver matrix").
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from typing import Any

import pytest

from driver_matrix import events, table
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
    # 0, or -9 for a SIGKILL; an error is recorded in its run and shows in its cells.
    assert sorted(statuses) == sorted(map(str, range(len(jobs)))), err[-3000:]
    assert set(statuses.values()) <= {"0", "-9"}, err[-3000:]
    return root


def observed(row: str, event: str, run: Run) -> Any:
    got = run.observe(row)
    if row == "summary" and event in table.KILLS:
        # SIGKILL loses the events the writer had not flushed yet, as with TensorFlow's
        # writer (flushed every 120 s and at the end): compare what the restart wrote.
        got = [item for item in got if item[0] > run.starts[-1][1]]
    return got


def expected(row: str, driver: str, event: str, run: Run, root: str) -> Any:
    if row == "stop":
        return [table.RESUME_FIRST, table.LAST_STEP] if event == "resume" else [table.LAST_STEP]
    ref = reference(row, driver, event)
    assert ref is not None
    want = Run(events.run_dir(root, *ref)).observe(row)
    assert want or not isinstance(want, list), f"the reference {ref} recorded nothing"
    restarts = [] if event == "aborted" else [step for _, step in run.starts[1:]]
    if row == "logging":  # A new session's first line has no time, as TensorFlow's.
        for start in restarts:
            first = next((line for line in want if line[0] > start), None)
            if first is not None:
                first[2] = False
    if row == "progress":  # And every session's end() writes a line.
        want = sorted(set(want) | set(run.stop()))
    if row == "summary" and event in table.KILLS:
        want = [item for item in want if item[0] > run.starts[-1][1]]
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
    run = Run(events.run_dir(matrix_root, driver, event))
    assert not run.errors, run.errors
    ref = reference(row, driver, event)
    assert ref is not None
    assert not Run(events.run_dir(matrix_root, *ref)).errors, ref
    assert observed(row, event, run) == expected(row, driver, event, run, matrix_root)


def test_the_contributors_page_lists_the_cells_that_do_not_apply():
    page = os.path.join(os.path.dirname(CHILD), "..", "..", "..", "docs", "contributors.md")
    with open(page) as stream:
        assert table.not_applicable_markdown() in stream.read()
