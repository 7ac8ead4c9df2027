"""Child of test_parameter_server_worker_death.py: the coordinator of a ParameterServerStrategy job.

``ps_hooks_child.py CLUSTER CHECKPOINT_DIR REPORT owned|closure [HOLD ...]``

The documented recipe with the standard hooks: `MonitoredTrainingSession`
inside `strategy.scope()`, each step returning `ClusterCoordinator.schedule(...)`,
a checkpoint every `SAVE_STEPS` steps, summaries and rates every
`SUMMARY_STEPS` (`SummarySaverHook`, `StepCounterHook`), `LoggingTensorHook`
on the `RemoteValue` loss, `StopAtStepHook(LAST_STEP)`. ``owned``: the session
owns the global step (the program creates none); ``closure``: each closure
advances it (`global_step.assign_add(1)` in the scheduled function).

Each closure adds 1 to the weight. The closures are numbered as the
coordinator schedules them (1, 2, ...); the one whose number is one of the
``HOLD`` values writes ``running-<number>`` in its worker's working directory
(see ``ps_job_child.py server ... WORKDIR``) and spins until that worker is
killed: the test knows which worker runs it, and kills it while its closure
is in flight, after its updates reached the parameter server. The closure
then runs again on another worker, and does not hold there: the test wrote
``released-<number>`` in every worker's directory first. (The number, not
the weight the closure's update returns: two closures updating the weight
at once may both read it after both updates.)

Writes ``REPORT`` (JSON) at the end: the global step at each session
creation and at the end, the weight, the steps at which `LoggingTensorHook`
logged, and the number of runs.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any

LAST_STEP = 40
SAVE_STEPS = 10
SUMMARY_STEPS = 5


class _LoggedSteps(logging.Handler):
    """The step of each `LoggingTensorHook` line (set by `_StepOfRun` before the run)."""

    def __init__(self) -> None:
        super().__init__()
        self.step: int | None = None
        self.steps: list[int | None] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith("loss = "):
            self.steps.append(self.step)


def coordinate(
    cluster: dict[str, list[str]],
    checkpoint_dir: str,
    report_path: Path,
    advanced_by: str,
    holds: list[float],
) -> None:
    import tensorflow as tf

    import monsession
    from monsession.hooks import LoggingTensorHook

    resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
        tf.train.ClusterSpec(cluster), rpc_layer="grpc"
    )
    strategy = tf.distribute.experimental.ParameterServerStrategy(resolver)
    coordinator = tf.distribute.experimental.coordinator.ClusterCoordinator(strategy)
    with strategy.scope():
        weight = tf.Variable(0.0)
        checkpoint = tf.train.Checkpoint(weight=weight)
        global_step = None
        if advanced_by == "closure":
            global_step = monsession.get_or_create_global_step()
            checkpoint.step = global_step
    hold_at = tf.constant(holds or [-1.0])

    def spin_until_killed(number: Any) -> Any:
        marker = tf.strings.join(["running-", tf.strings.as_string(number, precision=0)])
        with tf.control_dependencies([tf.io.write_file(marker, "")]):
            spins = tf.while_loop(
                lambda i: tf.equal(tf.size(tf.io.matching_files("never-released")), 0),
                lambda i: i + 1,
                [tf.constant(0)],
            )
        return tf.cast(spins[0], tf.float32) * 0.0

    @tf.function
    def worker_fn(number: Any) -> Any:
        updates = [weight.assign_add(1.0)]
        if global_step is not None:
            updates.append(global_step.assign_add(1))
        # The updates reach the ps before the closure may hold: automatic control
        # dependencies order only ops on the same resource, not the marker's write.
        with tf.control_dependencies(updates):
            released = tf.strings.join(["released-", tf.strings.as_string(number, precision=0)])
            hold = tf.logical_and(
                tf.reduce_any(tf.equal(number, hold_at)),
                tf.equal(tf.size(tf.io.matching_files(released)), 0),
            )
        held = tf.cond(hold, lambda: spin_until_killed(number), lambda: tf.constant(0.0))
        new = updates[0]
        return new * 2.0 + held

    scheduled = 0

    def step() -> dict[str, Any]:
        nonlocal scheduled
        scheduled += 1
        loss = coordinator.schedule(worker_fn, args=(tf.constant(float(scheduled)),))
        tf.summary.scalar("weight", weight)
        return {"loss": loss}

    logged = _LoggedSteps()
    logging.getLogger("tensorflow").addHandler(logged)
    logging.getLogger("tensorflow").setLevel(logging.INFO)
    report: dict[str, Any] = {"creations": []}

    class Reporter(monsession.SessionRunHook):
        """Records the step of each run for the logged lines, the creations and the end."""

        def after_create_session(self, session: Any, coord: Any) -> None:
            report["creations"].append(monsession.plugins.read_global_step(session))

        def before_run(self, run_context: Any) -> None:
            logged.step = run_context.global_step + 1

        def end(self, session: Any) -> None:
            report["final_step"] = monsession.plugins.read_global_step(session)

    runs = 0
    with (
        strategy.scope(),
        monsession.MonitoredTrainingSession(
            checkpoint_dir=checkpoint_dir,
            scaffold=monsession.Scaffold(saver=checkpoint),
            save_checkpoint_steps=SAVE_STEPS,
            save_summaries_steps=SUMMARY_STEPS,
            log_step_count_steps=SUMMARY_STEPS,
            hooks=[
                monsession.StopAtStepHook(last_step=LAST_STEP),
                Reporter(),
                LoggingTensorHook(["loss"], every_n_iter=SUMMARY_STEPS),
            ],
        ) as sess,
    ):
        while not sess.should_stop():
            sess.run(step)
            runs += 1
    report.update(weight=float(weight.numpy()), logged=logged.steps, runs=runs)
    partial = report_path.with_suffix(".partial")
    partial.write_text(json.dumps(report))
    partial.replace(report_path)


def main(argv: list[str]) -> None:
    coordinate(json.loads(argv[0]), argv[1], Path(argv[2]), argv[3], [float(w) for w in argv[4:]])


if __name__ == "__main__":
    main(sys.argv[1:])
