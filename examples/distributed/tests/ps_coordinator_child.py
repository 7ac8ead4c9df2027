"""Child of test_parameter_server.py: a ParameterServerStrategy job on 127.0.0.1.

A worker and a parameter server (`tf.distribute.Server`s of this process, as
TensorFlow's in-process cluster does) and the coordinator: the step schedules
a closure with `ClusterCoordinator.schedule` and returns its `RemoteValue`;
a hook fetches ``"loss"``. Prints one JSON line with what the hook saw.
"""

from __future__ import annotations

import json
import os
import socket
import sys

import tensorflow as tf

import monsession


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def main() -> None:
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

    @tf.function
    def worker_fn():
        weight.assign_add(1.0)
        return weight * 2.0

    def step():
        return {"loss": coordinator.schedule(worker_fn)}

    seen = []

    class Seen(monsession.SessionRunHook):
        def before_run(self, run_context):
            return monsession.SessionRunArgs("loss")

        def after_run(self, run_context, run_values):
            seen.append(float(run_values.results))

    with strategy.scope(), monsession.MonitoredSession(hooks=[Seen()]) as sess:
        outputs = [sess.run(step) for _ in range(4)]
    coordinator.join()
    print(
        json.dumps(
            {
                "seen": seen,
                "remote": [
                    isinstance(output["loss"], tf.distribute.experimental.coordinator.RemoteValue)
                    for output in outputs
                ],
                "weight": float(weight.numpy()),
            }
        )
    )


if __name__ == "__main__":
    main()
    # In-process servers and the coordinator's threads can hold up the
    # interpreter's shutdown for minutes on a loaded machine.
    sys.stdout.flush()
    os._exit(0)
