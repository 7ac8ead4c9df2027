"""The tf1-cluster column: TensorFlow 1 between-graph replication in graph mode.

One ps and two workers, each a process with a `tf.distribute.Server`; each
worker builds the single-process matrix's graph (`driver_matrix.drivers.run_graph`)
under `replica_device_setter`, so the variables live on the ps, and trains
through `monsession.MonitoredTrainingSession(master=server.target,
is_chief=index == 0)`. The chief initializes or restores the model and
writes the checkpoints and summaries; each worker logs, counts its rate
and stops on its own hooks.

Asynchronous workers race on the global step and on the weights. To make
every record of the column deterministic, the two workers take turns
(`Turn`): a worker runs a step only when it holds the turn, a variable on
the ps, and hands it over once every hook has acted on the step (the last
`after_run`, but a kill of the ps and the chief's SIGTERM: see `TfCluster.place`). Worker 1 moves
first, so it runs the steps that end on odd global steps (17: where the
faults happen), the chief the even ones. The
job is still a real between-graph cluster: two sessions on two servers,
whose steps update the same ps variables, and a worker that dies leaves
the other waiting for it, as a synchronous replica would.
"""

from __future__ import annotations

import time
from typing import Any

import tensorflow as tf
from distributed_testing import addresses
from driver_matrix import rows

import monsession

POLL_SECS = 0.005  # How often a worker waiting for its turn reads it.
MAX_WAIT_SECS = 60  # How long a worker waits for the chief's session.


def cluster_spec(plan: dict[str, Any]) -> Any:
    """The cluster of the plan: its servers (the ps) first, then its workers."""
    hosts = addresses(plan["ports"])
    servers = len(plan["servers"])
    return tf.train.ClusterSpec({"ps": hosts[:servers], "worker": hosts[servers:]})


def serve(plan: dict[str, Any]) -> None:
    """The ps: serves the variables until it is killed."""
    server = tf.distribute.Server(
        cluster_spec(plan), job_name="ps", task_index=plan["servers"].index(plan["role"])
    )
    server.join()


class Turn(monsession.SessionRunHook):
    """Holds the worker's steps until it has the turn; first of the worker's hooks.

    The turn and each worker's `done` flag are variables on the ps, outside
    every collection: never saved, so a restored checkpoint does not hand
    the turn to anyone. The chief initializes them when it finds them
    uninitialized (a new ps). A worker waits for its turn before its first
    step (worker 1 also before its session's first hook, so it starts where
    its turn begins), and at its end, so that what it reads then is final
    for its turn; a worker whose peer is done never waits. It says it is
    done once every hook has ended (`TurnHandOver.end`): a chief that stops
    holding the turn (SIGTERM) has saved the step it stopped at before its
    peer runs on.
    """

    def __init__(self, index: int, workers: int) -> None:
        if workers != 2:
            raise ValueError(f"Turn: takes turns between 2 workers, got {workers}")
        self._index, self._other = index, 1 - index
        with tf.compat.v1.variable_scope("turn"):
            self._turn = tf.compat.v1.Variable(1, collections=[], name="holder")
            self._done = [
                tf.compat.v1.Variable(0, collections=[], name=f"done{i}") for i in range(2)
            ]
        self._ready = tf.compat.v1.is_variable_initialized(self._turn)
        self._init = tf.group(self._turn.initializer, *(d.initializer for d in self._done))
        peer_done = self._done[self._other].read_value()
        self._state = {"turn": self._turn.read_value(), "done": peer_done}
        self._hand_over = self._turn.assign(self._other)
        self._finish = self._done[self._index].assign(1)

    def hand_over(self, keep_at: int | None = None) -> TurnHandOver:
        """The hook that hands the turn over: to be placed after every other hook. It keeps
        the turn after global step `keep_at` (a SIGTERM's: the worker stops after it)."""
        return TurnHandOver(self, keep_at)

    def wait(self, session: Any) -> None:
        """Returns once this worker has the turn, or its peer is done."""
        while True:
            state = session.run(self._state)
            if state["turn"] == self._index or state["done"]:
                return
            time.sleep(POLL_SECS)

    def after_create_session(self, session, coord):
        if self._index == 0:
            return  # It initializes the turn once its other hooks have started.
        while not session.run(self._ready):
            time.sleep(POLL_SECS)
        self.wait(session)

    def before_run(self, run_context):
        self.wait(run_context.session)
        return None

    def end(self, session):
        self.wait(session)

    def finish(self, session: Any) -> None:
        """Says this worker is done: its peer then runs on alone (no wait for the turn)."""
        session.run(self._finish)

    def start(self, session: Any) -> None:
        """The chief, once its hooks have started: the turn, if a new ps holds none, to
        worker 1."""
        if self._index == 0 and not session.run(self._ready):
            session.run(self._init)

    def pass_turn(self, session: Any) -> None:
        session.run(self._hand_over)


class TurnHandOver(monsession.SessionRunHook):
    """Hands the turn to the other worker after every hook has acted on the step, and says
    the worker is done after every hook's `end`; on the chief, initializes the turn after
    every hook's `after_create_session`."""

    def __init__(self, turn: Turn, keep_at: int | None) -> None:
        self._turn, self._keep_at = turn, keep_at

    def after_create_session(self, session, coord):
        self._turn.start(session)

    def after_run(self, run_context, run_values):
        if self._keep_at is None or run_context.global_step_after() != self._keep_at:
            self._turn.pass_turn(run_context.session)

    def end(self, session):
        self._turn.finish(session)  # After every other hook's end: a chief's save included.


class TfCluster:
    """What `driver_matrix.drivers.run_graph` needs for one worker of the cluster.

    `device` places the variables on the ps; `session_args` connect the
    session to this worker's server; `place` splits the hooks into the
    chief's (the savers, as TensorFlow's defaults) and every worker's, and
    adds the turn-taking: a worker's own fault (`rows.Interrupt`) after its
    hand-over, the ps's kill (ps-kill) and the chief's SIGTERM before it.
    """

    CHIEF_ONLY = ("CheckpointSaverHook", "SummarySaverHook")

    def __init__(self, plan: dict[str, Any]) -> None:
        self._plan = plan
        self.index = plan["roles"].index(plan["role"])
        spec = cluster_spec(plan)
        # Each worker talks to the ps and to itself only: the chief never waits for a peer.
        config = tf.compat.v1.ConfigProto(
            device_filters=["/job:ps", f"/job:worker/task:{self.index}"]
        )
        self._server = tf.distribute.Server(
            spec, job_name="worker", task_index=self.index, config=config
        )
        self.device = tf.compat.v1.train.replica_device_setter(
            worker_device=f"/job:worker/task:{self.index}", cluster=spec
        )
        self.session_args = {
            "master": self._server.target,
            "is_chief": self.index == 0,
            "config": config,
            "max_wait_secs": MAX_WAIT_SECS,
        }

    def place(self, hooks: list[Any]) -> tuple[list[Any], list[Any]]:
        """(chief-only hooks, hooks), in the order the session calls them."""
        turn = Turn(self.index, len(self._plan["roles"]))
        chief = [h for h in hooks if type(h).__name__ in self.CHIEF_ONLY]
        every = [h for h in hooks if type(h).__name__ not in self.CHIEF_ONLY]
        faults = [h for h in every if isinstance(h, rows.Interrupt)]
        every = [h for h in every if not isinstance(h, rows.Interrupt)]
        if self._plan.get("kill_pid"):
            # The ps's kill, before the hand-over: no peer's step runs after it.
            every += [*faults, turn.hand_over()]
        elif self._plan.get("sigterm_at"):
            # SIGTERM: the worker keeps the turn and stops, saving the step it stopped at.
            every += [*faults, turn.hand_over(keep_at=self._plan["sigterm_at"])]
        else:
            # The worker's own fault, after it: the peer runs on meanwhile.
            every += [turn.hand_over(), *faults]
        if self.index == 0:
            return [turn, *chief], every
        return [], [turn, *every]
