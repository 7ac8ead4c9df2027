"""The pluggy hook specifications that hook families implement, and the checks of their answers.

A hook family is a distribution whose entry point in the ``monsession`` group
names a module (or object) implementing them with `monsession.hookimpl`.
pluggy discovers and assembles hooks, never runs the training loop. A check
returns the answer or raises `TypeError` naming the hook and what was expected.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence
from typing import Any, TypeAlias, TypeGuard, TypeVar

import pluggy

PROJECT_NAME = "monsession"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)
"""The marker of a plugin's hook implementations: `@monsession.hookimpl` (pluggy's)."""

# Positions of `MonitoredTrainingSession`'s default hooks, in TensorFlow's order:
# after the chief-only hooks, before the user's `hooks`.
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

    `USE_DEFAULT` values are TensorFlow's defaults, `summary_dir` falls back
    to `checkpoint_dir`, and `explicit` names the arguments the caller passed.

    `saves_with_chief` is true only on a non-chief worker that must take part
    in the chief's saves, which may run collective ops (eager, under
    `tf.distribute.MultiWorkerMirroredStrategy`). `checkpoint_dir` is then the
    chief's (read only) and `summary_dir` `None`: a family that saves saves on
    the chief's steps into a temporary directory it removes; others add nothing.
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
      arguments: The `MonitoredTrainingSession` arguments that turn it on, e.g.
        ``("save_summaries_steps", "save_summaries_secs")``. If the user's hooks hold an
        instance of the same class, both are kept (as in TensorFlow) with a warning, once per
        process, to pass these arguments as `None`. Empty: no such check.
    """

    hook: Any
    order: int = ORDER_OTHER
    arguments: tuple[str, ...] = ()


@hookspec
def monsession_hook_classes() -> Sequence[type | str]:
    """Returns the hook classes this family provides.

    Each is a class or a lazy reference ``"package.module:ClassName"`` (which
    keeps `monsession plugins` and `import monsession.hooks` from importing
    TensorFlow); users import it from `monsession.hooks` by its class name.

    Example::

        @monsession.hookimpl
        def monsession_hook_classes():
            return ["monsession_hooks_summary._summary_saver:SummarySaverHook"]
    """
    return ()


@hookspec
def monsession_other_classes() -> Sequence[type | str]:
    """Returns the classes this family provides that are not hooks.

    Listeners, caches, errors, in the forms of `monsession_hook_classes`:
    imported from `monsession.hooks`, listed apart by `monsession plugins`.

    Example::

        @monsession.hookimpl
        def monsession_other_classes():
            return ["monsession_hooks_summary._writer_cache:SummaryWriterCache"]
    """
    return ()


@hookspec
def monsession_training_arguments() -> Sequence[str]:
    """Returns the `MonitoredTrainingSession` arguments this family serves.

    Core names the distribution to install to a user who sets one without it.

    Example::

        @monsession.hookimpl
        def monsession_training_arguments():
            return ["save_checkpoint_secs", "save_checkpoint_steps"]
    """
    return ()


@hookspec
def monsession_default_hooks(settings: TrainingSettings) -> Sequence[DefaultHook] | None:
    """Returns the default hooks this family adds to `MonitoredTrainingSession`.

    Called once per `MonitoredTrainingSession` call on the chief (workers run
    only the user's `hooks`, as in TensorFlow); under a multi-worker strategy
    in eager mode also on the other workers, with ``settings.saves_with_chief``
    true: return nothing there unless your hooks must run on every worker.

    A `ValueError` or `TypeError` naming a bad argument of the user's, and a
    `DirectoryLockedError` from `lock_checkpoint_dir`, reach the user as they
    are. Any other exception is your plugin's failure: reported with its
    name, its hooks left out (fatal in strict mode).

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


# --- what an implementation answers, asked alone, and the check of each answer ---

Answer: TypeAlias = object
"""An item a plugin's hook implementation returned, before it is checked."""

ClassRef = tuple[str, "type | str"]
"""`(class name, class or lazy reference "package.module:QualName")`."""

_LAZY_REF = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")
T = TypeVar("T")


def ask_one(
    manager: pluggy.PluginManager, hook_name: str, plugin: str, **kwargs: object
) -> list[Answer]:
    """Calls one plugin's implementations of `hook_name` through pluggy; their items, flattened."""
    others = [
        registered
        for name, registered in manager.list_name_plugin()
        if name != plugin and registered is not None
    ]
    answers = manager.subset_hook_caller(hook_name, others)(**kwargs)
    return [item for answer in answers for item in as_sequence(answer, hook_name)]


def as_sequence(answer: Answer, hook_name: str) -> Sequence[Answer]:
    """`answer` if it is a list or tuple of items, else `TypeError`."""
    if isinstance(answer, (str, bytes)) or not isinstance(answer, Sequence):
        raise TypeError(f"Returned {answer!r} from {hook_name}; expected a list or None.")
    return answer


def class_refs(
    items: Sequence[Answer], hook_name: str = "monsession_hook_classes"
) -> list[ClassRef]:
    """`(class name, ref)` for each item a plugin returned from `hook_name`."""
    expected = "a class or a 'package.module:ClassName' string"
    return [
        (ref.__name__, ref)
        if isinstance(ref, type)
        else (ref.partition(":")[2].rpartition(".")[2], ref)
        for ref in _checked(items, _is_class_ref, hook_name, expected)
    ]


def other_class_refs(items: Sequence[Answer]) -> list[ClassRef]:
    """`(class name, ref)` for each item a plugin returned from monsession_other_classes."""
    return class_refs(items, "monsession_other_classes")


def argument_names(items: Sequence[Answer]) -> list[str]:
    """Checks the items a plugin returned from monsession_training_arguments."""
    expected = "argument names of MonitoredTrainingSession such as 'save_checkpoint_steps'"
    return _checked(items, _is_argument_name, "monsession_training_arguments", expected)


def checked_default_hooks(items: Sequence[Answer]) -> list[DefaultHook]:
    """Checks the items a plugin returned from monsession_default_hooks."""
    expected = (
        "DefaultHook(hook, order, arguments) items with an int order and a tuple of argument "
        "names, e.g. [DefaultHook(MyHook(), ORDER_OTHER)]"
    )
    return _checked(items, _is_default_hook, "monsession_default_hooks", expected)


def _checked(
    items: Sequence[Answer], valid: Callable[[Answer], TypeGuard[T]], hook_name: str, expected: str
) -> list[T]:
    """`items` if each is `valid`, else `TypeError` naming the first that is not."""
    checked: list[T] = []
    for item in items:
        if not valid(item):
            raise TypeError(f"Returned {item!r} from {hook_name}; expected {expected}.")
        checked.append(item)
    return checked


def _is_class_ref(item: Answer) -> TypeGuard[type | str]:
    return isinstance(item, type) or (isinstance(item, str) and bool(_LAZY_REF.match(item)))


def _is_argument_name(item: Answer) -> TypeGuard[str]:
    return isinstance(item, str) and item.isidentifier()


def _is_default_hook(item: Answer) -> TypeGuard[DefaultHook]:
    return (
        isinstance(item, DefaultHook)
        and isinstance(item.order, int)
        and isinstance(item.arguments, tuple)
        and all(isinstance(argument, str) for argument in item.arguments)
    )


def check_registrations(manager: pluggy.PluginManager, plugin: str) -> None:
    """Asks `plugin` every registration hook; `TypeError` if an answer has the wrong type."""
    class_refs(ask_one(manager, "monsession_hook_classes", plugin))
    other_class_refs(ask_one(manager, "monsession_other_classes", plugin))
    argument_names(ask_one(manager, "monsession_training_arguments", plugin))
