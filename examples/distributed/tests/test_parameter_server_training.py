"""ParameterServerStrategy with a ClusterCoordinator: step-based checkpoints
hold exactly the steps they count, `LoggingTensorHook` logs the `RemoteValue`
loss, and the end of the session saves the last step.

Each closure takes about 0.3 s, so closures are in flight whenever the
session counts a step: without joining the coordinator before a save, the
checkpoint of step 3 held step 1.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import tensorflow as tf

CHILD = Path(__file__).resolve().parent / "ps_training_child.py"
STEP_KEYS = {
    "owned": "monsession_global_step/.ATTRIBUTES/VARIABLE_VALUE",
    "closure": "step/.ATTRIBUTES/VARIABLE_VALUE",
}


def _saved(prefix: Path, step_key: str) -> tuple[int, float]:
    reader = tf.train.load_checkpoint(str(prefix))
    return int(reader.get_tensor(step_key)), float(
        reader.get_tensor("weight/.ATTRIBUTES/VARIABLE_VALUE")
    )


@pytest.mark.parametrize("advanced_by", ["owned", "closure"])
def test_step_based_saves_and_logging_see_every_step_counted(
    tmp_path: Path, advanced_by: str
) -> None:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    done = subprocess.run(
        [sys.executable, str(CHILD), str(tmp_path), advanced_by],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    # StopAtStepHook(last_step=7) stopped after exactly 7 steps.
    assert report["runs"] == 7 and report["weight"] == 7.0
    # Closure k leaves weight k and returns 2k; the hook logs steps 1, 4, 7.
    assert [line.split(" (")[0] for line in report["logged"]] == [
        "loss = 2.0",
        "loss = 8.0",
        "loss = 14.0",
    ]
    # Saved when the session was created, every 3 steps, and at the end (7).
    numbers = sorted(
        int(index.name[len("model.ckpt-") : -len(".index")])
        for index in tmp_path.glob("model.ckpt-*.index")
    )
    assert numbers == [0, 3, 6, 7]
    for number in numbers:
        assert _saved(tmp_path / f"model.ckpt-{number}", STEP_KEYS[advanced_by]) == (
            number,
            float(number),
        )
    assert tf.train.latest_checkpoint(str(tmp_path)) == str(tmp_path / "model.ckpt-7")
