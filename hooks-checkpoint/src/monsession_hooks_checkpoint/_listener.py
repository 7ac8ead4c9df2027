"""`CheckpointSaverListener`: callbacks around the saves of `CheckpointSaverHook`."""

from __future__ import annotations

from typing import Any

LISTENER_METHODS = ("begin", "before_save", "after_save", "end")


class CheckpointSaverListener:
    """Acts before or after each checkpoint that `CheckpointSaverHook` writes.

    Override what you need; every method does nothing by default:

    * `begin()`: once, from the hook's `begin()` (graph mode: ops may still be
      added to the graph).
    * `before_save(session, global_step_value)`: before each save, once the
      previous checkpoint is completely written.
    * `after_save(session, global_step_value)`: after each save. Return `True`
      to ask the training loop to stop.
    * `end(session, global_step_value)`: once, from the hook's `end()`, after
      its final save.

    Example::

        class ExportOnSave(CheckpointSaverListener):
            def after_save(self, session, global_step_value):
                export(tf.train.latest_checkpoint(checkpoint_dir))
                return global_step_value >= 10_000   # stop when done

        CheckpointSaverHook(checkpoint_dir, save_steps=1000, listeners=[ExportOnSave()])

    In eager mode `session` is the monitored session's `EagerSession`. A
    checkpoint written in the background (eager mode's default) is complete
    when `after_save` runs, which is when the hook confirms it: before the
    next save, in `end()` or `on_failure()`, or when a recovery re-creates
    the session; never at a step that depends on the writer's speed. A
    process killed before that point calls no `after_save` for it (the
    checkpoint, once written, is kept and restored). With
    `async_save=False` every `after_save` runs before the saving step
    returns, as in graph mode.
    """

    def begin(self) -> None:
        """Called once, before the session is used."""

    def before_save(self, session: Any, global_step_value: int) -> None:
        """Called before each checkpoint is saved."""

    def after_save(self, session: Any, global_step_value: int) -> bool | None:
        """Called after each checkpoint is saved; return `True` to request a stop."""
        return None

    def end(self, session: Any, global_step_value: int) -> None:
        """Called once at the end of the session, after the last save."""
