"""The one place where checkpoint saving is chosen by mode.

Saving differs by nature between the modes (a graph `Saver` writing the
session's variables, or an eager `tf.train.Checkpoint` of objects), so
`CheckpointSaverHook` asks `make_saving` once, in `begin()`, and from then on
speaks only to the `Saving` it got.
"""

from __future__ import annotations

from typing import Any, Protocol

from monsession.plugins import in_eager_mode


class Saving(Protocol):
    """What `CheckpointSaverHook` needs from a way of saving."""

    def after_create_session(self, session: Any) -> None:
        """Called once the session exists, before its first save."""

    def prefix(self, step: int) -> str:
        """The path prefix that `save(session, step)` will give the checkpoint."""

    def holds(self, step: int) -> bool:
        """Whether the directory's latest checkpoint is the one of `step`."""

    def save(self, session: Any, step: int) -> str:
        """Saves a checkpoint for `step`; returns its path prefix."""

    @property
    def background(self) -> bool:
        """Whether `save` returns before the files are written (a thread writes them)."""

    def finish(self) -> None:
        """Returns once the last save is completely written; raises its error once if it failed."""

    def end(self) -> None:
        """Called once from the hook's `end()` or `on_failure()`, after its last save."""


def make_saving(
    checkpoint_dir: str,
    checkpoint_basename: str,
    saver: Any,
    scaffold: Any,
    *,
    save_graph_def: bool,
    max_to_keep: int | None,
    async_save: bool | None,
) -> Saving:
    """The `Saving` for the current mode: graph `Saver` or eager `tf.train.Checkpoint`.

    Args:
      checkpoint_dir: The directory to save into.
      checkpoint_basename: The file prefix of the checkpoints.
      saver: The hook's `saver` argument, or `None`.
      scaffold: The hook's `scaffold` argument, or `None`. Without either
        (or a scaffold without saver), eager mode saves the one
        `tf.train.Checkpoint` of the SAVERS collection (`collection_state`).
      save_graph_def: Graph mode: whether to write ``graph.pbtxt`` and ``.meta`` files.
      max_to_keep: Eager mode: how many checkpoints to keep.
      async_save: Whether to write in a background thread (`None`: in eager
        mode only).

    Raises:
      TypeError: If `saver` (or the scaffold's) does not fit the mode.
      ValueError: If `async_save` is asked for in graph mode.
    """
    if in_eager_mode():
        from monsession_hooks_checkpoint._eager_saving import EagerSaving, collection_state

        state = saver if saver is not None or scaffold is None else scaffold.saver
        if state is None:
            state = collection_state()
        return EagerSaving(
            state, checkpoint_dir, checkpoint_basename, max_to_keep, async_save is not False
        )
    from monsession_hooks_checkpoint._graph_saving import GraphSaving

    return GraphSaving(
        checkpoint_dir, checkpoint_basename, saver, scaffold, save_graph_def, bool(async_save)
    )
