"""Graph mode: saving with a `tf.compat.v1.train.Saver`, as TensorFlow does."""

from __future__ import annotations

import os
from typing import Any

import tensorflow as tf

_v1 = tf.compat.v1


def _meta_graph_def(graph: Any, saver_def: Any) -> Any:
    """The MetaGraphDef TensorBoard shows: the graph with shapes and the saver."""
    from tensorflow.python.framework import meta_graph

    return meta_graph.create_meta_graph_def(
        graph_def=graph.as_graph_def(add_shapes=True), saver_def=saver_def
    )


class GraphSaving:
    """Writes checkpoints, the graph and CHECKPOINT session logs in graph mode.

    Args:
      checkpoint_dir: The directory of the checkpoints and the event file.
      save_path: The checkpoint prefix, ``<checkpoint_dir>/<basename>``.
      saver: The `Saver` to use, or `None` to take the scaffold's or the
        graph's single saver when first needed.
      scaffold: A `Scaffold` whose saver to use, or `None`.
      save_graph_def: Whether to write ``graph.pbtxt`` and ``.meta`` files.
    """

    def __init__(
        self, checkpoint_dir: str, save_path: str, saver: Any, scaffold: Any, save_graph_def: bool
    ) -> None:
        self._checkpoint_dir = checkpoint_dir
        self._save_path = save_path
        self._saver = saver
        self._scaffold = scaffold
        self._save_graph_def = save_graph_def
        self._summary_writer = _v1.summary.FileWriterCache.get(checkpoint_dir)

    def saver(self) -> Any:
        """The saver: the given one, the scaffold's, or the graph's only one.

        Raises:
          RuntimeError: If none is given and the SAVERS collection does not
            hold exactly one.
        """
        if self._saver is not None:
            return self._saver
        if self._scaffold is not None:
            return self._scaffold.saver
        savers = _v1.get_collection(_v1.GraphKeys.SAVERS)
        if len(savers) != 1:
            problem = "No items" if not savers else "More than one item"
            raise RuntimeError(
                f"CheckpointSaverHook: {problem} in collection {_v1.GraphKeys.SAVERS}. Add one "
                "saver to the collection, or pass saver= or scaffold= to the hook."
            )
        self._saver = savers[0]
        return self._saver

    def after_create_session(self, session: Any) -> None:
        """Writes ``graph.pbtxt`` (if asked) and the graph to the event file."""
        graph = _v1.get_default_graph()
        if self._save_graph_def:
            tf.io.write_graph(
                graph.as_graph_def(add_shapes=True), self._checkpoint_dir, "graph.pbtxt"
            )
        saver = self.saver()
        self._summary_writer.add_graph(graph)
        self._summary_writer.add_meta_graph(
            _meta_graph_def(graph, saver.saver_def if saver is not None else None)
        )

    def checkpoint_path(self, step: int) -> str:
        """The prefix of the checkpoint of `step`."""
        return f"{self._save_path}-{step}"

    def latest_checkpoint(self) -> str | None:
        """The directory's latest checkpoint, as recorded in its state file."""
        return tf.train.latest_checkpoint(self._checkpoint_dir)

    def save(self, session: Any, step: int) -> str:
        """Saves a checkpoint for `step` and logs it in the event file."""
        path = self.saver().save(
            session, self._save_path, global_step=step, write_meta_graph=self._save_graph_def
        )
        self._summary_writer.add_session_log(
            _v1.SessionLog(status=_v1.SessionLog.CHECKPOINT, checkpoint_path=self._save_path),
            step,
        )
        return str(path)

    def wait(self) -> None:
        """Saves are synchronous in graph mode: nothing to wait for."""

    def end(self) -> None:
        """Flushes the event file."""
        self._summary_writer.flush()


def same_checkpoint(first: str | None, second: str) -> bool:
    """Whether two checkpoint prefixes name the same files."""
    if first is None:
        return False
    if "://" in first or "://" in second:
        return first == second
    return os.path.abspath(first) == os.path.abspath(second)
