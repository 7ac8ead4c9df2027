"""Early stopping keeps its best value and patience across a SIGKILL, in both modes.

The child (`earlystop_restart_child.py`) evaluates every 2 steps with
patience 4 a loss that improves until step 6 and is flat after; it saves
every 5 steps. Killed at step 13, its latest checkpoint is step 10, whose
hook state holds the best value (step 6) and 2 evaluations without
improvement (8, 10). The restarted run goes on counting: 12 and 14 make 4,
and it stops at step 14. A hook that forgot would take step 12 as a first
improvement and stop only at step 20.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import tensorflow as tf

CHILD = os.path.join(os.path.dirname(__file__), "earlystop_restart_child.py")
MODES = ("graph", "eager")
TIMEOUT_SECS = 240


def _start(root: str, stop_at: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, CHILD, root, str(stop_at)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"},
    )


def _kill_at_step_13(root: str) -> None:
    child = _start(root, 13)
    ready = set()
    try:
        while ready != set(MODES):
            line = child.stdout.readline()
            assert line, f"the child exited early: {child.stderr.read()[-3000:]}"
            mode, kind = line.split()[:2]
            if kind == "READY":
                ready.add(mode)
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        child.stdout.close()
        child.stderr.close()
    assert child.returncode == -signal.SIGKILL


def test_early_stopping_continues_its_patience_after_sigkill(tmp_path):
    root = str(tmp_path)
    _kill_at_step_13(root)
    for mode in MODES:
        directory = os.path.join(root, mode)
        assert tf.train.latest_checkpoint(directory).endswith("model.ckpt-10"), mode
        with open(os.path.join(directory, "model.ckpt-10.hooks.json")) as state_file:
            state = json.load(state_file)["hooks"]["EarlyStoppingHook[0]"]
        assert state["best"] == 4.0 and state["best_step"] == 6 and state["wait"] == 2, mode

    restarted = _start(root, -1)
    out, err = restarted.communicate(timeout=TIMEOUT_SECS)
    assert restarted.returncode == 0, err[-3000:]
    results = {}
    for line in out.splitlines():
        mode, kind, *rest = line.split(" ", 2)
        if kind == "STOPPED":
            results[mode] = json.loads(rest[0])
    assert results == {mode: {"stopped": 14, "best": 4.0, "best_step": 6} for mode in MODES}
