"""What the logging hooks watch: tags, the things they name, and their text.

Shared by `LoggingTensorHook` and `ProgressBarHook`. Tags and their order are
fixed when a hook is built; the things they name are resolved in `begin()`,
where the mode (graph or eager) is known.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

import numpy as np


class TensorNotFoundError(KeyError):
    """A hook names a tensor that is not in the graph (a `KeyError`, as in TensorFlow)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def tag_and_targets(hook: str, tensors: Any) -> tuple[list[Hashable], list[Any]]:
    """Splits the `tensors` argument of a hook into tags and what they name.

    Args:
      hook: The hook's class name, for error messages.
      tensors: A dict of tags to tensors or names (tags are logged in sorted
        order), or a list of tensors or names (each is its own tag, in list
        order; an eager `tf.Variable` is tagged by its `name`).

    Returns:
      `(tags, targets)`: two lists of the same length.

    Raises:
      TypeError: If `tensors` is neither a dict nor a list/tuple, or a list
        item cannot serve as its own tag.
    """
    if isinstance(tensors, Mapping):
        tags = sorted(tensors)
        return tags, [tensors[tag] for tag in tags]
    if isinstance(tensors, (str, bytes)) or not isinstance(tensors, Sequence):
        raise TypeError(
            f"{hook}: tensors must be a dict of tags to tensors/names or a list of "
            f"tensors/names, got {tensors!r} of type {type(tensors).__name__}."
        )
    return [_own_tag(hook, item) for item in tensors], list(tensors)


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


def resolve(hook: str, targets: Sequence[Any], eager: bool) -> list[Any]:
    """Turns the targets of a hook into what it fetches, checking each one.

    Graph mode: a name is looked up in the default graph (``"x"`` means
    ``"x:0"``); a tensor, op or variable must belong to the default graph.
    Eager mode: a name stays a name (an entry of the mapping the step
    returns, checked when the step runs); variables, tensors and zero-argument
    callables are kept.

    Args:
      hook: The hook's class name, for error messages.
      targets: What the tags name.
      eager: Whether the session runs in eager mode.

    Returns:
      The fetches, in the same order.

    Raises:
      TensorNotFoundError: (a `KeyError`) In graph mode, if a name is not in
        the graph.
      ValueError: In graph mode, if a name is ambiguous or an object belongs
        to another graph.
      TypeError: In eager mode, if a target is of an unsupported type.
    """
    check = _check_eager_target if eager else _graph_element
    return [check(hook, target) for target in targets]


def _graph_element(hook: str, target: Any) -> Any:
    import tensorflow as tf

    graph = tf.compat.v1.get_default_graph()
    if not isinstance(target, str):
        if getattr(target, "graph", None) is not graph:
            raise ValueError(
                f"{hook}: {target!r} should have graph attribute that is equal to the current "
                f"graph {graph}; create the hook's tensors in the graph the session runs."
            )
        return target
    name = target if ":" in target else target + ":0"
    try:
        element = graph.as_graph_element(name)
    except (KeyError, ValueError) as error:
        reason = error.args[0] if error.args else error
        raise TensorNotFoundError(
            f"{hook}: the tensor {target!r} does not exist in the graph. {reason}"
        ) from None
    if ":" not in target and _exists(graph, target + ":1"):
        raise ValueError(
            f"{hook}: the name {target!r} is ambiguous, as this operation has multiple "
            f"outputs (at least 2); name one of them, e.g. {target + ':0'!r}."
        )
    return element


def _exists(graph: Any, name: str) -> bool:
    try:
        graph.as_graph_element(name)
    except (KeyError, ValueError):
        return False
    return True


def _check_eager_target(hook: str, target: Any) -> Any:
    import tensorflow as tf

    if isinstance(target, (str, tf.Variable, tf.Tensor)) or callable(target):
        return target
    raise TypeError(
        f"{hook}: in eager mode a tensor to log must be the name of an entry of the mapping the "
        f"step returns, a tf.Variable, a tensor or a zero-argument callable; got {target!r}."
    )


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


Formatter = Callable[[dict[Hashable, Any]], str]
