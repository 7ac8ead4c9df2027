"""Graph-mode training with monsession on a TensorFlow cluster (between-graph replication).

TensorFlow's classic setup: one parameter server task (``ps``) holds the
variables, placed there by `tf.compat.v1.train.replica_device_setter`; each
worker task builds the same graph and trains asynchronously through its own
`tf.distribute.Server`. Worker 0 is the chief: it initializes the variables
(or restores the latest checkpoint) and writes checkpoints and summaries; the
other workers wait for it and run only their own hooks. A worker can be held
back until the global step reaches ``--wait-steps`` (`GlobalStepWaiterHook`).

Start one process per task, with the same ``--cluster``:

    CLUSTER='{"ps": ["127.0.0.1:20000"], "worker": ["127.0.0.1:20001", "127.0.0.1:20002"]}'
    python train_cluster.py --cluster "$CLUSTER" --job ps --task 0 &
    python train_cluster.py --cluster "$CLUSTER" --job worker --task 0 --output-dir /tmp/c &
    python train_cluster.py --cluster "$CLUSTER" --job worker --task 1 --output-dir /tmp/c

The parameter server runs until it is killed. Every worker writes a JSON
report to ``--report`` (what its session saw), which the tests read.
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from typing import Any

from train_multiworker import FEATURES, TRUE_BIAS, TRUE_WEIGHTS, Report

BATCH = 32
LEARNING_RATE = 0.05


def make_report_hook(report: Report, global_step: Any, loss: Any) -> Any:
    import monsession as ms

    class ReportHook(ms.SessionRunHook):
        """Records the global step at each session creation and before this
        worker's first step, the losses, and the final global step."""

        def after_create_session(self, session: Any, coord: Any) -> None:
            report.data["creations"].append(int(session.run(global_step)))
            report.write()

        def before_run(self, run_context: Any) -> Any:
            if "first_step" not in report.data:
                report.data["first_step"] = int(run_context.session.run(global_step))
            return ms.SessionRunArgs({"loss": loss, "step": global_step})

        def after_run(self, run_context: Any, run_values: Any) -> None:
            report.data["losses"].append(float(run_values.results["loss"]))
            report.data["steps_run"] = report.data.get("steps_run", 0) + 1
            if report.data["steps_run"] % 10 == 0:
                report.write()

        def end(self, session: Any) -> None:
            report.data["final_step"] = int(session.run(global_step))
            report.write()

    return ReportHook()


def run_worker(
    cluster: dict[str, list[str]],
    task: int,
    output_dir: str,
    last_step: int,
    save_checkpoint_steps: int,
    save_summaries_steps: int,
    wait_steps: int,
    step_delay: float,
    report_path: str | None,
) -> None:
    import tensorflow as tf

    import monsession as ms

    tf.compat.v1.disable_eager_execution()
    cluster_spec = tf.train.ClusterSpec(cluster)
    # Each worker talks to the parameter servers and to itself only, so the
    # chief never waits for another worker to be up.
    config = tf.compat.v1.ConfigProto(device_filters=["/job:ps", f"/job:worker/task:{task}"])
    server = tf.distribute.Server(
        cluster_spec, job_name="worker", task_index=task, config=config, start=True
    )
    report = Report(report_path)
    is_chief = task == 0
    report.data["is_chief"] = is_chief
    device_setter = tf.compat.v1.train.replica_device_setter(
        worker_device=f"/job:worker/task:{task}", cluster=cluster_spec
    )
    with tf.compat.v1.device(device_setter):
        global_step = ms.get_or_create_global_step()
        weights = tf.compat.v1.get_variable(
            "weights", [FEATURES, 1], initializer=tf.compat.v1.zeros_initializer()
        )
        bias = tf.compat.v1.get_variable("bias", [], initializer=tf.compat.v1.zeros_initializer())
        x = tf.random.normal([BATCH, FEATURES])
        y = tf.matmul(x, tf.constant(TRUE_WEIGHTS)) + TRUE_BIAS
        loss = tf.reduce_mean(tf.square(tf.matmul(x, weights) + bias - y))
        tf.compat.v1.summary.scalar("loss", loss)
        train_op = tf.compat.v1.train.GradientDescentOptimizer(LEARNING_RATE).minimize(
            loss, global_step=global_step
        )
    hooks = [ms.StopAtStepHook(last_step=last_step)]
    if wait_steps and not is_chief:
        hooks.append(ms.GlobalStepWaiterHook(wait_until_step=wait_steps))
    hooks.append(make_report_hook(report, global_step, loss))
    with ms.MonitoredTrainingSession(
        master=server.target,
        is_chief=is_chief,
        checkpoint_dir=output_dir,
        hooks=hooks,
        save_checkpoint_steps=save_checkpoint_steps,
        save_summaries_steps=save_summaries_steps,
        log_step_count_steps=save_summaries_steps,
        config=config,
        max_wait_secs=120,
    ) as sess:
        while not sess.should_stop():
            sess.run(train_op)
            if step_delay:
                time.sleep(step_delay)


def run_ps(cluster: dict[str, list[str]], task: int) -> None:
    import tensorflow as tf

    server = tf.distribute.Server(tf.train.ClusterSpec(cluster), job_name="ps", task_index=task)
    server.join()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cluster", required=True, help="the cluster as JSON: {job: [host:port]}")
    parser.add_argument("--job", choices=["ps", "worker"], required=True)
    parser.add_argument("--task", type=int, required=True)
    parser.add_argument("--output-dir")
    parser.add_argument("--last-step", type=int, default=200)
    parser.add_argument("--save-checkpoint-steps", type=int, default=20)
    parser.add_argument("--save-summaries-steps", type=int, default=20)
    parser.add_argument("--wait-steps", type=int, default=0)
    parser.add_argument("--step-delay", type=float, default=0.0)
    parser.add_argument("--report", default=None)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    cluster = json.loads(args.cluster)
    if args.job == "ps":
        run_ps(cluster, args.task)
        return
    if not args.output_dir:
        parser.error("--output-dir is required for a worker")
    run_worker(
        cluster,
        args.task,
        args.output_dir,
        last_step=args.last_step,
        save_checkpoint_steps=args.save_checkpoint_steps,
        save_summaries_steps=args.save_summaries_steps,
        wait_steps=args.wait_steps,
        step_delay=args.step_delay,
        report_path=args.report,
    )


if __name__ == "__main__":
    main()
