"""`current_mode()`: the `Mode` of the code running now (see `in_eager_mode`)."""

from __future__ import annotations

from monsession._api._types import Fetches, Unchecked, in_eager_mode
from monsession._backends._mode import Mode


def current_mode() -> Mode:
    """The mode of the code running now: eager unless a graph is the default."""
    if in_eager_mode():
        from monsession._backends._eager_mode import EAGER

        return EAGER
    from monsession._backends._graph_mode import GRAPH

    return GRAPH


def resolve_fetch(owner: str, argument: str, target: Unchecked) -> Fetches:
    """Returns what a hook fetches for `target`, checked for the current mode.

    Graph mode (call it in `begin()`, under the session's graph): a string
    names a tensor of the default graph (``"loss"`` means ``"loss:0"``; an
    op with several outputs must be named with the index); a tensor, op or
    variable must belong to the default graph; callables are refused. Eager
    mode: a string names an entry of the mapping the step returns, and
    `tf.Variable`s, tensors and zero-argument callables are kept.

    Args:
      owner: The hook's name, for messages.
      argument: The constructor argument `target` came from, for messages.
      target: What the hook was given.

    Returns:
      The fetch to put in `SessionRunArgs`.

    Raises:
      TensorNotFoundError: (a `KeyError` and `ValueError`) If a name is not
        in the graph.
      ValueError: If a name is ambiguous or a tensor belongs to another graph.
      TypeError: If `target` is of a type the mode cannot fetch.
    """
    return current_mode().resolve_fetch(owner, argument, target)
