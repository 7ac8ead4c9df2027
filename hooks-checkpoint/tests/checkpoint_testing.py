"""Helpers shared by the checkpoint family's tests (no fixtures: no conftest.py)."""

from __future__ import annotations

import contextlib
import glob
import os
from collections.abc import Iterator
from typing import Any

import tensorflow as tf

import monsession
from monsession_hooks_checkpoint import CheckpointSaverListener

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# Keeps the default hooks of the other families (if installed) out of tests
# that count files or events.
ONLY_CHECKPOINTS = {"save_summaries_steps": None, "log_step_count_steps": None}


class CountingListener(CheckpointSaverListener):
    """Counts its calls and records the steps it saw, like TF's test listener."""

    def __init__(self) -> None:
        self.counts = {"begin": 0, "before_save": 0, "after_save": 0, "end": 0}
        self.saved_steps: list[int] = []
        self.ask_for_stop = False

    def begin(self) -> None:
        self.counts["begin"] += 1

    def before_save(self, session: Any, global_step_value: int) -> None:
        self.counts["before_save"] += 1

    def after_save(self, session: Any, global_step_value: int) -> bool:
        self.counts["after_save"] += 1
        self.saved_steps.append(int(global_step_value))
        return self.ask_for_stop

    def end(self, session: Any, global_step_value: int) -> None:
        self.counts["end"] += 1


@contextlib.contextmanager
def fresh_graph() -> Iterator[tf.Graph]:
    with tf.Graph().as_default() as graph:
        yield graph


@contextlib.contextmanager
def fresh_eager() -> Iterator[None]:
    tf.compat.v1.reset_default_graph()  # A fresh global step.
    yield
    tf.compat.v1.reset_default_graph()


def counter_program() -> tuple[Any, Any, Any]:
    """Graph mode: (global_step, train_op, weight): each step adds 1 to both."""
    global_step = monsession.get_or_create_global_step()
    weight = tf.compat.v1.get_variable("w", initializer=10.0)
    with tf.control_dependencies([weight.assign_add(1.0)]):
        train_op = tf.compat.v1.assign_add(global_step, 1)
    return global_step, train_op, weight


def checkpoint_steps(directory: str, basename: str = "model.ckpt") -> list[int]:
    """The steps of the checkpoints whose index file exists in `directory`."""
    prefix = os.path.join(directory, basename + "-")
    steps = [int(path[len(prefix) : -len(".index")]) for path in glob.glob(prefix + "*.index")]
    return sorted(steps)


def load_step(checkpoint: str, name: str = "global_step") -> int:
    """The global step stored in a checkpoint (file prefix or directory)."""
    return int(tf.train.load_checkpoint(checkpoint).get_tensor(name))


def meta_files(directory: str) -> list[str]:
    return sorted(glob.glob(os.path.join(directory, "*.meta")))


def checkpoint_session_logs(directory: str) -> list[tuple[int, str]]:
    """(step, checkpoint_path) of the CHECKPOINT session logs in the event files."""
    tf.compat.v1.summary.FileWriterCache.get(directory).flush()
    found = []
    for path in sorted(glob.glob(os.path.join(directory, "events.out.tfevents.*"))):
        for event in tf.compat.v1.train.summary_iterator(path):
            if (
                event.HasField("session_log")
                and event.session_log.status == tf.compat.v1.SessionLog.CHECKPOINT
            ):
                found.append((int(event.step), event.session_log.checkpoint_path))
    return found


def meta_graph_defs(directory: str) -> list[Any]:
    """The `MetaGraphDef`s in the event files of `directory`."""
    tf.compat.v1.summary.FileWriterCache.get(directory).flush()
    found = []
    for path in sorted(glob.glob(os.path.join(directory, "events.out.tfevents.*"))):
        for event in tf.compat.v1.train.summary_iterator(path):
            if event.HasField("meta_graph_def"):
                meta_graph_def = tf.compat.v1.MetaGraphDef()
                meta_graph_def.ParseFromString(event.meta_graph_def)
                found.append(meta_graph_def)
    return found
