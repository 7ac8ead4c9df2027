"""Shared helpers of the earlystop tests: a training run whose loss plateaus.

The program minimizes ``max(w ** 2, 1)`` from ``w = 5`` by gradient descent
with a learning rate of 0.1: each step multiplies ``w`` by 0.8 until ``w ** 2``
drops below 1, after which the gradient is 0 and the loss stays at exactly
1.0. The loss of global step k (read before that step's update) is::

    step  1     2     3      4     5     6     7     8      9    10 ...
    loss  25    16    10.24  6.55  4.19  2.68  1.72  1.0995 1.0  1.0 ...

so with ``every_n_steps=2`` the last improvement is read at step 10 and,
with ``patience=3``, the hook stops training at step 16. ``score`` is the
negated loss (for ``mode="max"``).

Run as a script, it trains the graph-mode program under
`MonitoredTrainingSession` (up to step 20) and prints the final global step
as JSON: the plugin tests use it in fresh processes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

START_W = 5.0
LEARNING_RATE = 0.1
# every_n_steps=2, patience=3: evaluations at 2, 4, ..., last improvement at
# 10 (loss 1.0), then 12, 14, 16 without one.
STOP_STEP = 16
BEST = 1.0
BEST_STEP = 10
SAFETY_LAST_STEP = 40

PLUGIN_ENV = (
    "MONSESSION_DISABLE_PLUGIN_AUTOLOAD",
    "MONSESSION_DISABLED_PLUGINS",
    "MONSESSION_STRICT_PLUGINS",
)
EARLYSTOP_ENV = (
    "MONSESSION_EARLYSTOP_MONITOR",
    "MONSESSION_EARLYSTOP_PATIENCE",
    "MONSESSION_EARLYSTOP_EVERY_N_STEPS",
    "MONSESSION_EARLYSTOP_MIN_DELTA",
    "MONSESSION_EARLYSTOP_MODE",
)
# Turns the earlystop default hook on with the settings above.
EARLYSTOP_ON = {
    "MONSESSION_EARLYSTOP_MONITOR": "loss",
    "MONSESSION_EARLYSTOP_PATIENCE": "3",
    "MONSESSION_EARLYSTOP_EVERY_N_STEPS": "2",
}


@dataclasses.dataclass
class Program:
    """The plateau program in one mode.

    `step` is what the loop passes to `run()`. `loss`/`score` are what a hook
    monitors by default (tensors in graph mode, entry names in eager mode);
    `score_variable` holds the last score in both modes.
    """

    mode: str
    global_step: Any
    step: Any
    loss: Any
    score: Any
    score_variable: Any


def graph_program() -> Program:
    """Builds the program in the default graph (call under a fresh tf.Graph)."""
    import tensorflow as tf

    import monsession

    global_step = monsession.get_or_create_global_step()
    weight = tf.compat.v1.get_variable("w", initializer=START_W)
    loss = tf.maximum(tf.square(weight), 1.0, name="loss")
    score = tf.negative(loss, name="score")
    score_variable = tf.compat.v1.get_variable("last_score", initializer=0.0)
    optimizer = tf.compat.v1.train.GradientDescentOptimizer(LEARNING_RATE)
    train = optimizer.minimize(loss, global_step=global_step)
    with tf.control_dependencies([train]):
        step = score_variable.assign(score)
    return Program("graph", global_step, step, loss, score, score_variable)


def eager_program() -> Program:
    """Builds the program in eager mode, with a fresh global step."""
    import tensorflow as tf

    import monsession

    global_step = monsession.get_or_create_global_step()
    weight = tf.Variable(START_W, name="w")
    score_variable = tf.Variable(0.0, name="last_score")

    @tf.function
    def train_step() -> dict[str, Any]:
        with tf.GradientTape() as tape:
            loss = tf.maximum(tf.square(weight), 1.0)
        weight.assign_sub(LEARNING_RATE * tape.gradient(loss, weight))
        global_step.assign_add(1)
        score_variable.assign(-loss)
        return {"loss": loss, "score": -loss}

    return Program("eager", global_step, train_step, "loss", "score", score_variable)


@contextlib.contextmanager
def mode_context(mode: str) -> Iterator[None]:
    """A fresh graph (graph mode), or a fresh default graph for the global step (eager)."""
    import tensorflow as tf

    if mode == "graph":
        with tf.Graph().as_default():
            yield
    else:
        tf.compat.v1.reset_default_graph()
        yield
        tf.compat.v1.reset_default_graph()


def make_program(mode: str) -> Program:
    """The program in `mode`; call inside `mode_context(mode)`."""
    return graph_program() if mode == "graph" else eager_program()


def train(program: Program, hooks: list[Any], **kwargs: Any) -> int:
    """Trains under `MonitoredTrainingSession` until it stops; returns the final global step.

    A `StopAtStepHook` at `SAFETY_LAST_STEP` ends a run that does not stop early.
    """
    import monsession

    final = monsession.FinalOpsHook(program.global_step)
    hooks = [*hooks, monsession.StopAtStepHook(last_step=SAFETY_LAST_STEP), final]
    with monsession.MonitoredTrainingSession(
        hooks=hooks, log_step_count_steps=None, **kwargs
    ) as sess:
        while not sess.should_stop():
            sess.run(program.step)
    return int(final.final_ops_values)


def run_python(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Runs this interpreter with `args` in a fresh process; see `run_process`."""
    return run_process(sys.executable, *args, env=env)


def start_process(*argv: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """Starts `argv` with no plugin switch and no MONSESSION_EARLYSTOP_* unless `env` sets them."""
    full_env = {
        key: value
        for key, value in os.environ.items()
        if key not in PLUGIN_ENV and key not in EARLYSTOP_ENV
    }
    full_env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    full_env.update(env or {})
    return subprocess.Popen(
        list(argv), env=full_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def finish_process(process: subprocess.Popen[str]) -> subprocess.CompletedProcess[str]:
    """Waits for a process from `start_process`; returns its exit status and output."""
    try:
        stdout, stderr = process.communicate(timeout=180)
    except subprocess.TimeoutExpired:
        process.kill()
        raise
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def run_process(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Runs `argv` to completion; see `start_process`."""
    return finish_process(start_process(*argv, env=env))


def main() -> None:
    import tensorflow as tf

    with tf.Graph().as_default():
        program = graph_program()
        print(json.dumps({"global_step": train(program, [])}))


if __name__ == "__main__":
    main()
