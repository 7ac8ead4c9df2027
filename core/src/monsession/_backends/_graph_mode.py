"""Graph mode (`tf.compat.v1`): what a session does around `Session.run`, and fetches in a graph."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import ParamSpec

import tensorflow as tf

from monsession import _tf_compat
from monsession._api._types import Fetches, Results, Unchecked
from monsession._backends._backend import ChiefRestore, CreatedSession, Session, WorkerRestore
from monsession._backends._graph_backend import GraphBackend, global_step_fetch
from monsession._durability._checkpoint_files import report_and_repair, restore_newest
from monsession._fusion._plan import PlanningHooks, check_steps_per_execution

logger = logging.getLogger("monsession")
_P = ParamSpec("_P")


class GraphMode:
    """`Mode` of code that builds a graph (`tf.compat.v1`)."""

    eager = False

    def build_graph(self, build: Callable[[], None]) -> None:
        build()

    def check_steps_per_execution(self, owner: str, value: Unchecked) -> int | None:
        cap = check_steps_per_execution(owner, value)
        if cap != 1:
            raise ValueError(
                f"{owner}: steps_per_execution={value!r} fuses the steps of a TF2 (eager) loop; "
                "in graph mode each Session.run() is one step: leave it at 1."
            )
        return cap

    def fusion(self, owner: str, cap: int | None, hooks: PlanningHooks) -> None:
        """Graph mode: each `Session.run` is one step with the hooks."""

    def keep_graph_finalization(self) -> Callable[[], None]:
        graph = tf.compat.v1.get_default_graph()
        if graph.finalized:
            return lambda: None  # A graph finalized before the session stays so.
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

    def make_backend(self, sess: Session, follow_step: bool) -> GraphBackend:
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
        """Under the session's graph."""
        graph = tf.compat.v1.get_default_graph()
        if isinstance(target, str):
            return _graph_element(owner, argument, graph, target)
        if callable(target) and not isinstance(target, (tf.Tensor, tf.Variable, tf.Operation)):
            raise TypeError(
                f"{owner}: a callable {argument} only works in eager mode; in graph mode pass "
                f"the tensor or its name, got {target!r}."
            )
        if getattr(target, "graph", None) is not graph:
            raise ValueError(
                f"{owner}: {argument} {target!r} belongs to another graph than the session's "
                f"({graph}); create the hook's tensors in the graph the session runs."
            )
        return target


GRAPH = GraphMode()


class TensorNotFoundError(KeyError, ValueError):
    """A hook names a tensor that is not in the graph.

    A `KeyError` as in TensorFlow, and a `ValueError` like other bad input.
    """

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def _graph_element(
    owner: str, argument: str, graph: tf.Graph, name: str
) -> tf.Tensor | tf.Operation:
    full_name = name if ":" in name else f"{name}:0"
    try:
        element = graph.as_graph_element(full_name)
    except (KeyError, ValueError) as error:
        reason = error.args[0] if error.args else error
        raise TensorNotFoundError(
            f"{owner}: {argument} {name!r} names no tensor of the graph. {reason}"
        ) from None
    if ":" not in name and _exists(graph, f"{name}:1"):
        raise ValueError(
            f"{owner}: the name {name!r} is ambiguous, as this operation has multiple "
            f"outputs (at least 2); name one of them, e.g. {full_name!r}."
        )
    return element


def _exists(graph: tf.Graph, name: str) -> bool:
    try:
        graph.as_graph_element(name)
    except (KeyError, ValueError):
        return False
    return True
