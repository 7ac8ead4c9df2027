"""Helpers for the monsession-hooks-logging tests (no conftest: see the family brief)."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import sys
from collections.abc import Iterator
from typing import Any

import tensorflow as tf

import monsession

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

LOGGER = "monsession.logging"
MODES = ["graph", "eager"]


@dataclasses.dataclass
class Program:
    """A tiny training program: w <- w - 0.1 * dw of w**2, from w = 4.

    `step` is what the loop runs; `loss` is what a hook names to get the loss
    (a tensor name in graph mode, the step's output entry in eager mode);
    `weight` is the variable.
    """

    mode: str
    global_step: Any
    weight: Any
    step: Any
    loss: Any


def graph_program() -> Program:
    global_step = monsession.get_or_create_global_step()
    weight = tf.compat.v1.get_variable("w", initializer=4.0)
    loss = tf.square(weight, name="loss")
    with tf.control_dependencies([loss]):  # The loss of a step is read before its update.
        train = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(
            loss, global_step=global_step
        )
    return Program("graph", global_step, weight, train, "loss")


def eager_program() -> Program:
    global_step = monsession.get_or_create_global_step()
    weight = tf.Variable(4.0, name="w")

    @tf.function(autograph=False)
    def step():
        loss = tf.square(weight)
        weight.assign_sub(0.2 * weight)
        global_step.assign_add(1)
        return {"loss": loss}

    return Program("eager", global_step, weight, step, "loss")


@contextlib.contextmanager
def program_in(mode: str) -> Iterator[Program]:
    """A fresh program: its own graph in graph mode, a fresh global step in eager."""
    if mode == "graph":
        with tf.Graph().as_default():
            yield graph_program()
    else:
        tf.compat.v1.reset_default_graph()
        try:
            yield eager_program()
        finally:
            tf.compat.v1.reset_default_graph()


def expected_losses(n: int) -> list[float]:
    """The loss of steps 0..n-1: w**2 with w = 4 * 0.8**i."""
    return [float(tf.square(tf.constant(4.0) * 0.8**i)) for i in range(n)]


def train(program: Program, hooks: list[Any], steps: int) -> None:
    """Runs `steps` steps under a monsession.MonitoredSession."""
    with monsession.MonitoredSession(hooks=hooks) as session:
        for _ in range(steps):
            session.run(program.step)


def messages(caplog: Any, logger: str = LOGGER) -> list[str]:
    """The messages logged so far on `logger`."""
    return [r.getMessage() for r in caplog.records if r.name == logger]


def capture_info(caplog: Any) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)


class FetchRecorder(monsession.SessionRunHook):
    """Wraps a hook; records, per step, whether it asked for anything and how
    many times it ran the session itself (a host read)."""

    def __init__(self, hook: Any) -> None:
        self.hook = hook
        self.asked: list[bool] = []
        self.session_runs: list[int] = []

    def begin(self) -> None:
        self.hook.begin()

    def after_create_session(self, session: Any, coord: Any) -> None:
        self.hook.after_create_session(session, coord)

    def before_run(self, run_context: Any) -> Any:
        args = self.hook.before_run(run_context)
        self.asked.append(args is not None)
        return args

    def after_run(self, run_context: Any, run_values: Any) -> None:
        counting = _CountingSession(run_context.session)
        context = monsession.SessionRunContext(run_context.original_args, counting)
        self.hook.after_run(context, run_values)
        self.session_runs.append(counting.runs)
        if context.stop_requested:
            run_context.request_stop()

    def end(self, session: Any) -> None:
        self.hook.end(session)


class _CountingSession:
    def __init__(self, session: Any) -> None:
        self._session = session
        self.runs = 0

    def run(self, *args: Any, **kwargs: Any) -> Any:
        self.runs += 1
        return self._session.run(*args, **kwargs)


def subprocess_env() -> dict[str, str]:
    env = dict(os.environ)
    env["TF_CPP_MIN_LOG_LEVEL"] = "3"
    env["PYTHONUNBUFFERED"] = "1"
    env.pop("COLUMNS", None)
    return env


PYTHON = sys.executable
