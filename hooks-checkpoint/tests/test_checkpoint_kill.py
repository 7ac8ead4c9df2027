"""Nothing lost: SIGKILL during a save leaves the latest checkpoint loadable and whole."""

from __future__ import annotations

import collections
import os
import random
import signal
import subprocess
import sys
import time

import numpy as np
import tensorflow as tf

CHILD = os.path.join(os.path.dirname(__file__), "checkpoint_kill_child.py")
DEADLINE_SECS = 120  # Bounds a hung child; a loaded machine may need long.
MODES = {
    "graph": ("global_step", [f"w{i}" for i in range(4)]),
    "eager-async": (
        "step/.ATTRIBUTES/VARIABLE_VALUE",
        [f"w{i}/_kernel/.ATTRIBUTES/VARIABLE_VALUE" for i in range(4)],
    ),
}


def _kill_while_saving(root, rng):
    """Runs the child until both loops saved twice, SIGKILLs it inside a save of one.

    Returns:
      The last step each loop announced it was saving before the kill.
    """
    deadline = time.monotonic() + DEADLINE_SECS
    child = subprocess.Popen(
        [sys.executable, CHILD, root],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"},
    )
    saving = {}
    started = {}
    durations = collections.defaultdict(list)
    target = rng.choice(sorted(MODES))
    try:
        while True:
            line = child.stdout.readline()
            assert line, f"the child exited early: {child.stderr.read()[-2000:]}"
            assert time.monotonic() < deadline, "the child did not save in time"
            mode, kind, step = line.split()
            if kind == "SAVED":
                durations[mode].append(time.monotonic() - started[mode])
                continue
            saving[mode], started[mode] = int(step), time.monotonic()
            if mode == target and all(len(durations[m]) >= 2 for m in MODES):
                break
        # Somewhere inside this save: before, while or after the files are written.
        time.sleep(rng.uniform(0, 1.5 * max(durations[target])))
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=10)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        child.stdout.close()
        child.stderr.close()
    assert child.returncode == -signal.SIGKILL
    return saving


def test_sigkill_during_save_leaves_a_loadable_checkpoint(tmp_path):
    saving = _kill_while_saving(str(tmp_path), random.Random())
    for mode, (step_name, weight_names) in MODES.items():
        latest = tf.train.latest_checkpoint(str(tmp_path / mode))
        assert latest is not None, mode
        reader = tf.train.load_checkpoint(latest)
        saved_step = int(reader.get_tensor(step_name))
        # "SAVING n" is announced once checkpoint n - 1 is complete.
        assert saved_step >= saving[mode] - 1, mode
        assert latest.endswith(f"-{saved_step}")
        for name in weight_names:
            values = reader.get_tensor(name)
            assert values.shape == (1024, 4096)
            np.testing.assert_array_equal(values, np.float32(saved_step), err_msg=f"{mode} {name}")
