"""The multi-process driver matrix: standard hooks x strategies x cluster events.

One session fixture runs every (column, event) of table.py that the selected
cells observe (all of them, unless `-k` selects some) as loopback
clusters of real processes (runs.py; forked from one server that imported
TensorFlow once, forks.py), three runs at a time (mostly waiting; CI has 2 cores),
then one test per cell compares what a user sees of one row on every
worker with the reference: the column's fault-free run, which itself is
compared with what the plan implies (plan.py); `model` and `stop` with the
plan (driver_matrix/expect.py). Every cell first checks that
its event happened as named on each process (`check_event`).
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import re
import traceback
from typing import Any

import pytest
from driver_matrix import expect
from driver_matrix.observe import Run
from driver_matrix.test_driver_matrix import after_kill

from cluster_matrix import between_graph_expect, plan, runs, table
from cluster_matrix.forks import ForkServer
from monsession._durability._retry import LOST_SERVER_SECS

PEER_FAILED = "a worker of the job failed"
PS_LOST = "parameter server /job:ps/replica:0/task:0 was lost"
# ARCHITECTURE.md section 7: a dead ps ends a ParameterServerStrategy job within 30 s.
PS_LOST_WITHIN_SECS = 30
# A TF1 cluster's workers ask a lost ps for LOST_SERVER_SECS from their step's error, then
# exit; the margin: the broken session's close (at most _retry.CLOSE_SECS, 5 s, runs
# within those seconds) and the exit, on a busy 2-core machine.
TF1_PS_LOST_MARGIN_SECS = 10.0
ABORTED_ENDS_JOB = "Restart every worker of the job"
# Runs at a time: most of a run's time is waiting (for a peer's death to be seen, for a
# lost ps, between jobs), so 3 keep a 2-core machine busy without slowing the steps much.
PARALLEL = 3


def _selected_runs(session: pytest.Session) -> set[tuple[str, str]]:
    """The runs the selected cells observe: each cell's own, and the one it is compared with."""
    needed = set()
    for item in session.items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        if "column" in params:
            run = (params["column"], params["event"])
            needed |= {run, table.reference(*run)}
    return needed


@pytest.fixture(scope="session")
def cluster_root(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[str, dict[Any, str]]:
    """Every run the selected cells observe, the longest first; a run's harness failure
    fails its cells."""
    root = str(tmp_path_factory.mktemp("cluster_matrix"))
    needed = _selected_runs(request.session)
    # The longest first: the restarted jobs (a TF1 ps's loss waits LOST_SERVER_SECS more).
    order = sorted(
        (run for run in table.runs() if run in needed),
        key=lambda run: (-len(table.jobs(*run)), run != ("tf1-cluster", "ps-kill")),
    )
    failures: dict[Any, str] = {}

    with ForkServer() as server:

        def one(run: tuple[str, str]) -> None:
            try:
                runs.run(server, root, *run)
            except Exception:
                failures[run] = traceback.format_exc()

        with concurrent.futures.ThreadPoolExecutor(PARALLEL) as pool:
            list(pool.map(one, order))
    return root, failures


def _runs(root: str, column: str, event: str) -> dict[str, Run]:
    return {
        role: Run(runs.role_dir(root, column, event, role)) for role in table.COLUMNS[column].roles
    }


def check_event(column: str, event: str, found: dict[str, Run]) -> None:
    """The event happened as its name says on each process, and each session started where
    the durability contract says."""
    spec, ev = table.COLUMNS[column], table.EVENTS[event]
    restarted = table.restarted(column, event)
    killers = [role for role in found if runs.kills_server(column, event, role)]
    for role, run in found.items():
        faulty = role in spec.abort_on if ev.how == "abort" else role == spec.hit(ev.how)
        # A server target (a ParameterServerStrategy worker) is killed by the chief, whose
        # session goes on: it records the kill, exits 0, and starts once.
        kills = runs.kills_server(column, event, role)
        starts = [0] if kills and not restarted else list(table.starts(column, event, role))
        exits, errors = [0] * len(table.jobs(column, event)), []
        if ev.how == "kill" and faulty and ev.victim is None:
            exits = [-9, 0]  # Then restarted, with its job or alone.
        elif ev.victim == "ps" and restarted:
            exits, errors = [1, 0], [PS_LOST]  # Every training process fails naming the ps.
        elif ev.how == "kill" and restarted:
            exits, errors = [1, 0], [PEER_FAILED]  # A collective job's survivors fail fast.
        if ev.how == "sigterm" and (faulty or spec.synchronous):
            exits = [-15, 0]  # Every worker stops on it, then hands it on; not a TF1 peer.
        if ev.how == "abort" and restarted:
            exits, errors = [1, 0], [ABORTED_ENDS_JOB]
        assert run.exits() == exits, (role, run.exits(), run.errors)
        assert len(run.errors) == len(errors), (role, run.errors)
        pairs = zip(errors, run.errors, strict=True)
        assert all(want in got for want, got in pairs), (role, run.errors)
        for how, kind in (("kill", "killed"), ("sigterm", "sigterm"), ("abort", "aborted")):
            steps = [r["step"] for r in run.kinds(kind)]
            hit = ev.how == how and (faulty or kills)
            want = [table.fault_step(column, role)] if hit else []
            assert steps == want, (role, kind, steps)
        assert run.start_steps() == starts, (role, run.start_steps())
        if ev.victim == "ps" and restarted:
            (killed,), (failed,) = found[killers[0]].kinds("killed"), run.kinds("error")
            took = failed["t"] - killed["t"]
            if spec.synchronous:
                assert took < PS_LOST_WITHIN_SECS, (role, killed, failed)
            else:  # Asked for LOST_SERVER_SECS, not less, then ended.
                bound = LOST_SERVER_SECS + TF1_PS_LOST_MARGIN_SECS
                assert LOST_SERVER_SECS <= took < bound, (role, took, killed, failed)


def check_server_killed(root: str, column: str, event: str) -> None:
    """A server the event kills (a ParameterServerStrategy worker or ps) died of SIGKILL."""
    victim = runs.victim_server(column, event)
    if victim is not None:
        server = Run(runs.role_dir(root, column, event, victim))
        assert server.exits() == [-9], server.exits()


def check_fused(column: str, event: str, found: dict[str, Run]) -> None:
    """A fused column's blocks are exactly those its hooks allow (plan.blocks): in the
    fault-free run all of them; in a run with a fault, those of its first session up to
    its end, and afterwards only steps on which no hook acts. A fallback to single
    steps, a block cut short or a block running past a hook's step fails here."""
    spec = table.COLUMNS[column]
    if not spec.fused:
        return
    steps = list(range(1, expect.stop_step("eager") + 1))
    every = plan.periods(dict(spec.periods))
    allowed = plan.blocks(steps, plan.acting(steps, every), spec.unfused_runs)
    free = {step for block in allowed for step in block}
    for role, run in found.items():
        got = [record["steps"] for record in run.kinds("fused")]
        if event == "fresh":
            assert got == allowed, (role, got, allowed)
            continue
        # Where the first session ends: at the fault (or the first job's end), on which the
        # hooks act; a session that goes on past a fault (a peer's) ends where fresh does.
        end = table.RESTART_FIRST if event == "restart" else table.AT
        if len(run.starts) == 1:
            end = steps[-1]
        first = run.starts[1][0] if len(run.starts) > 1 else float("inf")
        before = [r["steps"] for r in run.kinds("fused") if r["t"] < first]
        assert before == [b for b in allowed if b[-1] <= end], (role, before, allowed)
        assert all(step in free for block in got for step in block), (role, got, allowed)


def check_closures(column: str, event: str, found: dict[str, Run]) -> None:
    """Under a ClusterCoordinator, where the closures ran (the session's record of the
    coordinator, `monsession.testing.closure_record`): each closure scheduled ran to its end
    once; both workers ran some; after worker 1's kill, exactly one closure failed on it
    and was put back, and ran on worker 0 (TensorFlow's worker thread then waits for a
    worker that never comes back, so it takes no other)."""
    spec = table.COLUMNS[column]
    if "worker1" not in spec.servers or event not in ("fresh", "worker-kill"):
        return
    steps = list(range(1, expect.stop_step("eager") + 1))
    fused: list[list[int]] = []
    if spec.fused:
        every = plan.periods(dict(spec.periods))
        fused = plan.blocks(steps, plan.acting(steps, every), spec.unfused_runs)
    silent = sum(len(block) for block in fused)
    (closures,) = found[spec.roles[0]].kinds("closures")
    ran = {int(worker): count for worker, count in closures["ran"].items()}
    put_back = {int(worker): count for worker, count in closures["put_back"].items()}
    assert sum(ran.values()) == len(steps) - silent + len(fused), closures
    assert ran.get(0) and ran.get(1), closures
    assert put_back == ({1: 1} if event == "worker-kill" else {}), closures


STATE_RESTORED = re.compile(r"^StepCounterHook \(key .*\): state restored from ")


def check_times(row: str, column: str, event: str, run: Run, checkpoints: str) -> None:
    """No rate <= 0; after a restart no rate counts the time between the jobs.

    The step counter's state is saved with each checkpoint (hook state beside
    it in `checkpoints`, the chief's directory): the first rate after a
    restart counts the seconds the old process's timer had run when the
    restored checkpoint's state was written, which the state holds, and the
    seconds the new process ran since it loaded the state, after the record
    before the session's "StepCounterHook (key ...): state restored" line;
    never the downtime between the processes. That bound must be below the
    downtime, or counting it would pass unseen.
    """
    if row != "step-counter":
        return
    rates = run.rates()
    assert rates and all(rate > 0 for _, rate in rates), rates
    if not table.restarted(column, event) and event != "restart":
        return
    (new, restored), begun = run.starts[-1], run.begins()[-1]
    with open(os.path.join(checkpoints, f"model.ckpt-{restored}.hooks.json")) as stream:
        counted = json.load(stream)["hooks"]["StepCounterHook[0]"]["timer"]["secs_since_trigger"]
    (restored_at,) = [
        r["t"] for r in run.kinds("log") if r["t"] > begun and STATE_RESTORED.match(r["msg"])
    ]
    loaded = max(r["t"] for r in run.records if begun <= r["t"] < restored_at)
    downtime = new - max(r["t"] for r in run.records if r["t"] < begun and r["kind"] != "exit")
    # %g prints 6 digits of a rate: its seconds are exact to 1e-5 of themselves.
    after = [(t, 4 / rate) for t, rate in rates if t > new]
    bounds = [(elapsed, ((t - loaded) + counted) * (1 + 1e-5)) for t, elapsed in after]
    assert after and bounds[0][1] < downtime, (bounds, downtime)
    assert all(elapsed <= bound for elapsed, bound in bounds), (bounds, downtime)


def _checkpoint(want: dict[str, Any], event: str, run: Run, killed: bool) -> dict[str, Any]:
    """The reference's checkpoints as the cell's run must have left them."""
    calls, files = list(want["after_save"]), list(want["files"])
    if table.EVENTS[event].how == "sigterm":
        # The stop saves the step the workers agreed on, off the schedule: the restart
        # saves on the uninterrupted run's steps (hooks-checkpoint's schedule rule).
        steps = sorted({table.AT, *(step for step, _ in calls)})
        calls = [[s, [plan.weight(s)]] for s in steps]
        files = [item for item in calls if item[0]][-len(files) :]  # It keeps 5.
    if killed:
        # The background save of the restored step was complete at the kill, never confirmed
        # (driver_matrix/test_driver_matrix.confirmed): its after_save never ran.
        calls = [item for item in calls if item[0] != run.starts[-1][1]]
    steps = [step for step, _ in files]
    return {"files": files, "listed": steps, "latest": steps[-1], "after_save": calls}


def expected(row: str, column: str, event: str, role: str, run: Run, root: str) -> Any:
    ev = table.EVENTS[event]
    if row == "stop":
        stops = [expect.stop_step("eager")]
        if ev.how == "sigterm":
            return [table.AT, *stops]
        return [table.RESTART_FIRST, *stops] if event == "restart" else stops
    if row == "model":
        return expect.model("eager", "fresh")
    spec = table.COLUMNS[column]
    summaries = role in spec.summary_roles
    if row == "summary" and not summaries:
        # tf.summary records only in the first replica of the job (TensorFlow's rule under
        # a strategy): the chief's. The other workers' SummarySaverHook writes no value.
        return []
    if event == "fresh":  # Every worker runs every step, its own hooks, into its own dir.
        steps = list(range(1, expect.stop_step("eager") + 1))
        return plan.row(row, steps, plan.periods(dict(spec.periods)), summaries=summaries)
    ref_column, ref_event = table.reference(column, event)
    want = Run(runs.role_dir(root, ref_column, ref_event, role)).observe(row)
    killed = ev.how == "kill" and role == spec.target
    if row == "checkpoint":
        return _checkpoint(want, event, run, killed)
    restarts = [step for _, step in run.starts[1:]]
    if ev.how == "abort" and not table.restarted(column, event):
        restarts = []  # Recovered in the process: its timers go on.
    if row == "logging":  # A new session's first line has no time, as TensorFlow's.
        for start in restarts:
            first = next((line for line in want if line[0] > start), None)
            if first is not None:
                first[2] = False
    return want


def _cells() -> list[Any]:
    cells = []
    for row, column, event in table.cells():
        if table.not_applicable(row, column, event) is not None:
            continue
        marks = []
        if (row, column, event) in table.KNOWN_FAILURES:
            reason = table.KNOWN_FAILURES[(row, column, event)]
            marks.append(pytest.mark.xfail(strict=True, reason=reason))
        cells.append(pytest.param(row, column, event, marks=marks, id=f"{row}-{column}-{event}"))
    return cells


@pytest.mark.parametrize(("row", "column", "event"), _cells())
def test_cell(cluster_root: tuple[str, dict[Any, str]], row: str, column: str, event: str) -> None:
    root, failures = cluster_root
    for run_key in ((column, event), table.reference(column, event)):
        assert run_key not in failures, failures[run_key]
    found = _runs(root, column, event)
    check_event(column, event, found)
    check_server_killed(root, column, event)
    check_fused(column, event, found)
    check_closures(column, event, found)
    checkpoints = os.path.join(runs.run_dir(root, column, event), "ckpt")  # The chief's.
    if column == "tf1-cluster":  # Asynchronous workers: each its own steps (between_graph.py).
        for role, run in found.items():
            if role == table.COLUMNS[column].roles[0]:
                check_times(row, column, event, run, checkpoints)
            elif row == "step-counter":  # Its timers start afresh after a restart.
                assert run.rates() and all(rate > 0 for _, rate in run.rates()), run.rates()
            between_graph_expect.cell(row, event, role, run)
        return
    for role, run in found.items():
        check_times(row, column, event, run, checkpoints)
        got, want = run.observe(row), expected(row, column, event, role, run, root)
        if row == "summary" and table.EVENTS[event].how == "kill":
            # SIGKILL loses what a writer had not flushed: of what the killed (or failed)
            # process left, a prefix of the reference's; then what the restart wrote.
            got, want = after_kill(row, run, got, want)
        if row == "step-counter":
            got = expect.without_rates_left_by_a_restart(got, want, run.starts[-1][1])
        assert got == want, role


def test_the_contributors_page_lists_the_cells_that_do_not_apply():
    """The page's table of cluster cells that do not apply is the one table.py makes."""
    page = os.path.join(
        os.path.dirname(__file__), "..", "..", "..", "..", "docs", "contributors.md"
    )
    with open(page) as stream:
        text = stream.read()
    intro = "Cluster cells that do not apply, and why"
    lines = text[text.index(intro) :].split("\n")
    start = next(i for i, line in enumerate(lines) if line.startswith("| "))
    end = next(i for i in range(start, len(lines)) if not lines[i].startswith("| "))
    assert "\n".join(lines[start:end]) + "\n" == table.not_applicable_markdown()
