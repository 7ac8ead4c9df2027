"""Shared helpers of the debug family's tests: a training program that diverges.

The program minimizes ``w ** 2`` from ``w = 4`` with plain gradient descent.
With a learning rate of 50 each update multiplies ``w`` by -99, so the loss
overflows to Inf after a few steps and becomes NaN a few steps later. The
same program exists in graph mode and in eager mode; `first_bad_step` gives
the step at which each kind of bad loss first appears, from a NumPy replay.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from typing import Any

import numpy as np
import tensorflow as tf

import monsession
import monsession.testing

DIVERGING_LR = 50.0
STABLE_LR = 0.1
START_W = 4.0


@dataclasses.dataclass
class Program:
    mode: str
    global_step: Any
    step: Any
    loss: Any


def graph_program(lr: float = DIVERGING_LR) -> Program:
    """Builds the program in the default graph (call under a fresh tf.Graph)."""
    global_step = monsession.get_or_create_global_step()
    weight = tf.compat.v1.get_variable("w", initializer=START_W)
    loss = tf.square(weight, name="loss")
    # Like TensorFlow's hook tests: the step reads the global step (the shared
    # read tensor that TensorFlow's hooks and monsession's step service fetch)
    # before it increments it, so both see the same, stable steps.
    read = monsession.testing.global_step_read_tensor()
    with tf.control_dependencies([read]):
        train = tf.compat.v1.train.GradientDescentOptimizer(lr).minimize(
            loss, global_step=global_step
        )
    return Program("graph", global_step, train, loss)


def eager_program(lr: float = DIVERGING_LR) -> Program:
    """Builds the program in eager mode, with a fresh global step."""
    tf.compat.v1.reset_default_graph()
    global_step = monsession.get_or_create_global_step()
    weight = tf.Variable(START_W, name="w")

    @tf.function
    def train_step():
        with tf.GradientTape() as tape:
            loss = tf.square(weight)
        weight.assign_sub(lr * tape.gradient(loss, weight))
        global_step.assign_add(1)
        return {"loss": loss}

    return Program("eager", global_step, train_step, "loss")


@contextlib.contextmanager
def mode_context(mode: str) -> Iterator[None]:
    """A fresh graph (graph mode) or a fresh default graph for the global step (eager)."""
    if mode == "graph":
        with tf.Graph().as_default():
            yield
    else:
        tf.compat.v1.reset_default_graph()
        yield


def make_program(mode: str, lr: float = DIVERGING_LR) -> Program:
    """The program in `mode`; call inside `mode_context(mode)`."""
    return graph_program(lr) if mode == "graph" else eager_program(lr)


def first_bad_step(kind: str, lr: float = DIVERGING_LR, max_steps: int = 1000) -> int:
    """The 1-based step whose loss is first NaN (`kind="nan"`) or non-finite."""
    weight = np.float32(START_W)
    lr32 = np.float32(lr)
    with np.errstate(over="ignore", invalid="ignore"):
        for step in range(1, max_steps + 1):
            loss = weight * weight
            if np.isnan(loss) or (kind == "inf" and np.isinf(loss)):
                return step
            weight = weight - lr32 * (np.float32(2) * weight)
    raise AssertionError(f"the program does not diverge within {max_steps} steps")


def host_reads_per_step(hooks: list[Any], step: Any, steps: int) -> list[int]:
    """Eager mode: runs `step` `steps` times under a monsession.MonitoredSession
    and returns, per run, how many eager tensors were copied to the host
    during it (the hooks' before_run/after_run included; creating and closing
    the session are not counted).
    """
    counts = []
    with monsession.MonitoredSession(hooks=hooks) as sess:
        for _ in range(steps):
            with monsession.testing.count_host_reads() as reads:
                sess.run(step)
            counts.append(reads.count)
    return counts


def run_until_stopped(sess: Any, step: Any, max_steps: int = 200) -> int:
    """Runs `step` until the session stops; returns how many runs were made."""
    runs = 0
    while not sess.should_stop() and runs < max_steps:
        sess.run(step)
        runs += 1
    return runs


class RequestRecorder(monsession.SessionRunHook):
    """Forwards every call to `hook` and records what its before_run returned."""

    def __init__(self, hook: Any) -> None:
        self.hook = hook
        self.requests: list[Any] = []

    def begin(self) -> None:
        self.hook.begin()

    def after_create_session(self, session: Any, coord: Any) -> None:
        self.hook.after_create_session(session, coord)

    def before_run(self, run_context: Any) -> Any:
        request = self.hook.before_run(run_context)
        self.requests.append(request)
        return request

    def after_run(self, run_context: Any, run_values: Any) -> None:
        self.hook.after_run(run_context, run_values)

    def end(self, session: Any) -> None:
        self.hook.end(session)
