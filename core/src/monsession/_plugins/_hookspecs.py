"""The pluggy hook specifications that hook families implement.

A hook family is a distribution with an entry point in the ``monsession``
group. The entry point names a module (or object) holding implementations of
the specifications below, marked with `monsession.hookimpl`. Each docstring
here is the reference documentation of its hook.

pluggy is used to discover and assemble hooks, never inside the training
loop: `before_run`/`after_run` are called by a plain loop.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import pluggy

PROJECT_NAME = "monsession"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)
"""The marker of a plugin's hook implementations: `@monsession.hookimpl` (pluggy's)."""

# Positions of the default hooks of `MonitoredTrainingSession`, in
# TensorFlow's order. Chief-only hooks come before all of them and the
# user's `hooks` after all of them.
ORDER_STEP_COUNTER = 100
"""The position of the step counter among the default hooks."""
ORDER_SUMMARY_SAVER = 200
"""The position of the summary saver among the default hooks."""
ORDER_CHECKPOINT_SAVER = 300
"""The position of the checkpoint saver among the default hooks."""
ORDER_OTHER = 1000
"""The position of any other default hook (after TensorFlow's three)."""


@dataclasses.dataclass(frozen=True)
class TrainingSettings:
    """The resolved arguments of a `MonitoredTrainingSession` call.

    `USE_DEFAULT` values are already replaced by TensorFlow's defaults, and
    `summary_dir` already falls back to `checkpoint_dir`. `explicit` names the
    arguments the caller passed.

    `saves_with_chief` is true only on a worker that is not the chief but must
    take part in the chief's checkpoint saves, because saving may run
    collective ops (an eager job under `tf.distribute.MultiWorkerMirroredStrategy`).
    `checkpoint_dir` is then the chief's directory (for reading only) and
    `summary_dir` is `None`: a family that saves must save on exactly the
    chief's steps into a temporary directory that it removes; any other family
    adds nothing.
    """

    master: str
    is_chief: bool
    checkpoint_dir: str | None
    summary_dir: str | None
    scaffold: Any
    save_checkpoint_secs: float | None
    save_checkpoint_steps: int | None
    save_summaries_steps: int | None
    save_summaries_secs: float | None
    log_step_count_steps: int | None
    save_graph_def: bool
    config: Any
    max_wait_secs: float
    eager: bool
    explicit: frozenset[str] = frozenset()
    saves_with_chief: bool = False


@dataclasses.dataclass(frozen=True)
class DefaultHook:
    """A hook a family adds to `MonitoredTrainingSession`.

    Args:
      hook: The `SessionRunHook` instance.
      order: Its position among default hooks; see the ``ORDER_*`` constants.
      arguments: The `MonitoredTrainingSession` arguments that turn it on,
        e.g. ``("save_summaries_steps", "save_summaries_secs")``. When the
        user's `hooks` or `chief_only_hooks` hold an instance of the hook's
        class (a hook of the same kind, which saves the same things again),
        `MonitoredTrainingSession` keeps both, as TensorFlow does, and warns
        once per process, telling the user to pass these arguments as
        `None` to keep only their own. Empty: no such check.
    """

    hook: Any
    order: int = ORDER_OTHER
    arguments: tuple[str, ...] = ()


@hookspec
def monsession_hook_classes() -> Sequence[type | str]:
    """Returns the hook classes this family provides.

    Each item is a class or a lazy reference ``"package.module:ClassName"``.
    Lazy references keep `monsession plugins` and `import monsession.hooks`
    from importing TensorFlow. The class name is the name users import from
    `monsession.hooks`.

    Example::

        @monsession.hookimpl
        def monsession_hook_classes():
            return ["monsession_hooks_summary._summary_saver:SummarySaverHook"]
    """
    return ()


@hookspec
def monsession_other_classes() -> Sequence[type | str]:
    """Returns the classes this family provides that are not hooks.

    Listeners, caches, errors: users import them from `monsession.hooks`
    like the hook classes (same forms: a class or a lazy reference
    ``"package.module:ClassName"``), and `monsession plugins` lists them
    apart from the hook classes.

    Example::

        @monsession.hookimpl
        def monsession_other_classes():
            return ["monsession_hooks_summary._writer_cache:SummaryWriterCache"]
    """
    return ()


@hookspec
def monsession_training_arguments() -> Sequence[str]:
    """Returns the `MonitoredTrainingSession` arguments this family serves.

    Core uses the answers to tell a user who set, say,
    ``save_checkpoint_steps=100`` without the checkpoint family installed
    which distribution to install.

    Example::

        @monsession.hookimpl
        def monsession_training_arguments():
            return ["save_checkpoint_secs", "save_checkpoint_steps"]
    """
    return ()


@hookspec
def monsession_default_hooks(settings: TrainingSettings) -> Sequence[DefaultHook] | None:
    """Returns the default hooks this family adds to `MonitoredTrainingSession`.

    Called once per `MonitoredTrainingSession` call, on the chief (a worker
    runs only the user's `hooks`, as in TensorFlow). Under a multi-worker
    `tf.distribute` strategy in eager mode it is also called on the other
    workers, with ``settings.is_chief`` false and ``settings.saves_with_chief``
    true: return nothing there unless your hooks must run on every worker.

    Raise `ValueError` (or `TypeError`) for an argument of the user's that
    your hooks cannot accept, naming it: it reaches the user as it is, and
    so does `DirectoryLockedError` from `lock_checkpoint_dir` (a hook that
    locks its directory as it is built). Any other exception is a failure
    of your plugin: it is reported with your plugin's name and your hooks
    are left out (in strict mode it is fatal).

    Args:
      settings: The resolved `TrainingSettings` of the call.

    Example::

        @monsession.hookimpl
        def monsession_default_hooks(settings):
            if not (settings.checkpoint_dir and settings.save_checkpoint_steps):
                return None
            hook = CheckpointSaverHook(settings.checkpoint_dir,
                                       save_steps=settings.save_checkpoint_steps)
            return [DefaultHook(hook, ORDER_CHECKPOINT_SAVER,
                                arguments=("save_checkpoint_steps",))]
    """
    return None
