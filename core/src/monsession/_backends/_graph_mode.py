"""Graph mode (`tf.compat.v1`): what a session does around `Session.run`."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import ParamSpec

import tensorflow as tf

from monsession import _tf_compat
from monsession._api._types import Fetches, Results, Unchecked
from monsession._backends._backend import Backend
from monsession._backends._fetches import resolve_graph_fetch
from monsession._backends._graph_backend import GraphBackend, global_step_fetch
from monsession._backends._mode import ChiefRestore, CreatedSession, Session, WorkerRestore
from monsession._durability._checkpoint_files import report_and_repair, restore_newest

logger = logging.getLogger("monsession")

_P = ParamSpec("_P")


class GraphMode:
    """`Mode` of code that builds a graph (`tf.compat.v1`)."""

    eager = False
    fuses_steps = False

    def build_graph(self, build: Callable[[], None]) -> None:
        build()

    def keep_graph_finalization(self) -> Callable[[], None]:
        graph = tf.compat.v1.get_default_graph()
        if graph.finalized:
            return _keep_finalized
        return lambda: _tf_compat.unfinalize_graph(graph)

    def own_global_step(self) -> None:
        """Graph mode: the program (or `MonitoredTrainingSession`) creates the step."""

    def check_hooks(self, owner: str, hooks: Sequence[Unchecked]) -> None:
        """Graph mode runs every hook, TensorFlow's own among them."""

    def prepare_graph(self) -> None:
        graph = tf.compat.v1.get_default_graph()
        if not graph.finalized:
            global_step_fetch(graph)

    def create_chief_session(self, restore: ChiefRestore) -> CreatedSession:
        path, choice, session, saver = restore.checkpoint_path, None, None, restore.saver
        if path is None and restore.checkpoint_dir and saver is not None:
            # A restore that finds damaged data is re-run, with the next
            # checkpoint, in a new session: no variable keeps a damaged value.
            choice, session = restore_newest(restore.checkpoint_dir, restore.prepare)
            path = choice.path
        if session is None:
            session = restore.prepare(path)
        if choice is not None and choice.path is not None and saver is not None:
            report_and_repair(choice, repair=True)
            # As SessionManager does: the saver manages (and in time deletes)
            # the checkpoints of the state file, now only readable ones.
            saver.recover_last_checkpoints(list(choice.readable))
            logger.info("Restored checkpoint %s.", choice.path)
        return CreatedSession(session, path if saver is not None else None)

    def create_worker_session(self, worker: WorkerRestore) -> CreatedSession:
        return CreatedSession(worker.wait(), None)

    def multi_worker_strategy(self) -> None:
        """Graph mode: the program says who is chief (TensorFlow's between-graph clusters)."""

    def make_backend(self, sess: Session, follow_step: bool) -> Backend:
        return GraphBackend(sess, follow_step)

    def start_queue_runners(self, sess: Session, coord: tf.train.Coordinator) -> None:
        if tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.QUEUE_RUNNERS):
            tf.compat.v1.train.start_queue_runners(sess=sess, coord=coord)

    def bind_call(
        self, owner: str, step: Callable[_P, Results], /, *args: _P.args, **kwargs: _P.kwargs
    ) -> object:
        raise RuntimeError(
            f"{owner}.call() runs a TF2 step function (eager mode); in graph mode use "
            "run(fetches, feed_dict)."
        )

    def reruns_after_recovery(self, fetches: Fetches) -> bool:
        return True

    def resolve_fetch(self, owner: str, argument: str, target: Unchecked) -> Fetches:
        return resolve_graph_fetch(owner, argument, target)


def _keep_finalized() -> None:
    """A graph finalized before the session stays finalized."""


GRAPH = GraphMode()
