"""Graph mode: saving with a `tf.compat.v1.train.Saver`, as TensorFlow does."""

from __future__ import annotations

import os
from typing import Any

import tensorflow as tf

import monsession
from monsession_hooks_checkpoint._directory import same_checkpoint
from monsession_hooks_checkpoint._eager_saving import is_object_checkpoint

_v1 = tf.compat.v1


class GraphSaving:
    """Writes checkpoints, the graph and CHECKPOINT session logs in graph mode.

    Args:
      checkpoint_dir: The directory of the checkpoints and the event file.
      checkpoint_basename: The file prefix of the checkpoints.
      saver: The `Saver` to use, or `None` to take the scaffold's or the
        graph's single saver when first needed.
      scaffold: A `Scaffold` whose saver to use, or `None`.
      save_graph_def: Whether to write ``graph.pbtxt`` and ``.meta`` files.
      async_save: Must be false: graph mode saves synchronously.

    Raises:
      TypeError: If `saver` is a `tf.train.Checkpoint` or `CheckpointManager`.
      ValueError: If `async_save` is true.
    """

    def __init__(
        self,
        checkpoint_dir: str,
        checkpoint_basename: str,
        saver: Any,
        scaffold: Any,
        save_graph_def: bool,
        async_save: bool = False,
    ) -> None:
        if async_save:
            raise ValueError(
                "CheckpointSaverHook: async_save=True needs eager mode; TensorFlow cannot save "
                "asynchronously in graph mode."
            )
        if is_object_checkpoint(saver):
            raise TypeError(
                "CheckpointSaverHook: in graph mode saver must be a tf.compat.v1.train.Saver, "
                f"got {saver!r}. Pass a tf.train.Checkpoint as Scaffold(saver=...) instead."
            )
        self._checkpoint_dir = checkpoint_dir
        self._save_path = os.path.join(checkpoint_dir, checkpoint_basename)
        self._saver = saver
        self._scaffold = scaffold
        self._save_graph_def = save_graph_def
        self._summary_writer = monsession.plugins.event_file_writer(checkpoint_dir)

    def _resolved_saver(self) -> Any:
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
        """Writes ``graph.pbtxt`` (if asked), the graph and the meta graph to the event file."""
        graph = _v1.get_default_graph()
        graph_def = graph.as_graph_def(add_shapes=True)
        if self._save_graph_def:
            tf.io.write_graph(graph_def, self._checkpoint_dir, "graph.pbtxt")
        saver = self._resolved_saver()
        self._summary_writer.add_graph(graph)
        self._summary_writer.add_meta_graph(
            _v1.train.export_meta_graph(
                graph_def=graph_def, saver_def=saver.saver_def if saver is not None else None
            )
        )

    def prefix(self, step: int) -> str:
        """``<checkpoint_dir>/<basename>-<step>``, as `Saver.save` names it."""
        return f"{self._save_path}-{step}"

    def holds(self, step: int) -> bool:
        """Whether the directory's latest checkpoint is ``<basename>-<step>``."""
        return same_checkpoint(
            tf.train.latest_checkpoint(self._checkpoint_dir), f"{self._save_path}-{step}"
        )

    def save(self, session: Any, step: int) -> str:
        """Saves a checkpoint for `step` and logs it in the event file."""
        path = self._resolved_saver().save(
            session, self._save_path, global_step=step, write_meta_graph=self._save_graph_def
        )
        self._summary_writer.add_session_log(
            _v1.SessionLog(status=_v1.SessionLog.CHECKPOINT, checkpoint_path=self._save_path),
            step,
        )
        return str(path)

    background = False  # Graph-mode saves are complete when `save` returns.

    def finish(self) -> None:
        """Nothing to wait for: graph-mode saves are synchronous."""

    def end(self) -> None:
        """Flushes the event file."""
        self._summary_writer.flush()
