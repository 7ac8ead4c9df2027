"""Graph mode on a real TensorFlow cluster: a parameter server and two workers,
each a `tf.distribute.Server` in its own process on 127.0.0.1, trained with
between-graph replication (`replica_device_setter`) and monsession's
`MonitoredTrainingSession(master=server.target, is_chief=task == 0)`."""

from __future__ import annotations

import json
import re
from pathlib import Path

from distributed_testing import (
    PEER_EXIT_SECS,
    START_SECS,
    TRAIN_CLUSTER,
    TRAIN_SECS,
    Processes,
    addresses,
    event_files,
    files_under,
    free_ports,
    latest_checkpoint_step,
    read_report,
    summary_tags,
    wait_for,
    within,
)

# The chief recovers from the ps restart and trains on to its last step.
RECOVER_SECS = 120

CHIEF_FILE = re.compile(
    r"^(checkpoint|graph\.pbtxt|events\.out\.tfevents\..*"
    r"|model\.ckpt-\d+\.(index|meta|hooks\.json|data-\d{5}-of-\d{5}))$"
)


def _start_cluster(
    processes: Processes,
    tmp_path: Path,
    cluster: str,
    last_step: int,
    step_delay: float,
    wait_steps: int = 0,
) -> None:
    processes.start("ps", TRAIN_CLUSTER, ["--cluster", cluster, "--job", "ps", "--task", "0"], {})
    for task in (0, 1):
        processes.start(
            f"worker{task}",
            TRAIN_CLUSTER,
            [
                "--cluster",
                cluster,
                "--job",
                "worker",
                "--task",
                str(task),
                "--output-dir",
                str(tmp_path / "out"),
                "--last-step",
                str(last_step),
                "--save-checkpoint-steps",
                "20",
                "--save-summaries-steps",
                "20",
                "--wait-steps",
                str(wait_steps),
                "--step-delay",
                str(step_delay),
                "--report",
                str(tmp_path / f"worker{task}.json"),
            ],
            {},
        )


def _cluster(ports: list[int]) -> str:
    hosts = addresses(ports)
    return json.dumps({"ps": hosts[:1], "worker": hosts[1:]})


def test_cluster_trains_to_target_and_only_the_chief_writes(tmp_path: Path) -> None:
    last_step = 150
    with within(TRAIN_SECS), Processes(tmp_path / "logs") as processes:
        _start_cluster(
            processes, tmp_path, _cluster(free_ports(3)), last_step, step_delay=0.01, wait_steps=40
        )
        processes.wait_all_ok(["worker0", "worker1"], timeout=TRAIN_SECS)
        assert processes.alive("ps"), "the parameter server serves until it is killed"
    chief = read_report(tmp_path / "worker0.json")
    worker = read_report(tmp_path / "worker1.json")

    # The chief initialized the model; the worker waited for it.
    assert chief["is_chief"] and not worker["is_chief"]
    assert chief["creations"] == [0]
    assert len(worker["creations"]) == 1
    # GlobalStepWaiterHook held the worker's first step until global step 40.
    assert worker["first_step"] >= 40
    assert worker["steps_run"] > 0 and chief["steps_run"] > 0
    # Both stopped at the target: asynchronous workers, so the other worker
    # may add its one step in flight.
    for report in (chief, worker):
        assert last_step <= report["final_step"] <= last_step + 1
    assert chief["steps_run"] + worker["steps_run"] >= last_step
    # A real model trained: the loss fell by orders of magnitude.
    assert chief["losses"][-1] < chief["losses"][0] / 100

    out = tmp_path / "out"
    files = files_under(out)
    assert all(CHIEF_FILE.match(name) for name in files), files
    # One event file: the chief's summaries; the worker ran only its own hooks.
    (events,) = event_files(out)
    tags = summary_tags(events)
    assert tags["loss"][0] == 1 and len(tags["loss"]) >= 3
    assert "global_step/sec" in tags
    latest = latest_checkpoint_step(out)
    assert latest is not None and last_step <= latest <= last_step + 1
    assert "graph.pbtxt" in files and f"model.ckpt-{latest}.index" in files


def _steps_run(report: Path) -> int:
    """Steps a worker has run so far, from the report it rewrites every 10 steps."""
    return int(read_report(report).get("steps_run", 0)) if report.exists() else 0


def test_cluster_recovers_when_the_parameter_server_restarts(tmp_path: Path) -> None:
    """SIGKILL the ps mid-training and start it again on its address: both
    workers' connections break (UnavailableError/AbortedError), their sessions
    are re-created, the chief restores the latest checkpoint into the fresh
    ps, the worker waits for it, and training reaches the target."""
    last_step = 150
    out = tmp_path / "out"
    cluster = _cluster(free_ports(3))
    waits = (START_SECS, START_SECS, RECOVER_SECS, PEER_EXIT_SECS)
    with within(*waits), Processes(tmp_path / "logs") as processes:
        _start_cluster(processes, tmp_path, cluster, last_step, step_delay=0.02)
        wait_for(
            lambda: (latest_checkpoint_step(out) or 0) >= 20,
            timeout=START_SECS,
            what="the chief's checkpoint of step 20",
        )
        # Both workers must be training when the ps dies, or one of them
        # would never see its connection break.
        names = ("worker0", "worker1")
        wait_for(
            lambda: all(_steps_run(tmp_path / f"{name}.json") >= 10 for name in names),
            timeout=START_SECS,
            what="both workers' first 10 steps",
        )
        processes.kill("ps")
        saved_before = latest_checkpoint_step(out)
        assert saved_before is not None
        processes.start(
            "ps-restarted", TRAIN_CLUSTER, ["--cluster", cluster, "--job", "ps", "--task", "0"], {}
        )
        processes.wait_ok("worker0", timeout=RECOVER_SECS)
        processes.wait_ok("worker1", timeout=PEER_EXIT_SECS)
    chief = read_report(tmp_path / "worker0.json")
    worker = read_report(tmp_path / "worker1.json")

    # The chief's session was re-created once, from a checkpoint no older
    # than the latest one when the ps died: nothing saved was lost.
    assert len(chief["creations"]) == 2, chief["creations"]
    restored = chief["creations"][1]
    assert restored >= saved_before
    assert len(worker["creations"]) == 2, worker["creations"]
    # The worker reads the step once the chief has restored; the chief reads
    # it after its own restore too, so either may see a step the other ran.
    assert worker["creations"][1] >= saved_before
    for report in (chief, worker):
        assert last_step <= report["final_step"] <= last_step + 1
    latest = latest_checkpoint_step(out)
    assert latest is not None and latest >= last_step
    files = files_under(out)
    assert all(CHIEF_FILE.match(name) for name in files), files
