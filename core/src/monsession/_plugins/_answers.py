"""What plugins answer: asking one plugin alone, and checking an answer's type.

A registration hook answers with classes or lazy class references, argument
names or `DefaultHook`s; each check below returns the answer in a checked
form or raises `TypeError` naming the hook and what was expected. The
callers decide what a bad answer costs (`_plugin_manager` when loading,
`_calling` when called). Nothing here imports TensorFlow.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import pluggy

from monsession._plugins._hookspecs import DefaultHook

ClassRef = tuple[str, "type | str"]
"""`(class name, class or lazy reference "package.module:QualName")`."""

_LAZY_REF = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")


def ask_one(
    manager: pluggy.PluginManager, hook_name: str, plugin: str, **kwargs: object
) -> list[object]:
    """Calls one plugin's implementations of `hook_name` through pluggy; their items, flattened."""
    others = [
        registered
        for name, registered in manager.list_name_plugin()
        if name != plugin and registered is not None
    ]
    answers = manager.subset_hook_caller(hook_name, others)(**kwargs)
    return [item for answer in answers for item in as_sequence(answer, hook_name)]


def as_sequence(answer: object, hook_name: str) -> Sequence[object]:
    """`answer` if it is a list or tuple of items, else `TypeError`."""
    if isinstance(answer, (str, bytes)) or not isinstance(answer, Sequence):
        raise TypeError(f"Returned {answer!r} from {hook_name}; expected a list or None.")
    return answer


def class_refs(
    items: Sequence[object], hook_name: str = "monsession_hook_classes"
) -> list[ClassRef]:
    """`(class name, ref)` for each item a plugin returned from `hook_name`."""
    refs: list[ClassRef] = []
    for ref in items:
        if isinstance(ref, type):
            refs.append((ref.__name__, ref))
        elif isinstance(ref, str) and _LAZY_REF.match(ref):
            refs.append((ref.partition(":")[2].rpartition(".")[2], ref))
        else:
            raise TypeError(
                f"Returned {ref!r} from {hook_name}; expected a class or a "
                "'package.module:ClassName' string."
            )
    return refs


def other_class_refs(items: Sequence[object]) -> list[ClassRef]:
    """`(class name, ref)` for each item a plugin returned from monsession_other_classes."""
    return class_refs(items, "monsession_other_classes")


def argument_names(items: Sequence[object]) -> list[str]:
    """Checks the items a plugin returned from monsession_training_arguments."""
    names = []
    for argument in items:
        if not (isinstance(argument, str) and argument.isidentifier()):
            raise TypeError(
                f"Returned {argument!r} from monsession_training_arguments; expected "
                "argument names of MonitoredTrainingSession such as 'save_checkpoint_steps'."
            )
        names.append(argument)
    return names


def default_hook_items(items: Sequence[object]) -> list[DefaultHook]:
    """Checks the items a plugin returned from monsession_default_hooks."""
    checked = []
    for item in items:
        if not (
            isinstance(item, DefaultHook)
            and isinstance(item.order, int)
            and isinstance(item.arguments, tuple)
            and all(isinstance(argument, str) for argument in item.arguments)
        ):
            raise TypeError(
                f"Returned {item!r} from monsession_default_hooks; expected DefaultHook(hook, "
                "order, arguments) items with an int order and a tuple of argument names, "
                "e.g. [DefaultHook(MyHook(), ORDER_OTHER)]."
            )
        checked.append(item)
    return checked


def check_registrations(manager: pluggy.PluginManager, plugin: str) -> None:
    """Asks `plugin` every registration hook; `TypeError` if an answer has the wrong type."""
    class_refs(ask_one(manager, "monsession_hook_classes", plugin))
    other_class_refs(ask_one(manager, "monsession_other_classes", plugin))
    argument_names(ask_one(manager, "monsession_training_arguments", plugin))
