"""ParameterServerStrategy across processes: a worker that dies mid-closure changes
no record of the hooks when the session owns the global step; a global step
advanced in the closure is at least once, and the session warns once.

One cluster on 127.0.0.1 (1 ps, 2 workers, `ps_job_child.py server`) serves
the module's coordinators in turn (`ps_hooks_child.py`: the documented recipe
with checkpoints, summaries, rates and logged losses). The fault-free run is
the reference. In the others, the `HOLD`-th closure scheduled holds on its
worker until the test SIGKILLs that worker, so the kill falls while
the closure is in flight, after its updates reached the ps; TensorFlow's
`ClusterCoordinator` then runs the closure again on the other worker. The
killed worker is restarted on the same port, or never (the job ends on the
survivor; the test restarts it afterwards for the next one).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from distributed_testing import (
    LISTEN_SECS,
    Processes,
    accepts_connections,
    addresses,
    event_files,
    free_ports,
    read_report,
    summary_tags,
    wait_for,
    within,
)

TESTS = Path(__file__).resolve().parent
SERVER = TESTS / "ps_job_child.py"
COORDINATOR = TESTS / "ps_hooks_child.py"
LAST_STEP = 40
# ARCHITECTURE.md §7: with a dead worker the job finishes on the others; the
# coordinator exits within 30 s of its last step.
EXIT_AFTER_LAST_STEP_SECS = 30
HOLD_SECS = 120  # The coordinator starts and its closure `HOLD` runs (and holds).
JOB_SECS = 200  # A coordinator's job runs to its end (a killed closure run again).
HOLD = 8  # The number of the closure that holds until its worker is killed.
WARNING = "advanced it more than once"
STEP_KEYS = {
    "owned": "monsession_global_step/.ATTRIBUTES/VARIABLE_VALUE",
    "closure": "step/.ATTRIBUTES/VARIABLE_VALUE",
}


class Cluster:
    """A ps and 2 workers on free ports, each worker in its own working directory."""

    def __init__(self, processes: Processes, tmp_path: Path) -> None:
        self.processes = processes
        ports = free_ports(3)
        self.spec = {"ps": addresses(ports[:1]), "worker": addresses(ports[1:])}
        self.workdirs = [tmp_path / f"worker{task}" for task in (0, 1)]
        processes.start("ps", SERVER, ["server", json.dumps(self.spec), "ps", "0"], {})
        for task in (0, 1):
            self.start_worker(task)

    def start_worker(self, task: int) -> None:
        """Starts worker `task` (again: on the same port and working directory)."""
        self.workdirs[task].mkdir(exist_ok=True)
        args = ["server", json.dumps(self.spec), "worker", str(task), str(self.workdirs[task])]
        self.processes.start(f"worker{task}", SERVER, args, {})

    def wait_listening(self) -> None:
        """Waits until every task of the cluster accepts connections (`LISTEN_SECS` in all)."""
        tasks = self.spec["ps"] + self.spec["worker"]
        wait_for(
            lambda: all(accepts_connections(address) for address in tasks),
            timeout=LISTEN_SECS,
            what=f"servers at {tasks}",
        )

    def kill_worker_running(self, number: int) -> int:
        """SIGKILLs the worker whose closure `number` holds, once it holds; returns its task.

        The closure is released first (`released-<number>` in every worker's
        directory), so it does not hold again where it runs next.
        """
        task: int = (
            wait_for(
                lambda: next(
                    (t + 1 for t in (0, 1) if (self.workdirs[t] / f"running-{number}").exists()),
                    None,
                ),
                timeout=HOLD_SECS,
                what=f"closure {number} to hold",
            )
            - 1
        )
        for workdir in self.workdirs:
            (workdir / f"released-{number}").touch()
        self.processes.kill(f"worker{task}")
        (self.workdirs[task] / f"running-{number}").unlink()
        return task

    def coordinate(
        self, name: str, out: Path, advanced_by: str, holds: tuple[int, ...] = ()
    ) -> Path:
        """Starts a coordinator writing into `out`; returns the path of its report."""
        report = out.parent / f"{name}.json"
        for workdir in self.workdirs:  # Closures released in an earlier job hold again.
            for released in workdir.glob("released-*"):
                released.unlink()
        args = [json.dumps(self.spec), str(out), str(report), advanced_by, *map(str, holds)]
        self.processes.start(name, COORDINATOR, args, {})
        return report


def records(out: Path, report_path: Path, advanced_by: str) -> dict[str, Any]:
    """What the hooks left: checkpoints (number: step inside), summary steps, logged steps."""
    import tensorflow as tf

    report = read_report(report_path)
    checkpoints = {}
    for index in sorted(out.glob("model.ckpt-*.index")):
        number = int(index.name[len("model.ckpt-") : -len(".index")])
        reader = tf.train.load_checkpoint(str(out / f"model.ckpt-{number}"))
        checkpoints[number] = int(reader.get_tensor(STEP_KEYS[advanced_by]))
    (event_file,) = event_files(out)
    tags = summary_tags(event_file)
    return {
        "checkpoints": dict(sorted(checkpoints.items())),
        "latest": tf.train.latest_checkpoint(str(out)),
        "summary_steps": tags,
        "rates": _rates(event_file),
        "logged": report["logged"],
        "creations": report["creations"],
        "final_step": report["final_step"],
        "runs": report["runs"],
        "weight": report["weight"],
    }


def _rates(event_file: Path) -> list[float]:
    """The values of the tag ``global_step/sec`` (a scalar or a tensor summary)."""
    import tensorflow as tf
    from tensorboard.backend.event_processing import event_accumulator

    accumulator = event_accumulator.EventAccumulator(
        str(event_file), size_guidance={event_accumulator.TENSORS: 0, event_accumulator.SCALARS: 0}
    )
    accumulator.Reload()
    if "global_step/sec" in accumulator.Tags()["scalars"]:
        return [event.value for event in accumulator.Scalars("global_step/sec")]
    return [
        float(tf.make_ndarray(event.tensor_proto))
        for event in accumulator.Tensors("global_step/sec")
    ]


def _without_values(found: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in found.items() if key not in ("rates", "weight", "latest")}


def _new_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    tmp_path = tmp_path_factory.mktemp("cluster")
    with Processes(tmp_path / "logs") as processes:
        cluster = Cluster(processes, tmp_path)
        cluster.wait_listening()
        yield cluster


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    yield from _new_cluster(tmp_path_factory)


@pytest.fixture
def own_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A cluster of its own: a coordinator that connects to a worker just restarted by an
    earlier test may see that worker fail once more (a closure run again before the hold)."""
    yield from _new_cluster(tmp_path_factory)


@pytest.fixture(scope="module")
def fresh(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The records of the fault-free run, the reference of every run with a fault."""
    out = tmp_path_factory.mktemp("fresh") / "out"
    with within(JOB_SECS):
        report = cluster.coordinate("fresh", out, "owned")
        cluster.processes.wait_ok("fresh", timeout=JOB_SECS)
    found = records(out, report, "owned")
    # Stated: checkpoints at creation, every 10 steps and at the end, each
    # holding its step; summaries and rates every 5 steps; losses logged
    # every 5 runs; the stop step; one closure per step.
    assert found["checkpoints"] == {0: 0, 10: 10, 20: 20, 30: 30, 40: 40}
    assert found["summary_steps"] == {
        "weight": [0, 5, 10, 15, 20, 25, 30, 35],
        "global_step/sec": [6, 11, 16, 21, 26, 31, 36],
    }
    assert found["logged"] == [1, 6, 11, 16, 21, 26, 31, 36]
    assert (found["creations"], found["final_step"], found["runs"]) == ([0], 40, 40)
    assert found["weight"] == 40.0 and all(rate > 0 for rate in found["rates"])
    return found


def _assert_as_fresh(found: dict[str, Any], fresh: dict[str, Any], out: Path) -> None:
    assert _without_values(found) == _without_values(fresh)
    assert found["latest"] == str(out / "model.ckpt-40")
    assert len(found["rates"]) == len(fresh["rates"])
    assert all(rate > 0 for rate in found["rates"])
    # The killed closure ran again on the other worker: its update reached
    # the ps twice (a model update under ParameterServerStrategy is at least
    # once), while the session-owned global step counted its step once.
    assert found["weight"] == 41.0


def test_worker_killed_mid_closure_and_restarted_changes_no_record(
    cluster: Cluster, fresh: dict[str, Any], tmp_path: Path
) -> None:
    out = tmp_path / "out"
    with within(HOLD_SECS, JOB_SECS):
        report = cluster.coordinate("restarted", out, "owned", holds=(HOLD,))
        cluster.start_worker(cluster.kill_worker_running(HOLD))  # Same port.
        cluster.processes.wait_ok("restarted", timeout=JOB_SECS)
    _assert_as_fresh(records(out, report, "owned"), fresh, out)
    assert WARNING not in cluster.processes.log("restarted").read_text(errors="replace")


def test_worker_killed_mid_closure_for_good_the_job_ends_on_the_survivor(
    cluster: Cluster, fresh: dict[str, Any], tmp_path: Path
) -> None:
    out = tmp_path / "out"
    with within(HOLD_SECS, JOB_SECS, EXIT_AFTER_LAST_STEP_SECS, LISTEN_SECS):
        report = cluster.coordinate("survivor", out, "owned", holds=(HOLD,))
        dead = cluster.kill_worker_running(HOLD)
        try:
            wait_for(report.exists, timeout=JOB_SECS, what="the end of the session")
            cluster.processes.wait_ok("survivor", timeout=EXIT_AFTER_LAST_STEP_SECS)
        finally:
            cluster.start_worker(dead)  # For the next test.
            cluster.wait_listening()
    _assert_as_fresh(records(out, report, "owned"), fresh, out)
    assert WARNING not in cluster.processes.log("survivor").read_text(errors="replace")


def test_global_step_advanced_in_the_closure_is_at_least_once_and_warned_once(
    own_cluster: Cluster, tmp_path: Path
) -> None:
    cluster = own_cluster
    out = tmp_path / "out"
    with within(HOLD_SECS, JOB_SECS):
        report = cluster.coordinate("closure", out, "closure", holds=(HOLD,))
        cluster.start_worker(cluster.kill_worker_running(HOLD))
        cluster.processes.wait_ok("closure", timeout=JOB_SECS)
    found = records(out, report, "closure")
    # The killed closure of step 8 advanced the global step on the ps before
    # its worker died, and again on the other worker: the join before the
    # save of step 10 finds 11. Checkpoint 10 holds 11; from then on the
    # session counts from the variable, so the later ones hold their step,
    # and StopAtStepHook(40) stops after 39 runs.
    assert found["checkpoints"] == {0: 0, 10: 11, 20: 20, 30: 30, 40: 40}
    assert (found["creations"], found["final_step"], found["runs"]) == ([0], 40, 39)
    assert found["weight"] == 40.0
    assert found["logged"] == [1, 6, 12, 17, 22, 27, 32, 37]
    assert all(rate > 0 for rate in found["rates"])
    log = cluster.processes.log("closure").read_text(errors="replace")
    assert log.count(WARNING) == 1
    assert (
        "The global step is 11 once the closures scheduled so far have run, but the session "
        "ran 10 steps: a closure of the step 'step' advanced it more than once." in log
    )
