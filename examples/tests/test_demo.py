"""The quickstart demo, run as a user runs it: twice, in a real subprocess."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest
import tensorflow as tf
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

DEMO = pathlib.Path(__file__).parents[1] / "demo.py"


def run_demo(directory: pathlib.Path, *args: str) -> str:
    result = subprocess.run(
        [sys.executable, str(DEMO), "--dir", str(directory), "--steps", "60", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout + result.stderr


def scalar_tags(run_dir: pathlib.Path) -> set[str]:
    tags: set[str] = set()
    for events in run_dir.glob("events.out.tfevents.*"):
        accumulator = EventAccumulator(str(events))
        accumulator.Reload()
        tags |= set(accumulator.Tags()["scalars"])
        tags |= {t for t in accumulator.Tags()["tensors"]}
    return tags


@pytest.mark.parametrize("mode", ["eager", "graph"])
def test_demo_trains_writes_and_resumes(tmp_path, mode):
    flags = ["--graph"] if mode == "graph" else []
    first = run_demo(tmp_path, *flags)
    run_dir = tmp_path / mode
    assert "Starting at step 0" in first
    assert f"tensorboard --logdir {tmp_path}" in first
    assert "loss = " in first, "the periodic loss log"
    checkpoint = tf.train.latest_checkpoint(str(run_dir))
    assert checkpoint.endswith("model.ckpt-60")
    assert tf.train.load_checkpoint(checkpoint).get_variable_to_shape_map()
    assert {"loss", "global_step/sec"} <= scalar_tags(run_dir)

    second = run_demo(tmp_path, *flags)
    assert "Starting at step 60 (resumed from the checkpoint)" in second
    assert tf.train.latest_checkpoint(str(run_dir)).endswith("model.ckpt-120")
