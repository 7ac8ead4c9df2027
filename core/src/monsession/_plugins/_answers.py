"""What plugins answer: asking one plugin alone, and checking an answer's type.

A registration hook answers with classes or lazy class references, argument
names or `DefaultHook`s; each check below returns the answer in a checked
form or raises `TypeError` naming the hook and what was expected. The
callers decide what a bad answer costs (`_plugin_manager` when loading,
`_calling` when called). Nothing here imports TensorFlow.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import TypeAlias, TypeGuard, TypeVar

import pluggy

from monsession._plugins._hookspecs import DefaultHook

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


def default_hook_items(items: Sequence[Answer]) -> list[DefaultHook]:
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
