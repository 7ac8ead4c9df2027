"""Under a ClusterCoordinator, a global step advanced in the closures is checked at each join.

When a worker dies mid-closure, TensorFlow's `ClusterCoordinator` runs the
closure again on another worker; a closure advancing the global step then
advances it twice for one step. Here the ps sees the same thing without a
death: one run of the step schedules its closure twice (the loopback test of
a real worker death is examples/distributed/tests/test_parameter_server_worker_death.py).
The session warns once, naming the step, and hooks see the variable's value
from the join on. With the session-owned global step nothing is warned and
every step counts once.
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
    import os
    import socket
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
        {"worker": [f"127.0.0.1:{free_port()}"], "ps": [f"127.0.0.1:{free_port()}"]}
    )
    servers = [tf.distribute.Server(cluster, job, 0) for job in ("worker", "ps")]
    resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(cluster, rpc_layer="grpc")
    strategy = tf.distribute.experimental.ParameterServerStrategy(resolver)
    coordinator = tf.distribute.experimental.coordinator.ClusterCoordinator(strategy)

    class SettleEvery2(monsession.SessionRunHook):
        def __init__(self):
            self.seen = []
            self.runs = 0

        def after_run(self, run_context, run_values):
            self.runs += 1
            if self.runs % 2 == 0:
                monsession.plugins.settle(run_context.session)
                self.seen.append(run_context.global_step_after())

        def end(self, session):
            self.seen.append(monsession.plugins.read_global_step(session))

    def run(advanced_by):
        tf.compat.v1.reset_default_graph()
        with strategy.scope():
            weight = tf.Variable(0.0)
            step_var = None
            if advanced_by == "closure":
                step_var = monsession.get_or_create_global_step()

        @tf.function
        def worker_fn():
            if step_var is not None:
                step_var.assign_add(1)
            return weight.assign_add(1.0)

        runs = []

        def train_step():
            runs.append(1)
            if len(runs) in (2, 3):  # What the ps sees when a closure runs again.
                coordinator.schedule(worker_fn)
            return {"loss": coordinator.schedule(worker_fn)}

        hook = SettleEvery2()
        del warnings[:]
        with strategy.scope(), monsession.MonitoredSession(hooks=[hook]) as sess:
            for _ in range(6):
                sess.run(train_step)
        return {"seen": hook.seen, "warnings": list(warnings), "weight": float(weight.numpy())}

    print(json.dumps({kind: run(kind) for kind in ("closure", "owned")}), flush=True)
    os._exit(0)  # the in-process servers can hold up the shutdown
"""


def test_a_closure_that_ran_twice_is_warned_once_and_the_owned_step_counts_once() -> None:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(PROGRAM)],
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    closure, owned = found["closure"], found["owned"]
    # Runs 2 and 3 each ran their closure twice: at the join after run 2 the
    # variable holds 3 (hooks now see it), after run 4: 6, after run 6: 8.
    assert closure["seen"] == [3, 6, 8, 8]
    assert closure["weight"] == 8.0
    (warning,) = closure["warnings"]
    assert warning.startswith(
        "The global step is 3 once the closures scheduled so far have run, but the session "
        "ran 2 steps: a closure of the step 'train_step' advanced it more than once."
    )
    assert "at least once, not exactly once" in warning
    assert "let the session own the global step" in warning
    # The session's own global step is advanced on the coordinator, once per run.
    assert owned == {"seen": [2, 4, 6, 6], "warnings": [], "weight": 8.0}
