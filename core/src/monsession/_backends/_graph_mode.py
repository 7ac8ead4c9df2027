"""Graph mode (`tf.compat.v1`): what a session does around `Session.run`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import tensorflow as tf

from monsession import _tf_compat
from monsession._backends._backend import prepare_graph
from monsession._backends._fetches import resolve_graph_fetch


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

    def prepare_graph(self) -> None:
        prepare_graph(tf.compat.v1.get_default_graph())

    def start_queue_runners(self, sess: Any, coord: Any) -> None:
        if tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.QUEUE_RUNNERS):
            tf.compat.v1.train.start_queue_runners(sess=sess, coord=coord)

    def check_call(self, owner: str) -> None:
        raise RuntimeError(
            f"{owner}.call() runs a TF2 step function (eager mode); in graph mode use "
            "run(fetches, feed_dict)."
        )

    def resolve_fetch(self, owner: str, argument: str, target: Any) -> Any:
        return resolve_graph_fetch(owner, argument, target)


def _keep_finalized() -> None:
    """A graph finalized before the session stays finalized."""


GRAPH = GraphMode()
