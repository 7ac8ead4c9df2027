"""Child of the summaries-elsewhere test: a public ResNet program's session setup.

Usage: python summaries_elsewhere_child.py ROOT LAST_STEP. Trains to global
step LAST_STEP (resuming from what ROOT holds) three times over: graph mode
under `tf.compat.v1.train` into ROOT/tf, graph mode under monsession into
ROOT/ms-graph, eager mode under monsession into ROOT/ms-eager. Each uses
`MonitoredTrainingSession(checkpoint_dir=<root>/ckpt, save_summaries_steps=0,
chief_only_hooks=[SummarySaverHook(output_dir=<root>/summaries)])`, as the
program does: its summaries go to another directory than the checkpoints.
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf

import monsession

_SESSION = {"save_summaries_steps": 0, "log_step_count_steps": 2, "save_checkpoint_steps": 3}


def _graph(train, root: str, last_step: int) -> None:
    with tf.Graph().as_default():
        global_step = tf.compat.v1.train.get_or_create_global_step()
        weight = tf.compat.v1.get_variable("w", initializer=1.0)
        loss = tf.square(weight)
        tf.compat.v1.summary.scalar("loss", loss)
        optimizer = tf.compat.v1.train.GradientDescentOptimizer(0.1)
        train_op = optimizer.minimize(loss, global_step=global_step)
        saver = train.SummarySaverHook(
            save_steps=2,
            output_dir=os.path.join(root, "summaries"),
            summary_op=tf.compat.v1.summary.merge_all(),
        )
        with train.MonitoredTrainingSession(
            checkpoint_dir=os.path.join(root, "ckpt"),
            chief_only_hooks=[saver],
            hooks=[train.StopAtStepHook(last_step=last_step)],
            **_SESSION,
        ) as session:
            while not session.should_stop():
                session.run(train_op)


def _eager(root: str, last_step: int) -> None:
    global_step = monsession.get_or_create_global_step()
    weight = tf.Variable(1.0)

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            loss = tf.square(weight)
        weight.assign_sub(0.1 * tape.gradient(loss, weight))
        global_step.assign_add(1)
        tf.summary.scalar("loss", loss, step=global_step)
        return {"loss": loss}

    saver = monsession.SummarySaverHook(save_steps=2, output_dir=os.path.join(root, "summaries"))
    scaffold = monsession.Scaffold(saver=tf.train.Checkpoint(w=weight, step=global_step))
    with monsession.MonitoredTrainingSession(
        checkpoint_dir=os.path.join(root, "ckpt"),
        scaffold=scaffold,
        chief_only_hooks=[saver],
        hooks=[monsession.StopAtStepHook(last_step=last_step)],
        **_SESSION,
    ) as session:
        while not session.should_stop():
            session.run(step)


def main(root: str, last_step: int) -> None:
    _graph(tf.compat.v1.train, os.path.join(root, "tf"), last_step)
    tf.compat.v1.summary.FileWriterCache.clear()
    _graph(monsession, os.path.join(root, "ms-graph"), last_step)
    tf.compat.v1.summary.FileWriterCache.clear()
    _eager(os.path.join(root, "ms-eager"), last_step)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
