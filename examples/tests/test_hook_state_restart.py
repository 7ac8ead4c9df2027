"""Hook state survives a SIGKILL between two checkpoints, in graph and eager mode.

The child (`hook_state_child.py`) trains to global step 13 with a checkpoint
every 5 steps, and is killed there: its latest checkpoint is step 10. The
restarted child must find every standard stateful hook as the checkpoint
left it (the state saved beside ``model.ckpt-10``), and act on it as an
uninterrupted run would: the summary saver (every 3 steps: 1, 4, 7, 10...)
goes on at 13, 16, 19; the logging hook (every 3 runs: steps 1, 4, 7,
10...) at 13, 16, 19, its first line without a time, as the first line of
any process; the step counter (every 4 steps from step 9) writes its rate
at 13 and 17, the one at 13 without the time the job was down.
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


def _summary_steps(directory: str) -> dict[str, list[int]]:
    """The steps of each tag in the event file of `directory`, and of its START logs."""
    (path,) = glob.glob(os.path.join(directory, "events.out.tfevents.*"))
    steps: dict[str, list[int]] = {}
    start = tf.compat.v1.SessionLog.START
    for event in event_file_loader.LegacyEventFileLoader(path).Load():
        if event.HasField("session_log") and event.session_log.status == start:
            steps.setdefault("START", []).append(event.step)
        for value in event.summary.value:
            steps.setdefault(value.tag, []).append(event.step)
    return steps


def _log_lines(lines: list[str], mode: str) -> list[str]:
    prefix = f"{mode} LOG "
    return [line[len(prefix) :] for line in lines if line.startswith(prefix)]


def test_hook_state_continues_after_sigkill_between_checkpoints(tmp_path):
    root = str(tmp_path)
    first_lines = _run_and_kill(root)
    first = _states(first_lines)
    for mode in MODES:
        # Fresh hooks when nothing was restored.
        assert first[mode]["StepCounterHook"]["timer"]["last_triggered_step"] is None, mode
        assert first[mode]["LoggingTensorHook"]["iterations"] == 0, mode
        assert tf.train.latest_checkpoint(os.path.join(root, mode)).endswith("model.ckpt-10")
        # The first line of a process has no time; the next ones have one.
        logged = _log_lines(first_lines, mode)
        assert "sec)" not in logged[0] and all(line.endswith(" sec)") for line in logged[1:])

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
        for name in ("CheckpointSaverHook", "SummarySaverHook", "StepCounterHook"):
            assert (
                state[name]["timer"]["last_triggered_step"]
                == expect[f"{name}[0]"]["timer"]["last_triggered_step"]
            ), (mode, name)
        # The last triggers before the checkpoint at step 10, and the runs counted.
        assert state["CheckpointSaverHook"]["timer"]["last_triggered_step"] == 10, mode
        assert state["SummarySaverHook"]["timer"]["last_triggered_step"] == 10, mode
        assert state["StepCounterHook"]["timer"]["last_triggered_step"] == 9, mode
        # Hooks after the checkpoint saver are saved as of the end of step 10 too.
        assert state["LoggingTensorHook"]["iterations"] == 10, mode
        assert state["LoggingTensorHook"]["timer"]["last_triggered_step"] == 9, mode
        assert state["ProgressBarHook"]["iterations"] == 10, mode
        # Times are durations since the last trigger, not clock times.
        assert "last_triggered_time" not in state["CheckpointSaverHook"]["timer"], mode

        summaries = os.path.join(root, mode, "summaries-second")
        steps = _summary_steps(summaries)
        # Uninterrupted: 1, 4, 7, 10, 13, 16, 19. The restarted process writes no
        # summary at its first step (11), only the summary saver's START (the
        # step counter shares the directory and writes none, as TensorFlow's)
        # that hides what the killed process wrote past the checkpoint.
        assert steps["value"] == [13, 16, 19], mode
        assert steps["START"] == [11], mode
        # The step counter goes on every 4 steps from step 9: 13, then 17.
        assert steps["global_step/sec"] == [13, 17], mode
        logged = _log_lines(out.splitlines(), mode)
        assert len(logged) == 3, (mode, logged)
        assert "sec)" not in logged[0], (mode, logged)
        assert all(line.endswith(" sec)") for line in logged[1:]), (mode, logged)
    # Eager mode logs the value the step returns: x is the global step.
    assert [line.split()[2] for line in _log_lines(out.splitlines(), "eager")] == [
        "13.0",
        "16.0",
        "19.0",
    ]
