"""What the logging hooks watch: tags, the things they name, and their text.

Shared by `LoggingTensorHook` and `ProgressBarHook`. Tags and their order are
fixed when a hook is built; the things they name are resolved in `begin()`
with `monsession.plugins.resolve_fetch`, which knows the mode.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

import numpy as np

import monsession

Formatter = Callable[[dict[Hashable, Any]], str]


@dataclasses.dataclass(frozen=True)
class Watched:
    """The `tensors` argument of a hook, split into tags and targets.

    Attributes:
      tags: The tags, in the order they are logged.
      targets: What each tag names, as the user gave it.
      arguments: How each target is called in error messages
        (``"tensors['loss']"``, ``"tensors[0]"``).
    """

    tags: list[Hashable]
    targets: list[Any]
    arguments: list[str]

    def resolve(self, hook: str) -> list[Any]:
        """Returns what the hook fetches for each tag, checked for the current mode.

        Call it in `begin()`. See `monsession.plugins.resolve_fetch`: a graph name
        becomes its tensor (``"loss"`` means ``"loss:0"``); an eager name
        stays a name, an entry of the mapping the step returns.

        Raises:
          monsession.plugins.TensorNotFoundError: (a `KeyError`) If a graph name is
            not in the graph.
          ValueError: If a graph name is ambiguous or a tensor belongs to
            another graph.
          TypeError: If a target is of a type the mode cannot fetch.
        """
        return [
            monsession.plugins.resolve_fetch(hook, argument, target)
            for argument, target in zip(self.arguments, self.targets, strict=True)
        ]


def watched(hook: str, tensors: Any) -> Watched:
    """Splits the `tensors` argument of a hook into tags and what they name.

    Args:
      hook: The hook's class name, for error messages.
      tensors: A dict of tags to tensors or names (tags are logged in sorted
        order), or a list of tensors or names (each is its own tag, in list
        order; an eager `tf.Variable` is tagged by its `name`).

    Returns:
      The tags, targets and their names for messages.

    Raises:
      TypeError: If `tensors` is neither a dict nor a list/tuple, or a list
        item cannot serve as its own tag.
    """
    if isinstance(tensors, Mapping):
        tags = sorted(tensors)
        return Watched(tags, [tensors[tag] for tag in tags], [f"tensors[{t!r}]" for t in tags])
    if isinstance(tensors, (str, bytes)) or not isinstance(tensors, Sequence):
        raise TypeError(
            f"{hook}: tensors must be a dict of tags to tensors/names or a list of "
            f"tensors/names, got {tensors!r} of type {type(tensors).__name__}."
        )
    return Watched(
        [_own_tag(hook, item) for item in tensors],
        list(tensors),
        [f"tensors[{index}]" for index in range(len(tensors))],
    )


def _own_tag(hook: str, item: Any) -> Hashable:
    if isinstance(item, str):
        return item
    try:
        hash(item)
    except TypeError:
        name = _variable_name(item)
        if name is None:
            raise TypeError(
                f"{hook}: {item!r} in the tensors list has no name to use as its tag; "
                "pass tensors as a dict of tags to tensors instead."
            ) from None
        return name
    return item


def _variable_name(item: Any) -> str | None:
    import tensorflow as tf

    if isinstance(item, tf.Variable):
        return str(item.name)
    return None


def is_step_output(fetch: Any) -> bool:
    """Whether a resolved fetch names an entry of the mapping the step returns.

    Only eager mode keeps names after `monsession.plugins.resolve_fetch` (graph mode
    turns them into tensors). Such a value exists only while a step runs:
    `end()` cannot run it again.
    """
    return isinstance(fetch, str)


def default_format(tags: Sequence[Hashable], values: Mapping[Hashable, Any]) -> str:
    """``"tag = value, ..."`` in tag order, NumPy values without scientific notation."""
    with np.printoptions(suppress=True):
        return ", ".join(f"{tag!s} = {values[tag]!s}" for tag in tags)


def short_format(values: Mapping[Hashable, Any]) -> dict[str, str]:
    """Compact texts for a progress bar: floats with 4 significant digits."""
    return {str(tag): _short(value) for tag, value in values.items()}


def _short(value: Any) -> str:
    array = np.asarray(value)
    if array.ndim == 0 and np.issubdtype(array.dtype, np.floating):
        return f"{array.item():.4g}"
    with np.printoptions(suppress=True, precision=4, threshold=8):
        return f"{value!s}"
