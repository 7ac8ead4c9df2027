"""Child of test_parameter_server_failure.py: one process of a ParameterServerStrategy job.

``ps_job_child.py server CLUSTER JOB TASK [WORKDIR]``
    A `tf.distribute.Server` for task ``JOB:TASK`` (``ps`` or ``worker``) of
    the cluster ``CLUSTER`` (JSON); runs until killed. With ``WORKDIR`` it
    runs there: the relative paths that closures write on this task land in it.

``ps_job_child.py coordinator CLUSTER CHECKPOINT_DIR LAST_STEP REPORT [GATE_STEP GATE_DIR]``
    The coordinator: the documented recipe (`MonitoredTrainingSession`
    inside `strategy.scope()`, each step returning
    `ClusterCoordinator.schedule(...)`, the session owning the global step,
    a checkpoint every 10 steps, `StopAtStepHook(LAST_STEP)`). Each closure
    adds 1 to the weight, so a checkpoint of step N holds the weight N. It
    writes ``REPORT`` (JSON) when the session is created and when it ends.
    With a gate, after step ``GATE_STEP`` it writes ``GATE_DIR/reached`` and
    holds its next step until ``GATE_DIR/go`` exists, so that a test can
    act between two known steps.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

SAVE_STEPS = 10
GATE_LIMIT_SECS = 120


def serve(cluster: dict[str, list[str]], job: str, task: int, workdir: str | None) -> None:
    import os

    import tensorflow as tf

    if workdir is not None:
        os.chdir(workdir)

    server = tf.distribute.Server(
        tf.train.ClusterSpec(cluster), job_name=job, task_index=task, protocol="grpc"
    )
    server.join()


class _Report:
    def __init__(self, path: str) -> None:
        self.path = Path(path)
        self.data: dict[str, Any] = {"creations": []}

    def write(self) -> None:
        partial = self.path.with_suffix(".partial")
        partial.write_text(json.dumps(self.data))
        partial.replace(self.path)


def _hooks(report: _Report, weight: Any, gate: tuple[int, Path] | None) -> list[Any]:
    import monsession

    class Reporter(monsession.SessionRunHook):
        """Records the global step at each session creation, and the end."""

        def after_create_session(self, session: Any, coord: Any) -> None:
            report.data["creations"].append(monsession.plugins.read_global_step(session))
            report.write()

        def end(self, session: Any) -> None:
            report.data["final_step"] = monsession.plugins.read_global_step(session)
            report.data["weight"] = float(weight.numpy())
            report.write()

    class Gate(monsession.SessionRunHook):
        """After step `gate_step`, says so and waits for the test's go."""

        def after_run(self, run_context: Any, run_values: Any) -> None:
            gate_step, gate_dir = gate  # type: ignore[misc]
            if run_context.global_step != gate_step:
                return
            (gate_dir / "reached").touch()
            deadline = time.monotonic() + GATE_LIMIT_SECS
            while not (gate_dir / "go").exists() and time.monotonic() < deadline:
                time.sleep(0.05)

    return [Reporter()] if gate is None else [Reporter(), Gate()]


def coordinate(
    cluster: dict[str, list[str]],
    checkpoint_dir: str,
    last_step: int,
    report_path: str,
    gate: tuple[int, Path] | None,
) -> None:
    import tensorflow as tf

    import monsession

    resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
        tf.train.ClusterSpec(cluster), rpc_layer="grpc"
    )
    strategy = tf.distribute.experimental.ParameterServerStrategy(resolver)
    coordinator = tf.distribute.experimental.coordinator.ClusterCoordinator(strategy)
    with strategy.scope():
        weight = tf.Variable(0.0)
    checkpoint = tf.train.Checkpoint(weight=weight)

    @tf.function
    def worker_fn() -> Any:
        return weight.assign_add(1.0) * 2.0

    def step() -> dict[str, Any]:
        return {"loss": coordinator.schedule(worker_fn)}

    report = _Report(report_path)
    with (
        strategy.scope(),
        monsession.MonitoredTrainingSession(
            checkpoint_dir=checkpoint_dir,
            scaffold=monsession.Scaffold(saver=checkpoint),
            save_checkpoint_steps=SAVE_STEPS,
            save_summaries_steps=None,
            log_step_count_steps=None,
            hooks=[monsession.StopAtStepHook(last_step=last_step), *_hooks(report, weight, gate)],
        ) as sess,
    ):
        while not sess.should_stop():
            sess.run(step)


def main(argv: list[str]) -> None:
    role, cluster = argv[0], json.loads(argv[1])
    if role == "server":
        serve(cluster, argv[2], int(argv[3]), argv[4] if len(argv) > 4 else None)
        return
    gate = (int(argv[5]), Path(argv[6])) if len(argv) > 5 else None
    coordinate(cluster, argv[2], int(argv[3]), argv[4], gate)


if __name__ == "__main__":
    main(sys.argv[1:])
