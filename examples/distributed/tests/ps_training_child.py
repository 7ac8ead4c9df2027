"""Child of test_parameter_server.py: a ParameterServerStrategy training job.

A worker and a parameter server (`tf.distribute.Server`s of this process) and
the coordinator, running `MonitoredTrainingSession` with step-based
checkpoints, `LoggingTensorHook` on the `RemoteValue` loss and
`StopAtStepHook`. Each step schedules one closure that adds 1 to the weight
(and, with ``closure``, to the global step). The closures are slow enough to
be in flight when the session counts the step. Prints one JSON line.

Usage: ``ps_training_child.py CHECKPOINT_DIR owned|closure``: who advances
the global step, the session (the program creates none) or the closure.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import sys

import tensorflow as tf

import monsession
from monsession.hooks import LoggingTensorHook

LAST_STEP = 7


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if message.startswith("loss = "):
            self.lines.append(message)


def main(checkpoint_dir: str, advanced_by: str) -> None:
    cluster = tf.train.ClusterSpec(
        {"worker": [f"127.0.0.1:{_free_port()}"], "ps": [f"127.0.0.1:{_free_port()}"]}
    )
    servers = [  # noqa: F841 (kept alive until the end)
        tf.distribute.Server(cluster, job_name=job, task_index=0, protocol="grpc")
        for job in ("worker", "ps")
    ]
    resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(cluster, rpc_layer="grpc")
    strategy = tf.distribute.experimental.ParameterServerStrategy(resolver)
    coordinator = tf.distribute.experimental.coordinator.ClusterCoordinator(strategy)
    with strategy.scope():
        weight = tf.Variable(0.0)
        checkpoint = tf.train.Checkpoint(weight=weight)
        global_step = None
        if advanced_by == "closure":
            global_step = monsession.get_or_create_global_step()
            checkpoint.step = global_step

    @tf.function
    def worker_fn():
        # About 0.3 s of work before the update: the closure is still in
        # flight when the session counts its step and a hook asks to save.
        busy = tf.constant(0.0)
        for _ in tf.range(150):
            square = tf.random.uniform([300, 300])
            busy += tf.reduce_sum(tf.linalg.matmul(square, square))
        with tf.control_dependencies([busy]):
            new = weight.assign_add(1.0)
        if global_step is not None:
            with tf.control_dependencies([new]):
                global_step.assign_add(1)
        return new * 2.0

    def step():
        return {"loss": coordinator.schedule(worker_fn)}

    lines = _Lines()
    logging.getLogger().addHandler(lines)
    logging.getLogger().setLevel(logging.INFO)
    with (
        strategy.scope(),
        monsession.MonitoredTrainingSession(
            checkpoint_dir=checkpoint_dir,
            scaffold=monsession.Scaffold(saver=checkpoint),
            save_checkpoint_steps=3,
            save_summaries_steps=None,
            log_step_count_steps=None,
            hooks=[
                monsession.StopAtStepHook(last_step=LAST_STEP),
                LoggingTensorHook(["loss"], every_n_iter=3),
            ],
        ) as sess,
    ):
        runs = 0
        while not sess.should_stop():
            sess.run(step)
            runs += 1
    print(json.dumps({"runs": runs, "weight": float(weight.numpy()), "logged": lines.lines}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
    # In-process servers and the coordinator's threads can hold up the
    # interpreter's shutdown for minutes on a loaded machine.
    sys.stdout.flush()
    os._exit(0)
