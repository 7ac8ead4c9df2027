"""Checkpoints read back as a user reads them: `tf.train.load_checkpoint`, the state file."""

from __future__ import annotations

import os
import re
from typing import Any

import tensorflow as tf

_INDEX = re.compile(r"^(.+-(\d+))\.index$")


def weights(prefix: str) -> list[float]:
    """The model's weights in the checkpoint at `prefix`: its float32 scalars, but the
    optimizer's (the global step, the count and the data position are integers)."""
    reader = tf.train.load_checkpoint(prefix)
    shapes = reader.get_variable_to_shape_map()
    dtypes = reader.get_variable_to_dtype_map()
    return [
        round(float(reader.get_tensor(key)), 4)
        for key in sorted(shapes)
        if dtypes[key] == tf.float32 and shapes[key] == [] and "optimizer" not in key
    ]


def _step(path: str) -> int:
    return int(path.rsplit("-", 1)[1])


def on_disk(directory: str) -> dict[str, Any]:
    """Every checkpoint left in `directory`, in step order: its step and weights (each read
    back, so its data files too); the steps the state file lists, and the latest."""
    names = sorted(os.listdir(directory)) if os.path.isdir(directory) else []
    found = sorted(
        [int(m[2]), weights(os.path.join(directory, m[1]))]
        for name in names
        if (m := _INDEX.match(name))
    )
    state = tf.train.get_checkpoint_state(directory)
    listed = [] if state is None else [_step(path) for path in state.all_model_checkpoint_paths]
    latest = None if state is None else _step(state.model_checkpoint_path)
    return {"files": found, "listed": listed, "latest": latest}
