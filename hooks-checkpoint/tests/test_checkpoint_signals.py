"""SIGTERM and SIGINT: the step reached is saved before the process goes, in both modes.

Two children (checkpoint_signal_child.py) train phase after phase with
`MonitoredTrainingSession` and its default checkpoint saver (every 600
seconds), and get a real signal from this process in each phase.
"""

from __future__ import annotations

import concurrent.futures
import glob
import os
import signal

import numpy as np
import pytest
import tensorflow as tf
from checkpoint_testing import checkpoint_steps
from tensorboard.backend.event_processing import event_file_loader

import monsession.testing

CHILD = os.path.join(os.path.dirname(__file__), "checkpoint_signal_child.py")
CHILDREN = {
    "first": ["graph-sigint-caught", "eager-user", "graph-sigterm"],
    "second": ["eager-sigint-caught", "graph-off", "eager-sigterm"],
}
DECAY = 0.9
NAMES = {
    "graph": ("global_step", "w"),
    "eager": ("step/.ATTRIBUTES/VARIABLE_VALUE", "w/.ATTRIBUTES/VARIABLE_VALUE"),
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The two children, run at the same time: {phase: (run, its checkpoint_dir)}."""
    root = str(tmp_path_factory.mktemp("signals"))
    with concurrent.futures.ThreadPoolExecutor(len(CHILDREN)) as pool:
        futures = {
            name: pool.submit(monsession.testing.run_signal_phases, CHILD, phases, root)
            for name, phases in CHILDREN.items()
        }
        by_child = {name: future.result() for name, future in futures.items()}
    return {
        phase: (by_child[name], os.path.join(root, phase))
        for name, phases in CHILDREN.items()
        for phase in phases
    }


def latest_saved(phase, directory):
    """(global step, weight) of the latest checkpoint, read back from the files."""
    step_name, weight_name = NAMES[phase.split("-")[0]]
    reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(directory))
    return int(reader.get_tensor(step_name)), float(reader.get_tensor(weight_name))


def assert_saved_the_step_reached(run, phase, directory):
    reached = run.last_step(phase)
    step, weight = latest_saved(phase, directory)
    assert step == reached, run.stderr[-3000:]
    np.testing.assert_allclose(weight, DECAY**reached, rtol=1e-5)  # The state of that step.
    assert checkpoint_steps(directory) == [0, reached]  # Step 0, then the signal's save.


@pytest.mark.parametrize("phase", ["graph-sigterm", "eager-sigterm"])
def test_sigterm_saves_the_step_reached_then_ends_the_process(runs, phase):
    run, directory = runs[phase]
    assert_saved_the_step_reached(run, phase, directory)
    assert run.returncode == -signal.SIGTERM  # Exit status 143 in a shell.
    assert run.tagged("AFTER-WITH", phase) == []


@pytest.mark.parametrize("phase", ["graph-sigint-caught", "eager-sigint-caught"])
def test_sigint_saves_the_step_reached_then_raises_keyboard_interrupt(runs, phase):
    run, directory = runs[phase]
    assert_saved_the_step_reached(run, phase, directory)
    assert run.tagged("CAUGHT", phase) == ["KeyboardInterrupt"]
    assert run.tagged("AFTER-WITH", phase) == []


def test_the_users_sigterm_handler_runs_after_the_save(runs):
    phase = "eager-user"
    run, directory = runs[phase]
    assert_saved_the_step_reached(run, phase, directory)
    [handled] = run.tagged("USER-HANDLER", phase)
    signum, latest = handled.split()
    assert int(signum) == signal.SIGTERM
    assert latest == tf.train.latest_checkpoint(directory)  # Already saved when it ran.
    assert run.tagged("AFTER-WITH", phase) == [""]  # The handler returned.


def test_stop_on_signals_false_saves_nothing_at_the_signal(runs):
    phase = "graph-off"
    run, directory = runs[phase]
    handled = run.index("USER-HANDLER", phase)
    last_ran = max(i for i, line in enumerate(run.lines) if line.startswith(f"RAN {phase} "))
    assert last_ran > handled  # The handler ran at once and training went on,
    assert run.tagged("USER-HANDLER", phase)[0].split()[1].endswith("model.ckpt-0")
    assert checkpoint_steps(directory) == [0, 25]  # to its own end: no save at the signal.


@pytest.mark.parametrize("phase", ["graph-sigterm", "graph-sigint-caught"])
def test_graph_mode_event_file_is_flushed(runs, phase):
    run, directory = runs[phase]
    [path] = glob.glob(os.path.join(directory, "events.out.tfevents.*"))
    logged = [
        event.step
        for event in event_file_loader.EventFileLoader(path).Load()
        if event.HasField("session_log")
        and event.session_log.status == event.session_log.CHECKPOINT
    ]
    assert logged == [0, run.last_step(phase)]
