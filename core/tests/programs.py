"""One small training program in graph mode and in eager mode.

Tests take a `Program` and never branch on the mode themselves: `step` is
what the loop passes to `run()`, `loss` what a hook fetches to get the loss,
`lr` the feed key of the learning rate.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import tensorflow as tf

import monsession


@dataclasses.dataclass
class Program:
    mode: str
    global_step: Any
    weight: Any
    step: Any
    loss: Any
    lr: Any
    checkpoint: Any = None

    def scaffold(self) -> monsession.Scaffold:
        """A scaffold that saves and restores this program's state."""
        return monsession.Scaffold(saver=self.checkpoint)


def graph_program() -> Program:
    global_step = monsession.get_or_create_global_step()
    weight = tf.compat.v1.get_variable("w", initializer=4.0)
    lr = tf.compat.v1.placeholder_with_default(0.1, [], name="lr")
    loss = tf.square(weight, name="loss")
    train = tf.compat.v1.train.GradientDescentOptimizer(lr).minimize(loss, global_step=global_step)
    return Program("graph", global_step, weight, train, loss, lr)


def eager_program() -> Program:
    global_step = monsession.get_or_create_global_step()
    weight = tf.Variable(4.0, name="w")

    default_lr = tf.constant(0.1)

    @tf.function
    def step(lr=default_lr):
        with tf.GradientTape() as tape:
            loss = tf.square(weight)
        weight.assign_sub(lr * tape.gradient(loss, weight))
        global_step.assign_add(1)
        return {"loss": loss}

    checkpoint = tf.train.Checkpoint(weight=weight, step=global_step)
    return Program("eager", global_step, weight, step, "loss", "lr", checkpoint)


def make_program(mode: str) -> Program:
    return graph_program() if mode == "graph" else eager_program()
