"""Shared helpers of the summary family's tests: programs and event-file readers.

Event files are read back with TensorBoard's own readers: the raw loader for
exact (step, tag, value) comparisons and session logs, the
`EventAccumulator` for "which tags at which steps".
"""

from __future__ import annotations

import dataclasses
import glob
import os
from typing import Any

import tensorflow as tf
from tensorboard.backend.event_processing import event_accumulator, event_file_loader
from tensorboard.compat.proto import event_pb2
from tensorboard.util import tensor_util

import monsession
import monsession.testing


def event_files(logdir: Any) -> list[str]:
    return sorted(glob.glob(os.path.join(os.fspath(logdir), "events.*")))


def file_events(path: str) -> list[Any]:
    """The events of one event file, in order."""
    return list(event_file_loader.LegacyEventFileLoader(path).Load())


def raw_events(logdir: Any) -> list[Any]:
    """Every event of every event file in `logdir`, in file order."""
    return [event for path in event_files(logdir) for event in file_events(path)]


def _value_of(value: Any) -> float:
    if value.HasField("simple_value"):
        return round(float(value.simple_value), 5)
    return round(float(tensor_util.make_ndarray(value.tensor)), 5)


def summaries(logdir: Any) -> list[tuple[int, str, float]]:
    """The (step, tag, value) of every scalar summary, in file order."""
    return [
        (int(event.step), value.tag, _value_of(value))
        for event in raw_events(logdir)
        if event.HasField("summary")
        for value in event.summary.value
    ]


def session_start_steps(logdir: Any) -> list[int]:
    start = event_pb2.SessionLog.START
    return [
        int(event.step)
        for event in raw_events(logdir)
        if event.HasField("session_log") and event.session_log.status == start
    ]


def tag_steps(logdir: Any) -> dict[str, list[int]]:
    """Steps per tag as TensorBoard's `EventAccumulator` shows them (v1 and v2 scalars)."""
    accumulator = event_accumulator.EventAccumulator(
        os.fspath(logdir),
        size_guidance={event_accumulator.SCALARS: 0, event_accumulator.TENSORS: 0},
    )
    accumulator.Reload()
    tags = accumulator.Tags()
    steps = {tag: [e.step for e in accumulator.Scalars(tag)] for tag in tags["scalars"]}
    steps.update({tag: [e.step for e in accumulator.Tensors(tag)] for tag in tags["tensors"]})
    return steps


def steps_of(logdir: Any, tag: str) -> list[int]:
    return [step for step, name, _ in summaries(logdir) if name == tag]


class FakeClock:
    """A `time.time` replacement the test advances by hand."""

    def __init__(self, now: float = 1484695987.2) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, secs: float) -> None:
        self.now += secs


def increment_after_read(global_step: Any, increment: int = 1) -> Any:
    """Increments `global_step` after the read tensor, as TensorFlow's own hook tests do.

    The read tensor fetched with the step then holds the step's starting
    value deterministically; `minimize(global_step=...)` leaves that to a
    race between the two ops.
    """
    with tf.control_dependencies([monsession.testing.global_step_read_tensor()]):
        return global_step.assign_add(increment)


@dataclasses.dataclass
class GraphProgram:
    """A graph training program with two summaries.

    `fetches` counts how often the summary op was evaluated (an `assign_add`
    inside it), so its value at the k-th written step is k only when the op
    is fetched on trigger steps alone.
    """

    global_step: Any
    train_op: Any
    summary_op: Any
    loss_summary: Any
    fetches_summary: Any


def graph_program() -> GraphProgram:
    """Builds the program in the default graph (the caller opens a fresh one)."""
    global_step = tf.compat.v1.train.get_or_create_global_step()
    weight = tf.compat.v1.get_variable("w", initializer=4.0)
    counter = tf.compat.v1.get_variable("fetch_counter", initializer=0.0, trainable=False)
    loss = tf.square(weight)
    # The loss (and its summary) is computed before the update, in every
    # run; unordered, TensorFlow may read the weight before or after it.
    with tf.control_dependencies([loss]):
        update = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss)
    with tf.control_dependencies([update]):
        train_op = increment_after_read(global_step)
    loss_summary = tf.compat.v1.summary.scalar("loss", loss)
    fetches_summary = tf.compat.v1.summary.scalar("fetches", tf.compat.v1.assign_add(counter, 1.0))
    summary_op = tf.compat.v1.summary.merge_all()
    return GraphProgram(global_step, train_op, summary_op, loss_summary, fetches_summary)


@dataclasses.dataclass
class EagerProgram:
    """An eager program whose `tf.function` step writes `loss` with `step=global_step`.

    `traces` counts how often the step was traced (a Python side effect).
    """

    global_step: Any
    weight: Any
    step: Any
    traces: list[int]
    checkpoint: Any

    def scaffold(self) -> monsession.Scaffold:
        return monsession.Scaffold(saver=self.checkpoint)


def eager_program(*, default_step: bool = False) -> EagerProgram:
    """A fresh eager program (resets the default graph for a fresh global step).

    Args:
      default_step: Also write `loss_default_step` without `step=`, relying on
        the default step the hook sets.
    """
    tf.compat.v1.reset_default_graph()
    global_step = monsession.get_or_create_global_step()
    weight = tf.Variable(4.0, name="w")
    traces = [0]

    @tf.function
    def step():
        traces[0] += 1
        loss = tf.square(weight)
        weight.assign_sub(0.2 * weight)
        global_step.assign_add(1)
        tf.summary.scalar("loss", loss, step=global_step)
        if default_step:
            tf.summary.scalar("loss_default_step", loss)
        return {"loss": loss}

    checkpoint = tf.train.Checkpoint(weight=weight, step=global_step)
    return EagerProgram(global_step, weight, step, traces, checkpoint)
