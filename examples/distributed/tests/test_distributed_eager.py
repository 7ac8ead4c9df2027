"""Eager mode on `tf.distribute` strategies: `MirroredStrategy` in this process,
`MultiWorkerMirroredStrategy` across two processes on 127.0.0.1 (`TF_CONFIG`),
and a job that loses a worker to SIGKILL and is restarted."""

from __future__ import annotations

import os
import re
import signal
import sys
from pathlib import Path

import pytest
from distributed_testing import (
    EXAMPLE_DIR,
    IN_PROCESS_SECS,
    PEER_EXIT_SECS,
    SIGNAL_EXIT_SECS,
    START_SECS,
    SURVIVOR_EXIT_SECS,
    TRAIN_MULTIWORKER,
    TRAIN_SECS,
    Processes,
    addresses,
    event_files,
    files_under,
    free_ports,
    latest_checkpoint_step,
    read_report,
    summary_tags,
    tf_config,
    two_logical_cpus,
    wait_for,
    within,
    worker_temp_dirs,
)

CHIEF_FILE = re.compile(
    r"^(checkpoint|events\.out\.tfevents\..*"
    r"|model\.ckpt-\d+\.(index|hooks\.json|data-\d{5}-of-\d{5}))$"
)


def _checkpoint_step(path: Path) -> int:
    import tensorflow as tf

    return int(tf.train.load_checkpoint(str(path)).get_tensor("step/.ATTRIBUTES/VARIABLE_VALUE"))


def _event_file_pid(path: Path) -> int:
    # events.out.tfevents.<time>.<host>.<pid>.<n>.v2
    return int(path.name.split(".")[-3])


def _start_workers(
    processes: Processes,
    tmp_path: Path,
    run: str,
    last_step: int,
    step_delay: float = 0.0,
    save_steps: int = 10,
    saver: str = "checkpoint",
    steps_per_execution: str = "1",
    out: str = "out",
) -> None:
    workers = addresses(free_ports(2))
    for index in (0, 1):
        temp = tmp_path / f"{run}-tmp{index}"
        temp.mkdir()
        processes.start(
            f"{run}-worker{index}",
            TRAIN_MULTIWORKER,
            [
                "--output-dir",
                str(tmp_path / out),
                "--last-step",
                str(last_step),
                "--save-checkpoint-steps",
                str(save_steps),
                "--save-summaries-steps",
                "10",
                "--step-delay",
                str(step_delay),
                "--report",
                str(tmp_path / f"{run}-worker{index}.json"),
                "--saver",
                saver,
                "--steps-per-execution",
                steps_per_execution,
            ],
            {"TF_CONFIG": tf_config(workers, index), "TMPDIR": str(temp)},
        )


def test_mirrored_strategy_in_process(tmp_path: Path) -> None:
    import tensorflow as tf

    (cpu,) = tf.config.list_physical_devices("CPU")
    try:
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * 2
        )
    except RuntimeError:  # Devices already initialized in this process.
        pass
    devices = [device.name for device in tf.config.list_logical_devices("CPU")]
    assert len(devices) == 2, f"need 2 logical CPUs, this process has {devices}"
    sys.path.insert(0, str(EXAMPLE_DIR))
    try:
        from train_multiworker import train
    finally:
        sys.path.remove(str(EXAMPLE_DIR))
    strategy = tf.distribute.MirroredStrategy(devices)
    out = tmp_path / "out"
    with within(IN_PROCESS_SECS):
        first = train(strategy, str(out), last_step=30)
        second = train(strategy, str(out), last_step=40)

    assert first["replicas"] == 2 and first["is_chief"]
    assert first["creations"] == [0] and first["final_step"] == 30
    assert first["losses"][-1] < first["losses"][0] / 10
    # A second session restores the checkpoint of step 30 and goes on to 40.
    assert second["creations"] == [30] and second["final_step"] == 40
    assert second["losses"][0] < first["losses"][0] / 10
    assert latest_checkpoint_step(out) == 40
    assert _checkpoint_step(out / "model.ckpt-40") == 40
    files = files_under(out)
    assert all(CHIEF_FILE.match(name) for name in files), files
    (events,) = event_files(out)
    assert _event_file_pid(events) == os.getpid()
    tags = summary_tags(events)
    assert tags["loss"] == [1, 11, 21, 31]


def test_multiworker_trains_to_target_and_only_the_chief_writes(tmp_path: Path) -> None:
    """Two jobs side by side: single steps, and steps_per_execution="auto"
    (the workers agree after each run how many steps the next one fuses, so
    both fuse the same steps, as collective ops need). Each trains to the
    target, only its chief writes; the fused job's files, every step's loss
    and its weights are those of single steps."""
    last_step = 40
    with within(TRAIN_SECS), Processes(tmp_path / "logs") as processes:
        _start_workers(processes, tmp_path, "single", last_step, out="single")
        _start_workers(
            processes, tmp_path, "fused", last_step, steps_per_execution="auto", out="fused"
        )
        names = ["single-worker0", "single-worker1", "fused-worker0", "fused-worker1"]
        processes.wait_all_ok(names, timeout=TRAIN_SECS)
    reference = read_report(tmp_path / "single-worker0.json")
    for run in ("single", "fused"):
        chief = read_report(tmp_path / f"{run}-worker0.json")
        worker = read_report(tmp_path / f"{run}-worker1.json")

        # Worker 0 is the chief of a workers-only cluster (the strategy decides).
        assert chief["is_chief"] and not worker["is_chief"]
        for report in (chief, worker):
            assert report["replicas"] == 2
            assert report["creations"] == [0]
            assert report["final_step"] == last_step  # Every worker stops at the same step.
            # The replicas stayed in sync, fused or not: the same loss at every
            # step, the same weights.
            assert report["losses"] == reference["losses"] and len(report["losses"]) == last_step
            assert report["weights"] == reference["weights"]
        assert chief["losses"][-1] < chief["losses"][0] / 100
        # Both workers fused the same steps (the chief's hooks act on steps 1,
        # 10, 11, 20, 21, 30, 31, 40; how many of the others fuse also follows
        # the pace of the calls before, so only "some" is asserted).
        assert chief["fused"] == worker["fused"]
        assert chief["fused"] > 0 if run == "fused" else chief["fused"] == 0

        # The worker mirrored the chief's saves into its temporary directory...
        assert f"model.ckpt-{last_step}.index" in worker["worker_temp_files"]
        assert chief["worker_temp_files"] == []
        # ...which is gone; nothing of the worker is left anywhere.
        assert worker_temp_dirs(tmp_path / f"{run}-tmp1") == []
        out = tmp_path / run
        files = files_under(out)
        assert all(CHIEF_FILE.match(name) for name in files), files
        (events,) = event_files(out)
        assert _event_file_pid(events) == chief["pid"]
        left = _what_the_job_left(out)
        assert left["summaries"] == {"loss": [1, 11, 21, 31], "global_step/sec": [11, 21, 31]}
        assert left["latest"] == last_step
        saved = {name: step for name, (step, _, _) in left["checkpoints"].items()}
        assert saved == {f"model.ckpt-{step}.index": step for step in (0, 10, 20, 30, 40)}
    assert _what_the_job_left(tmp_path / "fused") == _what_the_job_left(tmp_path / "single")


MANAGER_FILE = re.compile(
    r"^(checkpoint|events\.out\.tfevents\..*|ckpt-\d+\.(index|hooks\.json|data-\d{5}-of-\d{5}))$"
)


# A survivor learns of a dead peer from TensorFlow's coordination service
# (heartbeat timeout: 10 s) or at once from a broken connection, then exits.
# The documented bound is 30 s (README, "When a worker dies"); the tests wait
# a little longer so that a slow CI machine does not fail them.
PEER_FAILED = "a worker of the job failed or cannot be reached"


def test_multiworker_survivor_fails_fast_and_the_restarted_job_resumes(tmp_path: Path) -> None:
    """SIGKILL worker 1 mid-training: the chief does not retry forever, it exits
    non-zero with a clear error; the job (both workers) is then restarted, as a
    cluster manager restarts a MultiWorkerMirroredStrategy job; every worker
    restores the chief's latest checkpoint and the job reaches the target.

    The saver is a tf.train.CheckpointManager on every worker
    (Scaffold(saver=manager)): the chief's manager saves (its file names, its
    max_to_keep=2), worker 1 saves the manager's Checkpoint into its
    temporary directory."""
    last_step = 120
    out = tmp_path / "out"
    waits = (START_SECS, SURVIVOR_EXIT_SECS, TRAIN_SECS, PEER_EXIT_SECS)
    with within(*waits), Processes(tmp_path / "logs") as processes:
        _start_workers(processes, tmp_path, "first", last_step, step_delay=0.05, saver="manager")
        wait_for(
            lambda: (latest_checkpoint_step(out) or 0) >= 20,
            timeout=START_SECS,
            what="the chief's checkpoint of step 20",
        )
        processes.kill("first-worker1")
        # The chief cannot go on without its peer: it exits, and says why.
        assert processes.wait("first-worker0", timeout=SURVIVOR_EXIT_SECS) == 1
        chief_log = processes.log("first-worker0").read_text()
        assert PEER_FAILED in chief_log
        assert "Restart every worker of the job" in chief_log
        assert "creating the session again" not in chief_log  # No retry.
        saved = latest_checkpoint_step(out)
        assert saved is not None and saved < last_step
        assert _checkpoint_step(out / f"ckpt-{saved}") == saved
        killed_at = read_report(tmp_path / "first-worker0.json")
        assert "final_step" not in killed_at
        assert killed_at["creations"] == [0]
        killed_worker = read_report(tmp_path / "first-worker1.json")
        # (Its report is written every 5 steps: a save of 10 or later.)
        assert any(
            re.fullmatch(r"model\.ckpt-[1-9]\d*0\.index", name)
            for name in killed_worker["worker_temp_files"]
        ), killed_worker["worker_temp_files"]

        _start_workers(processes, tmp_path, "second", last_step, saver="manager")
        processes.wait_ok("second-worker0", timeout=TRAIN_SECS)
        processes.wait_ok("second-worker1", timeout=PEER_EXIT_SECS)
    chief = read_report(tmp_path / "second-worker0.json")
    worker = read_report(tmp_path / "second-worker1.json")

    for report in (chief, worker):
        # Both resumed from the latest checkpoint at the time of the kill...
        assert report["creations"] == [saved]
        # ...not from scratch, and reached the target together.
        assert report["losses"][0] < killed_at["losses"][0] / 10
        assert report["final_step"] == last_step
    assert latest_checkpoint_step(out) == last_step
    assert worker_temp_dirs(tmp_path / "second-tmp1") == []
    # The manager kept its 2 latest checkpoints, under its own name.
    assert sorted(path.name for path in out.glob("ckpt-*.index")) == [
        f"ckpt-{last_step - 10}.index",
        f"ckpt-{last_step}.index",
    ]
    assert all(MANAGER_FILE.match(name) for name in files_under(out)), files_under(out)
    assert _checkpoint_step(out / f"ckpt-{last_step}") == last_step


def test_multiworker_chief_killed_the_worker_fails_fast(tmp_path: Path) -> None:
    """SIGKILL the chief (which also leads TensorFlow's coordination service):
    worker 1 exits non-zero with the same clear error."""
    with within(START_SECS, SURVIVOR_EXIT_SECS), Processes(tmp_path / "logs") as processes:
        _start_workers(processes, tmp_path, "run", 100_000, step_delay=0.05, save_steps=100_000)
        wait_for(
            lambda: read_report_step(tmp_path / "run-worker1.json") >= 10,
            timeout=START_SECS,
            what="step 10 on worker 1",
        )
        processes.kill("run-worker0")
        assert processes.wait("run-worker1", timeout=SURVIVOR_EXIT_SECS) == 1
        assert PEER_FAILED in processes.log("run-worker1").read_text()


def read_report_step(path: Path) -> int:
    """The last step a worker's report recorded; 0 before its first report."""
    try:
        return int(read_report(path).get("step", 0))
    except (FileNotFoundError, ValueError):
        return 0


def test_multiworker_sigterm_to_one_worker_stops_every_worker_after_one_step(
    tmp_path: Path,
) -> None:
    """SIGTERM reaches worker 1 only (not the chief) mid-training: after the same
    step both workers stop, take part in the final (collective) save, whose
    checkpoint the chief writes, and die of SIGTERM; no step is lost."""
    out = tmp_path / "out"
    waits = (START_SECS, SIGNAL_EXIT_SECS, SIGNAL_EXIT_SECS)
    with within(*waits), Processes(tmp_path / "logs") as processes:
        # No scheduled save before the stop: the checkpoint is the one of end().
        _start_workers(processes, tmp_path, "run", 100_000, step_delay=0.05, save_steps=100_000)
        wait_for(
            lambda: read_report_step(tmp_path / "run-worker1.json") >= 15,
            timeout=START_SECS,
            what="step 15 on worker 1",
        )
        os.kill(processes.pid("run-worker1"), signal.SIGTERM)
        # Each dies of SIGTERM, as without monsession (143 in a shell).
        assert processes.wait("run-worker1", timeout=SIGNAL_EXIT_SECS) == -signal.SIGTERM
        assert processes.wait("run-worker0", timeout=SIGNAL_EXIT_SECS) == -signal.SIGTERM
        chief_log = processes.log("run-worker0").read_text()
    chief = read_report(tmp_path / "run-worker0.json")
    worker = read_report(tmp_path / "run-worker1.json")

    stopped = chief["final_step"]
    assert stopped >= 15 and worker["final_step"] == stopped
    # Both ran the same steps, in step, up to the one they agreed on.
    assert len(chief["losses"]) == len(worker["losses"]) == stopped
    assert chief["losses"] == worker["losses"]
    assert "SIGTERM received by another worker" in chief_log
    # The chief's checkpoint holds the step reached: nothing is lost.
    assert latest_checkpoint_step(out) == stopped
    assert _checkpoint_step(out / f"model.ckpt-{stopped}") == stopped
    # The worker took part in that save (in its temporary directory, now gone).
    assert worker_temp_dirs(tmp_path / "run-tmp1") == []
    assert all(CHIEF_FILE.match(name) for name in files_under(out)), files_under(out)


def test_multiworker_second_signal_kills_one_worker_and_the_other_fails_fast(
    tmp_path: Path,
) -> None:
    """The same signal twice on worker 1 hands it on at once: worker 1 dies of
    it, mid-stop. The chief, whatever it was doing (a step, the stop
    agreement, the final collective save), exits non-zero too instead of
    waiting for the dead peer."""
    signum = signal.SIGTERM
    waits = (START_SECS, SIGNAL_EXIT_SECS, SURVIVOR_EXIT_SECS)
    with within(*waits), Processes(tmp_path / "logs") as processes:
        _start_workers(processes, tmp_path, "run", 100_000, step_delay=0.05, save_steps=100_000)
        wait_for(
            lambda: read_report_step(tmp_path / "run-worker1.json") >= 10,
            timeout=START_SECS,
            what="step 10 on worker 1",
        )
        os.kill(processes.pid("run-worker1"), signum)
        os.kill(processes.pid("run-worker1"), signum)
        assert processes.wait("run-worker1", timeout=SIGNAL_EXIT_SECS) == -signum
        chief_exit = processes.wait("run-worker0", timeout=SURVIVOR_EXIT_SECS)
        chief_log = processes.log("run-worker0").read_text()
    # Either the chief learnt of the signal first and stopped on it too, or
    # its peer was gone first and it failed; it never waits for the peer.
    if chief_exit == -signum:
        assert f"{signal.Signals(signum).name} received by another worker" in chief_log
    else:
        assert chief_exit == 1, chief_log[-3000:]
        assert PEER_FAILED in chief_log


# Fused steps under strategies: `steps_per_execution="auto"` runs the steps
# between hook actions inside one tf.function (a tf.while_loop of the step,
# which calls strategy.run). The report hook keeps every fused step's loss
# and counts them; the hooks' files must be those of single steps.


def _what_the_job_left(out: Path) -> dict[str, object]:
    """Each checkpoint's global step and weights, and the summary steps of each tag."""
    import tensorflow as tf

    checkpoints = {}
    for index in sorted(out.glob("model.ckpt-*.index")):
        reader = tf.train.load_checkpoint(str(index.with_suffix("")))
        checkpoints[index.name] = (
            int(reader.get_tensor("step/.ATTRIBUTES/VARIABLE_VALUE")),
            reader.get_tensor("weights/.ATTRIBUTES/VARIABLE_VALUE").ravel().tolist(),
            float(reader.get_tensor("bias/.ATTRIBUTES/VARIABLE_VALUE")),
        )
    (events,) = event_files(out)
    return {
        "latest": latest_checkpoint_step(out),
        "checkpoints": checkpoints,
        "summaries": summary_tags(events),
    }


def test_mirrored_strategy_fused_auto_equals_single_steps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """MirroredStrategy over 2 logical CPUs: "auto" fuses most steps (the fused
    loop wraps the step's strategy.run) and leaves exactly the checkpoints,
    summaries, per-step losses and weights of single steps."""
    import tensorflow as tf

    # No time budget: which steps fuse does not depend on this machine's pace.
    monkeypatch.setenv("MONSESSION_FUSED_CALL_SECONDS", "3600")
    strategy = tf.distribute.MirroredStrategy(two_logical_cpus())
    sys.path.insert(0, str(EXAMPLE_DIR))
    try:
        from train_multiworker import train
    finally:
        sys.path.remove(str(EXAMPLE_DIR))
    global_steps = tf.compat.v1.get_collection_ref(tf.compat.v1.GraphKeys.GLOBAL_STEP)
    with within(IN_PROCESS_SECS):
        # Each a fresh job: a new global step (not one of an earlier job of this process).
        global_steps.clear()
        single = train(strategy, str(tmp_path / "single"), last_step=40)
        global_steps.clear()
        fused = train(strategy, str(tmp_path / "fused"), last_step=40, steps_per_execution="auto")

    assert single["fused"] == 0
    # Hooks act on steps 1, 10, 11, 20, 21, 30, 31, 40: the 32 others ran fused.
    assert fused["fused"] == 32
    assert fused["final_step"] == single["final_step"] == 40
    assert fused["losses"] == single["losses"] and len(fused["losses"]) == 40
    assert fused["weights"] == single["weights"]
    left = _what_the_job_left(tmp_path / "fused")
    assert left == _what_the_job_left(tmp_path / "single")
    assert left["latest"] == 40
    saved = {name: step for name, (step, _, _) in left["checkpoints"].items()}
    assert saved == {f"model.ckpt-{step}.index": step for step in (0, 10, 20, 30, 40)}
    assert left["summaries"] == {"loss": [1, 11, 21, 31], "global_step/sec": [11, 21, 31]}


def test_multiworker_fused_sigterm_to_one_worker_stops_both_after_the_same_step(
    tmp_path: Path,
) -> None:
    """ "auto" under MultiWorkerMirroredStrategy, SIGTERM to worker 1 only: the
    signal is agreed at the end of the run it arrives in (the fused block and
    its last step), so both workers stop after the same step, the chief saves
    it, and no step is lost or run twice."""
    out = tmp_path / "out"
    waits = (START_SECS, SIGNAL_EXIT_SECS, SIGNAL_EXIT_SECS)
    with within(*waits), Processes(tmp_path / "logs") as processes:
        _start_workers(
            processes,
            tmp_path,
            "run",
            100_000,
            step_delay=0.05,
            save_steps=100_000,
            steps_per_execution="auto",
        )
        wait_for(
            lambda: read_report_step(tmp_path / "run-worker1.json") >= 15,
            timeout=START_SECS,
            what="step 15 on worker 1",
        )
        os.kill(processes.pid("run-worker1"), signal.SIGTERM)
        assert processes.wait("run-worker1", timeout=SIGNAL_EXIT_SECS) == -signal.SIGTERM
        assert processes.wait("run-worker0", timeout=SIGNAL_EXIT_SECS) == -signal.SIGTERM
        chief_log = processes.log("run-worker0").read_text()
    chief = read_report(tmp_path / "run-worker0.json")
    worker = read_report(tmp_path / "run-worker1.json")

    stopped = chief["final_step"]
    assert stopped >= 15 and worker["final_step"] == stopped
    assert chief["fused"] == worker["fused"] > 0
    assert len(chief["losses"]) == len(worker["losses"]) == stopped
    assert chief["losses"] == worker["losses"]
    assert "SIGTERM received by another worker" in chief_log
    assert latest_checkpoint_step(out) == stopped
    assert _checkpoint_step(out / f"model.ckpt-{stopped}") == stopped
    assert worker_temp_dirs(tmp_path / "run-tmp1") == []
