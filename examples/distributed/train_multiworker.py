"""Eager training with monsession on `tf.distribute` strategies.

One script, two setups:

* ``--strategy mirrored``: one process, `MirroredStrategy` over two logical
  CPU devices (or the GPUs you have).
* ``--strategy multiworker`` (default): one process per worker,
  `MultiWorkerMirroredStrategy`; the cluster and this process's task come
  from the ``TF_CONFIG`` environment variable. Start every worker with the
  same ``--output-dir``:

    TF_CONFIG='{"cluster": {"worker": ["127.0.0.1:20000", "127.0.0.1:20001"]},
                "task": {"type": "worker", "index": 0}}' \\
        python train_multiworker.py --output-dir /tmp/mw --last-step 200 &
    TF_CONFIG='{... "task": {"type": "worker", "index": 1}}' \\
        python train_multiworker.py --output-dir /tmp/mw --last-step 200

The model is a linear regression on synthetic data, kept small so that the
example runs in seconds on a laptop; each replica draws its own batch.
Every worker writes a JSON report to ``--report`` (what its session saw),
which the tests in ``tests/`` read.
"""

from __future__ import annotations

import argparse
import glob
import json
import logging
import os
import tempfile
import time
from typing import Any

FEATURES = 4
BATCH_PER_REPLICA = 16
LEARNING_RATE = 0.05
TRUE_WEIGHTS = [[2.0], [-3.0], [0.5], [1.0]]
TRUE_BIAS = 0.25
WORKER_TEMP_PREFIX = "monsession-worker-checkpoint-"


class Report:
    """What one process saw, as a JSON-able dict (read by the tests)."""

    def __init__(self, path: str | None) -> None:
        self.path = path
        self.data: dict[str, Any] = {"pid": os.getpid(), "creations": [], "losses": []}

    def write(self) -> None:
        if self.path:
            with open(self.path + ".tmp", "w") as file:
                json.dump(self.data, file)
            os.replace(self.path + ".tmp", self.path)


def make_report_hook(report: Report, global_step: Any) -> Any:
    import monsession as ms

    class ReportHook(ms.SessionRunHook):
        """Records the global step at each session creation, the loss of every
        step (fused ones too), how many steps ran fused, this worker's
        temporary checkpoints, and the final global step."""

        def after_create_session(self, session: Any, coord: Any) -> None:
            report.data["creations"].append(int(session.run(global_step)))
            report.data.setdefault("fused", 0)
            report.write()

        def next_action(self, global_step_value: int) -> Any:
            # Acts on no particular step; keeps the loss of the fused steps.
            return ms.NextAction(keep=("loss",))

        def before_run(self, run_context: Any) -> Any:
            if run_context.silent_steps:
                fused = run_context.silent_outputs["loss"].numpy().tolist()
                report.data["losses"].extend(float(loss) for loss in fused)
                report.data["fused"] += len(fused)
            return ms.SessionRunArgs({"loss": "loss", "step": global_step})

        def after_run(self, run_context: Any, run_values: Any) -> None:
            results = run_values.results
            report.data["losses"].append(float(results["loss"]))
            report.data["step"] = int(results["step"])
            pattern = os.path.join(tempfile.gettempdir(), WORKER_TEMP_PREFIX + "*", "*")
            report.data["worker_temp_files"] = sorted(
                os.path.basename(path) for path in glob.glob(pattern)
            )
            if report.data["step"] % 5 == 0 or run_context.silent_steps:
                report.write()

        def end(self, session: Any) -> None:
            report.data["final_step"] = int(session.run(global_step))
            report.write()

    return ReportHook()


def train(
    strategy: Any,
    output_dir: str,
    last_step: int,
    save_checkpoint_steps: int = 10,
    save_summaries_steps: int = 10,
    step_delay: float = 0.0,
    report_path: str | None = None,
    stop_on_signals: bool = True,
    saver: str = "checkpoint",
    steps_per_execution: int | str = 1,
) -> dict[str, Any]:
    """Trains to `last_step` under `strategy` with monsession; returns the report.

    The session is created inside `strategy.scope()`, so monsession sees the
    strategy: under `MultiWorkerMirroredStrategy` its cluster resolver decides
    who is chief, the other workers restore the chief's checkpoint and mirror
    its saves into a temporary directory that is removed. SIGTERM or SIGINT
    on any worker (`stop_on_signals`) stops every worker after the same step;
    the chief saves that step, and every worker then hands the signal on.
    `saver="manager"` hands the session a `tf.train.CheckpointManager`
    (its files are named ``ckpt-<step>``) instead of the `tf.train.Checkpoint`.
    `steps_per_execution` (e.g. ``"auto"``) fuses the steps between hook
    actions into one call; under `MultiWorkerMirroredStrategy` the workers
    agree after each call how many the next one fuses. The report then
    counts the steps each worker ran fused (``"fused"``).
    """
    import tensorflow as tf

    import monsession as ms

    report = Report(report_path)
    report.data["is_chief"] = ms.is_chief(strategy)
    report.data["replicas"] = strategy.num_replicas_in_sync
    with strategy.scope():
        global_step = ms.get_or_create_global_step()
        # MEAN aggregation: an update made in a replica is averaged over every
        # replica of every worker, so the replicas apply the mean gradient.
        weights = tf.Variable(
            tf.zeros([FEATURES, 1]), name="weights", aggregation=tf.VariableAggregation.MEAN
        )
        bias = tf.Variable(0.0, name="bias", aggregation=tf.VariableAggregation.MEAN)
        checkpoint = tf.train.Checkpoint(weights=weights, bias=bias, step=global_step)
    state: Any = checkpoint
    if saver == "manager":
        # Every worker builds the same manager; only the chief's saves stay.
        state = tf.train.CheckpointManager(checkpoint, output_dir, max_to_keep=2)

    true_weights = tf.constant(TRUE_WEIGHTS)

    def replica_step() -> Any:
        replica = tf.distribute.get_replica_context().replica_id_in_sync_group
        seed = tf.stack([tf.cast(global_step, tf.int32), tf.cast(replica, tf.int32)])
        x = tf.random.stateless_normal([BATCH_PER_REPLICA, FEATURES], seed=seed)
        y = tf.matmul(x, true_weights) + TRUE_BIAS
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(tf.matmul(x, weights) + bias - y))
        grad_weights, grad_bias = tape.gradient(loss, [weights, bias])
        weights.assign_sub(LEARNING_RATE * grad_weights)
        bias.assign_sub(LEARNING_RATE * grad_bias)
        return loss

    @tf.function
    def train_step() -> dict[str, Any]:
        losses = strategy.run(replica_step)
        loss = strategy.reduce(tf.distribute.ReduceOp.MEAN, losses, axis=None)
        global_step.assign_add(1)
        # Recorded by the chief's SummarySaverHook; other workers have no writer.
        tf.summary.scalar("loss", loss, step=global_step)
        return {"loss": loss}

    hooks = [ms.StopAtStepHook(last_step=last_step), make_report_hook(report, global_step)]
    with (
        strategy.scope(),
        ms.MonitoredTrainingSession(
            checkpoint_dir=output_dir,
            scaffold=ms.Scaffold(saver=state),
            hooks=hooks,
            save_checkpoint_steps=save_checkpoint_steps,
            save_summaries_steps=save_summaries_steps,
            log_step_count_steps=save_summaries_steps,
            stop_on_signals=stop_on_signals,
            steps_per_execution=steps_per_execution,
        ) as sess,
    ):
        while not sess.should_stop():
            sess.run(train_step)
            if step_delay:
                time.sleep(step_delay)
    report.data["weights"] = weights.numpy().ravel().tolist()
    report.write()
    return report.data


def make_strategy(kind: str) -> Any:
    import tensorflow as tf

    if kind == "mirrored":
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * 2
        )
        devices = [device.name for device in tf.config.list_logical_devices("CPU")]
        return tf.distribute.MirroredStrategy(devices)
    return tf.distribute.MultiWorkerMirroredStrategy()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--strategy", choices=["multiworker", "mirrored"], default="multiworker")
    parser.add_argument("--output-dir", required=True)
    parser.add_argument("--last-step", type=int, default=200)
    parser.add_argument("--save-checkpoint-steps", type=int, default=10)
    parser.add_argument("--save-summaries-steps", type=int, default=10)
    parser.add_argument("--step-delay", type=float, default=0.0)
    parser.add_argument("--report", default=None)
    parser.add_argument("--saver", choices=["checkpoint", "manager"], default="checkpoint")
    parser.add_argument(
        "--steps-per-execution",
        type=lambda value: value if value == "auto" else int(value),
        default=1,
        help='steps fused per call: an int, or "auto" (as many as the hooks allow)',
    )
    parser.add_argument(
        "--no-stop-on-signals",
        dest="stop_on_signals",
        action="store_false",
        help="leave SIGTERM and SIGINT alone (stop_on_signals=False)",
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    train(
        make_strategy(args.strategy),
        args.output_dir,
        last_step=args.last_step,
        save_checkpoint_steps=args.save_checkpoint_steps,
        save_summaries_steps=args.save_summaries_steps,
        step_delay=args.step_delay,
        report_path=args.report,
        stop_on_signals=args.stop_on_signals,
        saver=args.saver,
        steps_per_execution=args.steps_per_execution,
    )


if __name__ == "__main__":
    main()
