"""`Epochs` across hard kills: a checkpoint holds a consistent epoch counter and data position.

A child (epochs_child.py) trains 3 epochs of 10 steps, saving every 5 steps,
and kills itself with SIGKILL right after a given step. Killed on an epoch's
last step and mid-epoch, then finished here and run once more, the runs
together train the steps, on the batches, to the weight of one uninterrupted
run, and the finished loop trains nothing.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest
from epochs_child import EPOCHS, IDS, train

CHILD = os.path.join(os.path.dirname(__file__), "epochs_child.py")
STEPS = EPOCHS * IDS // 4


def run_child(directory, kill_after: int) -> list[list[str]]:
    """Runs the child until it kills itself after `kill_after` (0: to the end); its lines."""
    result = subprocess.run(
        [sys.executable, CHILD, str(directory), str(kill_after)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"},
    )
    expected = -signal.SIGKILL if kill_after else 0
    assert result.returncode == expected, result.stderr[-3000:]
    return [line.split() for line in result.stdout.splitlines()]


def ran(lines) -> dict[int, list[str]]:
    """The ids each step trained on, by step."""
    return {int(words[1]): words[2:] for words in lines if words[0] == "RAN"}


def yielded(lines) -> list[int]:
    return [int(words[1]) for words in lines if words[0] == "EPOCH"]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    lines, weight = train_here(tmp_path_factory.mktemp("straight"))
    assert sorted(ran(lines)) == list(range(1, STEPS + 1)) and yielded(lines) == [0, 1, 2]
    return ran(lines), weight


def train_here(directory) -> tuple[list[list[str]], float]:
    """Trains in this process (no kill); its lines and the final weight."""
    lines: list[list[str]] = []
    weight = train(str(directory), report=lambda *words: lines.append([str(w) for w in words]))
    return lines, weight


def test_hard_kills_at_an_epoch_boundary_and_mid_epoch_resume_exactly(tmp_path, uninterrupted):
    batches, weight = uninterrupted
    # Killed on an epoch's last step, just after its checkpoint (step 10),
    # then mid-epoch, after the checkpoint of step 15 (step 17).
    for kill_after, first in [(10, 1), (17, 11)]:
        steps = ran(run_child(tmp_path, kill_after))
        assert sorted(steps) == list(range(first, kill_after + 1)), f"killed after {kill_after}"
        assert steps == {step: batches[step] for step in steps}, "the batches of each step"
    lines, resumed = train_here(tmp_path)
    steps = ran(lines)
    assert sorted(steps) == list(range(16, STEPS + 1))
    assert steps == {step: batches[step] for step in steps}
    # The checkpoint of step 10 already counts epoch 0: killed before the
    # loop yielded it, it is neither trained nor yielded again.
    assert yielded(lines) == [1, 2]
    assert resumed == pytest.approx(weight, abs=1e-6)
    again, final = train_here(tmp_path)  # A finished loop, run again: nothing to train.
    assert ran(again) == {} and yielded(again) == []
    assert final == pytest.approx(weight, abs=1e-6)
