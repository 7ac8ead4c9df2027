"""Failing disks and two writers, with real processes: saves that fail are errors.

A real file-size limit (RLIMIT_FSIZE) makes a save fail with EFBIG, which
TensorFlow reports as OutOfRangeError: the run must fail with the path, not
end as if the data were exhausted, and the previous checkpoint must stay
loadable. Two real processes on one checkpoint_dir: the second fails fast.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import tensorflow as tf

CHILD = str(Path(__file__).with_name("checkpoint_disk_child.py"))
LOCK = ".monsession.lock"


def _child(mode, directory, last_step, limit=0, hold=False, session="mts", **kwargs):
    return subprocess.Popen(
        [
            sys.executable,
            CHILD,
            mode,
            str(directory),
            str(last_step),
            str(limit),
            "1" if hold else "0",
            session,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.PIPE,
        text=True,
        **kwargs,
    )


def _run(mode, directory, last_step, limit=0, session="mts"):
    child = _child(mode, directory, last_step, limit, session=session)
    out, err = child.communicate(timeout=300)
    return child.returncode, out, err


def _step_key(mode):
    return "global_step" if mode == "graph" else "step/.ATTRIBUTES/VARIABLE_VALUE"


@pytest.mark.parametrize("mode", ["graph", "eager"])
def test_file_too_large_is_an_error_with_the_path_and_keeps_the_checkpoint(tmp_path, mode):
    status, out, err = _run(mode, tmp_path, 5)
    assert status == 0, err
    assert "TRAINED 5" in out
    status, out, err = _run(mode, tmp_path, 20, limit=1024 * 1024)  # The data file is 4 MiB.
    assert "RESTORED 5" in out
    assert status != 0, "the failed save ended the run as if the data were exhausted"
    assert "TRAINED" not in out
    assert "CheckpointSaveError" in err
    assert str(tmp_path / "model.ckpt-10") in err
    # The error's own message names the cause, in both modes (graph mode's
    # used to end with "Graph execution error:").
    (message,) = [line for line in err.splitlines() if "CheckpointSaveError: " in line]
    assert "File too large" in message, message
    latest = tf.train.latest_checkpoint(str(tmp_path))
    assert latest == str(tmp_path / "model.ckpt-5")
    reader = tf.train.load_checkpoint(latest)
    assert reader.get_tensor(_step_key(mode)) == 5
    assert not (tmp_path / LOCK).exists()
    # The failed save left nothing of its own (unmerged shards, hook state).
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("model.ckpt-10")] == []


def test_damaged_latest_resumes_from_the_previous_one(tmp_path):
    """Before, eager mode restarted at step 0 when the latest index was deleted.

    Graph mode is covered in process by core's tests.
    """
    mode = "eager"
    status, _, err = _run(mode, tmp_path, 10)
    assert status == 0, err
    (tmp_path / "model.ckpt-10.index").unlink()
    status, out, err = _run(mode, tmp_path, 12)
    assert status == 0, err
    assert "RESTORED 5" in out
    assert "TRAINED 12" in out
    assert "model.ckpt-10.index is missing" in err
    # Every checkpoint older than the damaged one is still there and readable.
    for step in (0, 5, 12):
        assert (
            tf.train.load_checkpoint(str(tmp_path / f"model.ckpt-{step}")).get_tensor(
                _step_key(mode)
            )
            == step
        )


def test_second_chief_on_one_directory_fails_fast_naming_the_first(tmp_path):
    first = _child("graph", tmp_path, 7, hold=True)
    try:
        assert first.stdout.readline().startswith("RESTORED"), first.stderr.read()
        holder = json.loads((tmp_path / LOCK).read_text())
        assert holder["pid"] == first.pid
        status, out, err = _run("eager", tmp_path, 7)
        assert status != 0
        assert "RESTORED" not in out
        assert "DirectoryLockedError" in err
        assert f"process {first.pid} on host" in err
        first.stdin.write("\n")
        first.stdin.flush()
        out, err = first.communicate(timeout=300)
        assert first.returncode == 0, err
        assert "TRAINED 7" in out
    finally:
        first.kill()
        first.wait()
    assert not (tmp_path / LOCK).exists()


def test_stale_lock_of_a_dead_process_is_taken_over(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (tmp_path / LOCK).write_text(json.dumps({"pid": dead.pid, "host": os.uname().nodename}))
    status, out, err = _run("eager", tmp_path, 3)
    assert status == 0, err
    assert "TRAINED 3" in out
    assert f"Taking over the lock {tmp_path / LOCK} of process {dead.pid}" in err
    assert not (tmp_path / LOCK).exists()


# A CheckpointSaverHook used directly (no MonitoredTrainingSession) holds the lock too.
DIRECT = [
    pytest.param("graph", "ms", "graph", "mts", id="graph-MonitoredSession-vs-MTS"),
    pytest.param("eager", "sms", "eager", "ms", id="eager-Singular-vs-MonitoredSession"),
    pytest.param("graph", "sms", "eager", "sms", id="graph-Singular-vs-eager-Singular"),
    pytest.param("eager", "ms", "graph", "ms", id="eager-MonitoredSession-vs-graph"),
]


@pytest.mark.parametrize(("first_mode", "first_session", "second_mode", "second_session"), DIRECT)
def test_checkpoint_hook_alone_holds_the_directory(
    tmp_path, first_mode, first_session, second_mode, second_session
):
    first = _child(first_mode, tmp_path, 7, hold=True, session=first_session)
    try:
        assert first.stdout.readline().startswith("RESTORED"), first.stderr.read()
        assert json.loads((tmp_path / LOCK).read_text())["pid"] == first.pid
        status, out, err = _run(second_mode, tmp_path, 7, session=second_session)
        assert status != 0
        assert "RESTORED" not in out
        assert "DirectoryLockedError" in err
        assert f"process {first.pid} on host" in err
        first.stdin.write("\n")
        first.stdin.flush()
        out, err = first.communicate(timeout=300)
        assert first.returncode == 0, err
        assert "TRAINED 7" in out
        assert "Taking over" not in err  # One lock, taken once, by the checkpoint hook.
    finally:
        first.kill()
        first.wait()
    assert not (tmp_path / LOCK).exists()
    # Released: the next run (of the first's mode, which wrote the checkpoints) goes on.
    status, out, err = _run(first_mode, tmp_path, 9, session=second_session)
    assert status == 0, err
    assert "RESTORED 7" in out and "TRAINED 9" in out
    assert not (tmp_path / LOCK).exists()


@pytest.mark.parametrize("mode", ["graph", "eager"])
def test_checkpoint_hook_alone_takes_over_a_stale_lock_and_releases_on_failure(tmp_path, mode):
    status, out, err = _run(mode, tmp_path, 5, session="ms")
    assert status == 0, err
    assert not (tmp_path / LOCK).exists()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (tmp_path / LOCK).write_text(json.dumps({"pid": dead.pid, "host": os.uname().nodename}))
    # The save at step 10 fails (file too large): the session fails, on_failure releases.
    status, out, err = _run(mode, tmp_path, 20, limit=1024 * 1024, session="ms")
    assert "RESTORED 5" in out
    assert status != 0
    assert "CheckpointSaveError" in err
    assert f"Taking over the lock {tmp_path / LOCK} of process {dead.pid}" in err
    assert not (tmp_path / LOCK).exists()
