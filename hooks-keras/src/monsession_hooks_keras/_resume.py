"""Which checkpoint `model.fit` resumes from, for the hooks' saved state."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from typing import Any

import tensorflow as tf

logger = logging.getLogger("monsession")


def checkpoint_directory(hooks: Iterable[Any]) -> str | None:
    """The `checkpoint_dir` of the first hook that has one (a `CheckpointSaverHook`)."""
    for hook in hooks:
        directory = getattr(hook, "checkpoint_dir", None)
        if isinstance(directory, (str, os.PathLike)):
            return os.fspath(directory)
    return None


def checkpoint_of_step(directory: str, step: int, owner: str) -> str | None:
    """The newest checkpoint of `directory` numbered `step` (``<prefix>-<step>``), if any."""
    state = tf.train.get_checkpoint_state(directory)
    paths = [] if state is None else list(state.all_model_checkpoint_paths)
    if state is not None and state.model_checkpoint_path:
        paths.append(state.model_checkpoint_path)
    for path in reversed(paths):
        if path.rsplit("-", 1)[-1] == str(step):
            return str(path)
    logger.info(
        "%s: training resumes at step %d, but %s has no checkpoint of that step; the "
        "hooks start fresh.",
        owner,
        step,
        directory,
    )
    return None
