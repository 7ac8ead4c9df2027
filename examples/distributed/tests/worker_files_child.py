"""One task of a job whose every worker runs the user's `ProfilerHook` and `SummarySaverHook`.

The cluster and this task come from ``TF_CONFIG``. Every worker is given
the same ``--profile-dir`` and its own ``--summary-dir``:

* ``--mode multiworker``: eager, `MultiWorkerMirroredStrategy`; the session
  is created in the strategy's scope and stops at ``--steps``.
* ``--mode cluster``: graph mode, TensorFlow 1 between-graph replication
  (a ``ps`` task holds the variables; each worker task runs
  ``--steps`` steps of its own through
  ``MonitoredTrainingSession(master=server.target, is_chief=task == 0)``).

Each worker writes a JSON report to ``--report``: its pid and host, and
what the hooks said they wrote.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import socket
import time
from typing import Any

import tensorflow as tf

import monsession as ms
from monsession.hooks import ProfilerHook, SummarySaverHook

PROFILE_STEPS = 5  # Eager: traced at step 5, once in 8 steps.


def _hooks(args: argparse.Namespace, summary: dict[str, Any]) -> list[Any]:
    return [
        ProfilerHook(save_steps=PROFILE_STEPS, output_dir=args.profile_dir),
        SummarySaverHook(save_steps=2, output_dir=args.summary_dir, **summary),
    ]


def run_multiworker(args: argparse.Namespace) -> None:
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    with strategy.scope():
        global_step = ms.get_or_create_global_step()
        weight = tf.Variable(0.0, aggregation=tf.VariableAggregation.MEAN)

    def replica_step() -> Any:
        with tf.GradientTape() as tape:
            loss = tf.square(weight - 3.0)
        weight.assign_sub(0.1 * tape.gradient(loss, weight))
        return loss

    @tf.function
    def train_step() -> dict[str, Any]:
        loss = strategy.reduce(tf.distribute.ReduceOp.MEAN, strategy.run(replica_step), axis=None)
        global_step.assign_add(1)
        # In the cross-replica context: recorded on every worker that has a writer.
        tf.summary.scalar("loss", loss, step=global_step)
        return {"loss": loss}

    hooks = [ms.StopAtStepHook(last_step=args.steps), *_hooks(args, {})]
    with strategy.scope(), ms.MonitoredTrainingSession(hooks=hooks) as sess:
        while not sess.should_stop():
            sess.run(train_step)


def run_cluster(args: argparse.Namespace) -> None:
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    task_type, task_id = resolver.task_type, resolver.task_id
    if task_type == "ps":
        tf.distribute.Server(resolver.cluster_spec(), job_name="ps", task_index=task_id).join()
        return
    tf.compat.v1.disable_eager_execution()
    # Each worker talks to the parameter server and to itself only.
    config = tf.compat.v1.ConfigProto(device_filters=["/job:ps", f"/job:worker/task:{task_id}"])
    server = tf.distribute.Server(
        resolver.cluster_spec(), job_name="worker", task_index=task_id, config=config
    )
    setter = tf.compat.v1.train.replica_device_setter(
        worker_device=f"/job:worker/task:{task_id}", cluster=resolver.cluster_spec()
    )
    with tf.compat.v1.device(setter):
        global_step = ms.get_or_create_global_step()
        weight = tf.compat.v1.get_variable("weight", [], initializer=tf.zeros_initializer())
        loss = tf.square(weight - 3.0)
        summary_op = tf.compat.v1.summary.scalar("loss", loss)
        train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(
            loss, global_step=global_step
        )
    hooks = _hooks(args, {"summary_op": summary_op})
    with ms.MonitoredTrainingSession(
        master=server.target, is_chief=task_id == 0, hooks=hooks, config=config
    ) as sess:
        for _ in range(args.steps):  # Its own steps: each worker traces at least once.
            sess.run(train_op)
            time.sleep(0.02)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mode", choices=["multiworker", "cluster"], required=True)
    parser.add_argument("--profile-dir", required=True)
    parser.add_argument("--summary-dir", required=True)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--report", required=True)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    (run_multiworker if args.mode == "multiworker" else run_cluster)(args)
    with open(args.report, "w") as file:
        json.dump({"pid": os.getpid(), "host": socket.gethostname()}, file)


if __name__ == "__main__":
    main()
