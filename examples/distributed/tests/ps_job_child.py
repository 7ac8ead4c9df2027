"""One server of a ParameterServerStrategy job (test_parameter_server_worker_death.py).

``ps_job_child.py server CLUSTER JOB TASK [WORKDIR]``
    A `tf.distribute.Server` for task ``JOB:TASK`` (``ps`` or ``worker``) of
    the cluster ``CLUSTER`` (JSON); runs until killed. With ``WORKDIR`` it
    runs there: the relative paths that closures write on this task land in it.
"""

from __future__ import annotations

import json
import os
import sys


def serve(cluster: dict[str, list[str]], job: str, task: int, workdir: str | None) -> None:
    import tensorflow as tf

    if workdir is not None:
        os.chdir(workdir)

    server = tf.distribute.Server(
        tf.train.ClusterSpec(cluster), job_name=job, task_index=task, protocol="grpc"
    )
    server.join()


def main(argv: list[str]) -> None:
    if argv[0] != "server":
        raise SystemExit(f"usage: ps_job_child.py server CLUSTER JOB TASK [WORKDIR]; got {argv}")
    serve(json.loads(argv[1]), argv[2], int(argv[3]), argv[4] if len(argv) > 4 else None)


if __name__ == "__main__":
    main(sys.argv[1:])
