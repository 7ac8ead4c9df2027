"""Hook state survives a SIGKILL between two checkpoints, in graph and eager mode.

The child (`hook_state_child.py`) trains to global step 13 with a checkpoint
every 5 steps, and is killed there: its latest checkpoint is step 10. The
restarted child must find every standard stateful hook as the checkpoint
left it (the state saved beside ``model.ckpt-10``), and act on it: the step
counter's next rate comes 4 steps after its last trigger before the
checkpoint (step 9), at 13 and 17, not at 11 as a fresh hook would start.
"""

from __future__ import annotations

import glob
import json
import os
import signal
import subprocess
import sys

import tensorflow as tf
from tensorboard.backend.event_processing import event_file_loader

CHILD = os.path.join(os.path.dirname(__file__), "hook_state_child.py")
TIMEOUT_SECS = 240
MODES = ("graph", "eager")


def _start(root: str, phase: str, stop_at: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, CHILD, root, phase, str(stop_at)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"},
    )


def _states(lines: list[str]) -> dict[str, dict[str, object]]:
    states = {}
    for line in lines:
        mode, kind, *rest = line.split(" ", 2)
        if kind == "STATE":
            states[mode] = json.loads(rest[0])
    return states


def _run_and_kill(root: str) -> list[str]:
    """Trains both modes to step 13 and SIGKILLs the child there."""
    child = _start(root, "first", 13)
    lines, ready = [], set()
    try:
        while ready != set(MODES):
            line = child.stdout.readline()
            assert line, f"the child exited early: {child.stderr.read()[-3000:]}"
            lines.append(line.strip())
            if line.split()[1] == "READY":
                ready.add(line.split()[0])
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        child.stdout.close()
        child.stderr.close()
    assert child.returncode == -signal.SIGKILL
    return lines


def _rate_steps(directory: str) -> list[int]:
    (path,) = glob.glob(os.path.join(directory, "events.out.tfevents.*"))
    steps = []
    for event in event_file_loader.LegacyEventFileLoader(path).Load():
        for value in event.summary.value:
            if value.tag == "global_step/sec":
                steps.append(event.step)
    return steps


def test_hook_state_continues_after_sigkill_between_checkpoints(tmp_path):
    root = str(tmp_path)
    first = _states(_run_and_kill(root))
    for mode in MODES:
        # Fresh hooks when nothing was restored.
        assert first[mode]["StepCounterHook"]["timer"]["last_triggered_step"] is None, mode
        assert first[mode]["LoggingTensorHook"]["iterations"] == 0, mode
        assert tf.train.latest_checkpoint(os.path.join(root, mode)).endswith("model.ckpt-10")

    saved = {}
    for mode in MODES:
        with open(os.path.join(root, mode, "model.ckpt-10.hooks.json")) as state_file:
            saved[mode] = json.load(state_file)["hooks"]

    restarted = _start(root, "second", 0)
    out, err = restarted.communicate(timeout=TIMEOUT_SECS)
    assert restarted.returncode == 0, err[-3000:]
    second = _states(out.splitlines())
    for mode in MODES:
        state = second[mode]
        expect = saved[mode]
        for name in ("CheckpointSaverHook", "SummarySaverHook", "LoggingTensorHook"):
            assert state[name] == expect[f"{name}[0]"], (mode, name)
        # The last triggers before the checkpoint at step 10, and the runs counted.
        assert state["CheckpointSaverHook"]["timer"]["last_triggered_step"] == 10, mode
        assert state["SummarySaverHook"]["timer"]["last_triggered_step"] == 10, mode
        assert state["StepCounterHook"]["timer"]["last_triggered_step"] == 9, mode
        # Logging hooks come after the checkpoint saver: as of the run before.
        assert state["LoggingTensorHook"]["iterations"] == 9, mode
        assert state["ProgressBarHook"] == expect["ProgressBarHook[0]"], mode
        # Wall-clock times survive the restart unchanged.
        checkpoint_timer = state["CheckpointSaverHook"]["timer"]
        saved_time = expect["CheckpointSaverHook[0]"]["timer"]["last_triggered_time"]
        assert checkpoint_timer["last_triggered_time"] == saved_time, mode
        # The step counter goes on every 4 steps from step 9: 13, 17 (a fresh
        # one would trigger at 11 without a rate, then at 15 and 19).
        assert _rate_steps(os.path.join(root, mode, "summaries-second")) == [13, 17], mode
