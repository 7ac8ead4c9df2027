"""Helpers for the monsession-hooks-logging tests (no conftest: see the family brief)."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any

import tensorflow as tf

import monsession
import monsession.testing

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

LOGGER = "tensorflow"
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


def host_reads_per_step(program: Program, hooks: list[Any], steps: int) -> list[int]:
    """Eager mode: runs `steps` steps under a monsession.MonitoredSession and
    returns, per step, how many eager tensors were copied to the host during
    its `run()` (the hooks' before_run/after_run included; creating and
    closing the session are not counted).
    """
    counts = []
    with monsession.MonitoredSession(hooks=hooks) as session:
        for _ in range(steps):
            with monsession.testing.count_host_reads() as reads:
                session.run(program.step)
            counts.append(reads.count)
    return counts


_TENSORFLOW_DIR = os.path.dirname(tf.__file__)


def messages(caplog: Any, logger: str = LOGGER) -> list[str]:
    """The messages logged so far on `logger` by hooks, not by TensorFlow itself.

    TensorFlow's session machinery logs on the same logger ("Running
    local_init_op."); those records come from TensorFlow's files other than
    its hooks' module.
    """
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == logger and not _from_tensorflow_session(r.pathname)
    ]


def _from_tensorflow_session(path: str) -> bool:
    return path.startswith(_TENSORFLOW_DIR) and not path.endswith("basic_session_run_hooks.py")


def capture_info(caplog: Any) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)


class FetchRecorder(monsession.SessionRunHook):
    """Wraps a hook; records, per step, whether it asked for anything, how many
    times it ran the session itself, and (with `reads`) how many global-step
    reads happened while its `after_run` ran (the step service reads lazily).

    Args:
      hook: The hook to drive.
      reads: A zero-argument function returning the number of global-step
        reads so far (`StepReadCounter.reads`), or `None`.
    """

    def __init__(self, hook: Any, reads: Callable[[], int] | None = None) -> None:
        self.hook = hook
        self.asked: list[bool] = []
        self.session_runs: list[int] = []
        self.step_reads: list[int] = []
        self._reads = reads or (lambda: 0)

    def begin(self) -> None:
        self.hook.begin()

    def after_create_session(self, session: Any, coord: Any) -> None:
        self.hook.after_create_session(session, coord)

    def before_run(self, run_context: Any) -> Any:
        args = self.hook.before_run(run_context)
        self.asked.append(args is not None)
        return args

    def after_run(self, run_context: Any, run_values: Any) -> None:
        context = _CountingContext(run_context)
        reads = self._reads()
        self.hook.after_run(context, run_values)
        self.step_reads.append(self._reads() - reads)
        self.session_runs.append(context.session.runs)

    def end(self, session: Any) -> None:
        self.hook.end(session)


class _CountingContext:
    """A run context (with its step service) whose `session` counts `run()` calls."""

    def __init__(self, context: monsession.SessionRunContext) -> None:
        self._context = context
        self.session = _CountingSession(context.session)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._context, name)


class _CountingSession:
    def __init__(self, session: Any) -> None:
        self._session = session
        self.runs = 0

    def run(self, *args: Any, **kwargs: Any) -> Any:
        self.runs += 1
        return self._session.run(*args, **kwargs)


class StepReadCounter(monsession.SessionCreator):
    """Graph mode: creates a session that counts the runs reading the global step alone.

    Steps and hook fetches run as one merged structure and are not counted;
    a run whose only fetch is the global step (variable or read tensor) is.
    """

    def __init__(self) -> None:
        self.count = 0

    def reads(self) -> int:
        return self.count

    def create_session(self) -> Any:
        counter = self

        class CountingSession(tf.compat.v1.Session):
            def run(self, fetches: Any, *args: Any, **kwargs: Any) -> Any:
                counter._see(fetches)
                return super().run(fetches, *args, **kwargs)

            def make_callable(self, fetches: Any, *args: Any, **kwargs: Any) -> Any:
                made = super().make_callable(fetches, *args, **kwargs)

                def call(*call_args: Any, **call_kwargs: Any) -> Any:
                    counter._see(fetches)
                    return made(*call_args, **call_kwargs)

                return call

        sess = CountingSession()
        sess.run(tf.compat.v1.global_variables_initializer())
        return sess

    def _see(self, fetches: Any) -> None:
        global_step = monsession.get_global_step()
        name = getattr(fetches, "name", None)
        if isinstance(name, str) and name.startswith(global_step.op.name):
            self.count += 1


def subprocess_env() -> dict[str, str]:
    env = dict(os.environ)
    env["TF_CPP_MIN_LOG_LEVEL"] = "3"
    env["PYTHONUNBUFFERED"] = "1"
    env.pop("COLUMNS", None)
    return env


PYTHON = sys.executable
