"""Fused steps under a ClusterCoordinator: the silent steps before a hook acts are one closure.

A `ParameterServerStrategy` step schedules a closure and returns at once. With
`steps_per_execution="auto"` and a step that names the `tf.function` it
schedules (`monsession_fused_step`), the session schedules the steps on which
no hook acts as one closure running them in a loop on a worker, counted on the
host when scheduled. Hooks, checkpoints and the global step must be what
single steps give. The cluster is in-process (1 ps, 1 worker: with two
in-process workers TensorFlow's closures stall on this machine); the
multi-process column with 2 workers is `pss-auto` in cluster_matrix.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

PROGRAM = """
    import json
    import logging
    import socket
    import sys
    import tempfile
    import tensorflow as tf
    import monsession

    def free_port():
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            return sock.getsockname()[1]

    warnings = []

    class Warnings(logging.Handler):
        def emit(self, record):
            if record.levelno >= logging.WARNING:
                warnings.append(record.getMessage())

    logging.getLogger("monsession").addHandler(Warnings())
    cluster = tf.train.ClusterSpec(
        {
            "worker": [f"127.0.0.1:{free_port()}"],
            "ps": [f"127.0.0.1:{free_port()}"],
        }
    )
    servers = [
        tf.distribute.Server(cluster, job, index)
        for job, index in (("worker", 0), ("ps", 0))
    ]
    resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(cluster, rpc_layer="grpc")
    strategy = tf.distribute.experimental.ParameterServerStrategy(resolver)
    coordinator = tf.distribute.experimental.coordinator.ClusterCoordinator(strategy)
    scheduled = []  # Every closure scheduled, by the step or by the session.
    schedule = coordinator.schedule

    def counted_schedule(*args, **kwargs):
        scheduled.append(1)
        return schedule(*args, **kwargs)

    coordinator.schedule = counted_schedule

    class Every10(monsession.SessionRunHook):
        "Acts at global steps 10, 20...: the session's global step, and the silent steps."

        def __init__(self):
            self.seen = []

        def next_action(self, global_step):
            return monsession.NextAction(steps=10 - global_step % 10)

        def before_run(self, run_context):
            self.silent = run_context.silent_steps

        def after_run(self, run_context, run_values):
            step = run_context.global_step_after()
            if step % 10 == 0:
                self.seen.append([step, self.silent])

    def run(steps_per_execution, names_its_function=True):
        tf.compat.v1.reset_default_graph()
        with strategy.scope():
            weight = tf.Variable(0.0)

        @tf.function
        def worker_fn():
            return {"loss": weight.assign_add(1.0)}

        calls = []

        def train_step():
            calls.append(1)
            return coordinator.schedule(worker_fn)

        if names_its_function:
            train_step.monsession_fused_step = worker_fn
        hook = Every10()
        directory = tempfile.mkdtemp()
        del warnings[:], scheduled[:]
        with strategy.scope(), monsession.MonitoredTrainingSession(
            checkpoint_dir=directory,
            scaffold=monsession.Scaffold(saver=tf.train.Checkpoint(weight=weight)),
            save_checkpoint_steps=10,
            save_summaries_steps=None,
            log_step_count_steps=None,
            hooks=[monsession.StopAtStepHook(last_step=40), hook],
            steps_per_execution=steps_per_execution,
        ) as sess:
            while not sess.should_stop():
                sess.run(train_step)
        saved = {}
        for path in tf.train.get_checkpoint_state(directory).all_model_checkpoint_paths:
            reader = tf.train.load_checkpoint(path)
            saved[path.rsplit("-", 1)[1]] = [
                int(reader.get_tensor("monsession_global_step/.ATTRIBUTES/VARIABLE_VALUE")),
                float(reader.get_tensor("weight/.ATTRIBUTES/VARIABLE_VALUE")),
            ]
        return {
            "calls": len(calls),
            "scheduled": len(scheduled),
            "seen": hook.seen,
            "saved": saved,
            "weight": float(weight.numpy()),
            "warnings": [w for w in warnings if "steps_per_execution" in w],
        }

    found = {"single": run(1), "auto": run("auto"), "unnamed": run("auto", False)}
    print(json.dumps(found), flush=True)
    sys.stdout.flush()
    import os
    os._exit(0)  # the in-process servers can hold up the shutdown
"""


def test_auto_schedules_the_silent_steps_as_one_closure_and_counts_them_exactly() -> None:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(PROGRAM)],
        capture_output=True,
        text=True,
        timeout=300,
        # No time budget: a block is exactly the steps before the next hook
        # action, whatever the pace of this (possibly busy) machine.
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "MONSESSION_FUSED_CALL_SECONDS": "3600"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    single, auto, unnamed = found["single"], found["auto"], found["unnamed"]
    # Checkpoints hold exactly their step and the weight of that many steps.
    every_10 = {str(n): [n, float(n)] for n in (0, 10, 20, 30, 40)}
    assert single["saved"] == auto["saved"] == unnamed["saved"] == every_10
    assert single["weight"] == auto["weight"] == unnamed["weight"] == 40.0
    # Hooks see the same steps, and before each the 9 steps no hook acted on (quiet
    # single steps, or one fused closure).
    assert single["seen"] == auto["seen"] == [[10, 9], [20, 9], [30, 9], [40, 9]]
    # Single steps: one closure per step. Fused: one closure per block of silent steps,
    # plus one per step a hook acts on (the first block: single steps until the session
    # knows its pace).
    assert single["calls"] == single["scheduled"] == 40
    assert auto["calls"] <= 10, auto
    assert auto["scheduled"] - auto["calls"] >= 3, auto  # The blocks, by the session.
    assert auto["warnings"] == []
    # A step that does not name the function it schedules runs single steps, explained once.
    assert unnamed["calls"] == 40
    (warning,) = unnamed["warnings"]
    assert "it schedules its closure itself" in warning
    assert "monsession_fused_step" in warning
