"""ParameterServerStrategy across processes: a dead parameter server ends the
coordinator at once, naming it; the newest checkpoint is intact, and the
restarted job resumes from it.

The job: 1 parameter server and 2 workers (`tf.distribute.Server`s, one
process each) and the coordinator (`ps_job_child.py coordinator`), on
127.0.0.1 with free ports. The coordinator holds after step 25 until the test
has seen checkpoint 20 and SIGKILLed the parameter server, so the kill falls
between two known steps whatever the machine's speed.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from distributed_testing import (
    Processes,
    addresses,
    free_ports,
    hard_timeout,
    latest_checkpoint_step,
    read_report,
    wait_for,
)

CHILD = Path(__file__).resolve().parent / "ps_job_child.py"
LAST_STEP = 40
GATE_STEP = 25
SAVED_BEFORE_KILL = 20
# ARCHITECTURE.md §7: a dead parameter server ends the coordinator within 30 s.
COORDINATOR_EXIT_SECS = 30
STEP_KEY = "monsession_global_step/.ATTRIBUTES/VARIABLE_VALUE"
WEIGHT_KEY = "weight/.ATTRIBUTES/VARIABLE_VALUE"
LOST_PS = "parameter server /job:ps/replica:0/task:0 was lost"


def _start_job(
    processes: Processes, tmp_path: Path, run: str, gate_dir: Path | None = None
) -> None:
    """A new cluster (ps, 2 workers) on free ports, and its coordinator."""
    ports = free_ports(3)
    cluster = json.dumps({"ps": addresses(ports[:1]), "worker": addresses(ports[1:])})
    processes.start(f"{run}-ps", CHILD, ["server", cluster, "ps", "0"], {})
    for task in (0, 1):
        processes.start(f"{run}-worker{task}", CHILD, ["server", cluster, "worker", str(task)], {})
    gate = [] if gate_dir is None else [str(GATE_STEP), str(gate_dir)]
    processes.start(
        f"{run}-coordinator",
        CHILD,
        [
            "coordinator",
            cluster,
            str(tmp_path / "out"),
            str(LAST_STEP),
            str(tmp_path / f"{run}.json"),
            *gate,
        ],
        {},
    )


def _saved(prefix: Path) -> tuple[int, float]:
    import tensorflow as tf

    reader = tf.train.load_checkpoint(str(prefix))
    return int(reader.get_tensor(STEP_KEY)), float(reader.get_tensor(WEIGHT_KEY))


def test_dead_parameter_server_ends_the_job_and_the_restarted_job_resumes(
    tmp_path: Path,
) -> None:
    out = tmp_path / "out"
    gate = tmp_path / "gate"
    gate.mkdir()
    with hard_timeout(420), Processes(tmp_path / "logs") as processes:
        _start_job(processes, tmp_path, "first", gate)
        wait_for(lambda: (gate / "reached").exists(), timeout=240, what=f"step {GATE_STEP}")
        # The checkpoint of step 20 is written in the background: wait for it.
        wait_for(
            lambda: latest_checkpoint_step(out) == SAVED_BEFORE_KILL,
            timeout=60,
            what=f"checkpoint {SAVED_BEFORE_KILL}",
        )
        processes.kill("first-ps")
        (gate / "go").touch()

        # No retry: the coordinator exits at once, with the error naming the ps.
        assert processes.wait("first-coordinator", timeout=COORDINATOR_EXIT_SECS) == 1
        log = processes.log("first-coordinator").read_text(errors="replace")
        assert "UnavailableError: MonitoredSession: running a step failed" in log
        assert LOST_PS in log
        assert "Restart the whole job" in log
        # monsession's retry line: "... creating the session again ... (retry 1 of at most 10)".
        assert "creating the session again" not in log
        assert not re.search(r"retry \d+ of at most", log)
        killed = read_report(tmp_path / "first.json")
        assert killed["creations"] == [0] and "final_step" not in killed
        # The newest checkpoint is intact: it loads, with its step and its weight.
        assert latest_checkpoint_step(out) == SAVED_BEFORE_KILL
        assert _saved(out / f"model.ckpt-{SAVED_BEFORE_KILL}") == (SAVED_BEFORE_KILL, 20.0)

        # The cluster manager restarts the whole job: a new ps, new workers.
        for name in ("first-worker0", "first-worker1"):
            processes.kill(name)
        _start_job(processes, tmp_path, "second")
        processes.wait_ok("second-coordinator", timeout=240)

    resumed = read_report(tmp_path / "second.json")
    assert resumed["creations"] == [SAVED_BEFORE_KILL]
    assert resumed["final_step"] == LAST_STEP
    # One closure per step since the checkpoint: exactly LAST_STEP in all.
    assert resumed["weight"] == float(LAST_STEP)
    numbers = sorted(
        int(index.name[len("model.ckpt-") : -len(".index")]) for index in out.glob("*.index")
    )
    assert numbers == [0, 10, 20, 30, 40]
    for number in numbers:
        assert _saved(out / f"model.ckpt-{number}") == (number, float(number))
    assert latest_checkpoint_step(out) == LAST_STEP
