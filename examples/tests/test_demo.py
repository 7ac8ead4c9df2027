"""The quickstart demo, run as a user runs it: twice, in a real subprocess."""

from __future__ import annotations

import collections
import pathlib
import re
import shlex
import subprocess
import sys

import pytest
import tensorflow as tf
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

DEMO = pathlib.Path(__file__).parents[1] / "demo.py"
README = pathlib.Path(__file__).parents[2] / "README.md"


def run_demo(directory: pathlib.Path, *args: str) -> str:
    """The demo's output, stdout and stderr through one pipe as a terminal shows them."""
    result = subprocess.run(
        [sys.executable, str(DEMO), "--dir", str(directory), "--steps", "60", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout
    return result.stdout


def repeated_lines(output: str) -> list[str]:
    """Non-blank lines printed more than once, whatever their prefix.

    Native log lines' time and thread are ignored, and so is the logger
    prefix of Python log lines (``INFO:tensorflow:`` or ``tensorflow: ``): a
    record printed by two handlers counts twice.
    """
    prefix = re.compile(
        r"^(?:[IWEF]\d{4} [\d:.]+\s+\d+ |(?:[A-Z]+:)?(?:tensorflow|monsession[\w.]*): ?)"
    )
    counts = collections.Counter(
        prefix.sub("", line) for line in output.splitlines() if line.strip()
    )
    return [line for line, count in counts.items() if count > 1]


def line_index(lines: list[str], text: str, last: bool = False) -> int:
    found = [index for index, line in enumerate(lines) if text in line]
    assert found, f"{text!r} not in the output:\n" + "\n".join(lines)
    return found[-1] if last else found[0]


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
    assert "loss = " in first, "the periodic loss log"
    checkpoint = tf.train.latest_checkpoint(str(run_dir))
    assert checkpoint.endswith("model.ckpt-60")
    assert tf.train.load_checkpoint(checkpoint).get_variable_to_shape_map()
    assert {"loss", "global_step/sec"} <= scalar_tags(run_dir)

    second = run_demo(tmp_path, *flags)
    assert "Starting at step 60 (resumed from the checkpoint)" in second
    assert tf.train.latest_checkpoint(str(run_dir)).endswith("model.ckpt-120")


def test_demo_output_is_in_order_without_repeated_lines_and_its_tensorboard_command_works(
    tmp_path,
):
    output = run_demo(tmp_path)
    lines = output.splitlines()
    assert repeated_lines(output) == []
    # Printed lines (stdout) and log lines (stderr) arrive in the order they were written.
    assert line_index(lines, "Starting at step 0") < line_index(lines, "Saving checkpoints for 0")
    assert line_index(lines, "Saving checkpoints for 60", last=True) < line_index(
        lines, "Done at step 60"
    )
    # The last line agrees with the progress bar's last line: same step, same loss.
    bar = lines[line_index(lines, "step 60/60 (100%)", last=True)]
    [done] = [line for line in lines if line.startswith("Done at step 60, last loss ")]
    assert done.endswith(f"last loss {bar.rsplit('loss = ', 1)[1]}."), (bar, done)

    [command] = [line.split(":", 1)[1] for line in lines if line.startswith("TensorBoard:")]
    argv = shlex.split(command)
    assert argv[-2:] == ["--logdir", str(tmp_path)]
    # The command works in the demo's environment: --inspect reads the runs and exits.
    inspected = subprocess.run(
        [*argv, "--inspect"], capture_output=True, text=True, timeout=120, check=False
    )
    assert inspected.returncode == 0, inspected.stdout + inspected.stderr
    assert f"These tags are in {tmp_path / 'eager'}" in inspected.stdout
    assert "global_step/sec" in inspected.stdout


def test_every_demo_flag_is_in_the_readme_with_its_default():
    source = DEMO.read_text("utf-8")
    flags = re.findall(r'add_argument\(\s*"(--[a-z-]+)"', source)
    assert flags == ["--dir", "--steps", "--graph"]
    readme = README.read_text("utf-8")
    for flag in flags:
        [row] = [line for line in readme.splitlines() if line.startswith(f"| `{flag}")]
        default = re.search(rf'"{flag}",(?:[^)]*?)default=([^,)]+)', source, re.S)
        if default:
            assert default.group(1).strip().strip('"') in row, row
