"""Plugin registration for monsession-hooks-checkpoint.

This module must not import TensorFlow at import time: `monsession plugins`
lists the family without paying for it.
"""

from __future__ import annotations

import logging
from typing import Any

import monsession
from monsession.plugins import ORDER_CHECKPOINT_SAVER, DefaultHook, TrainingSettings

logger = logging.getLogger("monsession.checkpoint")

_TRAINING_ARGUMENTS = ("save_checkpoint_secs", "save_checkpoint_steps")


@monsession.hookimpl
def monsession_hook_classes() -> list[str]:
    """Returns a lazy reference to `CheckpointSaverHook`."""
    return ["monsession_hooks_checkpoint._checkpoint_saver:CheckpointSaverHook"]


@monsession.hookimpl
def monsession_other_classes() -> list[str]:
    """Returns a lazy reference to `CheckpointSaverListener` (not a hook)."""
    return ["monsession_hooks_checkpoint._listener:CheckpointSaverListener"]


@monsession.hookimpl
def monsession_training_arguments() -> list[str]:
    """Returns the `MonitoredTrainingSession` arguments this family serves."""
    return list(_TRAINING_ARGUMENTS)


def _positive(value: Any) -> Any:
    return value if value is not None and value > 0 else None


@monsession.hookimpl
def monsession_default_hooks(settings: TrainingSettings) -> list[DefaultHook] | None:
    """Adds a `CheckpointSaverHook` when `checkpoint_dir` and a schedule ask for one.

    As in TensorFlow: needs `checkpoint_dir` and a positive
    `save_checkpoint_secs` (default 600) or `save_checkpoint_steps`; `None` or
    0 turns saving off. In eager mode without `Scaffold(saver=...)` there is
    nothing to save: the default schedule is skipped with a warning, an
    explicit one raises.

    On the chief the hook takes the lock of `checkpoint_dir` here, before
    any hook's `begin()`, and holds it until its `end()` or `on_failure()`
    (`DirectoryLockedError` if another live process holds it).

    On a worker that is not the chief but `saves_with_chief` (eager
    `MultiWorkerMirroredStrategy`), adds a `WorkerCheckpointSaverHook`
    instead: the chief's saves, on the same steps, into a temporary directory
    that is removed at the end.

    Raises:
      ValueError: In eager mode, if `save_checkpoint_secs/steps` was set but
        the scaffold holds no `tf.train.Checkpoint`; on a `saves_with_chief`
        worker, if the schedule is in seconds.
      DirectoryLockedError: If another live process holds `checkpoint_dir`.
    """
    save_secs = _positive(settings.save_checkpoint_secs)
    save_steps = _positive(settings.save_checkpoint_steps)
    if not settings.checkpoint_dir or (save_secs is None and save_steps is None):
        return None
    if settings.eager and getattr(settings.scaffold, "saver", None) is None:
        message = (
            "MonitoredTrainingSession: in eager mode checkpoints need the state to save; pass "
            "scaffold=Scaffold(saver=tf.train.Checkpoint(model=..., optimizer=..., "
            "step=global_step))."
        )
        if settings.explicit & set(_TRAINING_ARGUMENTS):
            raise ValueError(message)
        logger.warning("%s Not saving checkpoints to %s.", message, settings.checkpoint_dir)
        return None
    if settings.saves_with_chief:
        return _worker_hooks(settings, save_steps)
    from monsession_hooks_checkpoint._checkpoint_saver import CheckpointSaverHook

    hook = CheckpointSaverHook(
        settings.checkpoint_dir,
        save_secs=save_secs,
        save_steps=save_steps,
        scaffold=settings.scaffold,
        save_graph_def=settings.save_graph_def,
    )
    # The hook owns the lock of the directory; taken now, before any hook's
    # begin(), a second chief fails before the hooks in front of it write.
    hook._lock_checkpoint_dir(chief=settings.is_chief)
    return [DefaultHook(hook, ORDER_CHECKPOINT_SAVER, arguments=_TRAINING_ARGUMENTS)]


def _worker_hooks(settings: TrainingSettings, save_steps: Any) -> list[DefaultHook]:
    if save_steps is None:
        raise ValueError(
            "MonitoredTrainingSession: workers that save with the chief need a schedule in "
            f"steps; got save_checkpoint_secs={settings.save_checkpoint_secs!r}. Pass "
            "save_checkpoint_steps."
        )
    from monsession_hooks_checkpoint._worker_saving import WorkerCheckpointSaverHook

    assert settings.checkpoint_dir is not None
    hook = WorkerCheckpointSaverHook(
        settings.checkpoint_dir, save_steps=int(save_steps), scaffold=settings.scaffold
    )
    return [DefaultHook(hook, ORDER_CHECKPOINT_SAVER)]
