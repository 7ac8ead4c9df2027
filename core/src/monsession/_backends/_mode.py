"""The execution mode: what differs between graph and eager around the steps.

`current_mode()` is the one place core asks TensorFlow which mode it runs
in. Everything that differs by mode before and around a session (building
the graph, resolving what hooks fetch, owning the global step, creating
and restoring the session, fusing steps) is a member of the
`Mode` it returns; per-step work is the `Backend`'s (`_backend`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import tensorflow as tf


class Mode(Protocol):
    """What one execution mode decides before and around a session's steps."""

    eager: bool
    """Whether this is eager mode (`TrainingSettings.eager`, for plugins)."""

    fuses_steps: bool
    """Whether `steps_per_execution` may run several steps per call."""

    def build_graph(self, build: Callable[[], None]) -> None:
        """Runs `build`, which builds graph pieces; eager mode has no graph to build."""

    def keep_graph_finalization(self) -> Callable[[], None]:
        """Notes whether the default graph is finalized; returns what undoes finalizing it."""

    def own_global_step(self) -> None:
        """Gives the session a global step of its own when the program made none."""

    def prepare_graph(self) -> None:
        """Adds what the backend fetches to the graph, after the hooks' `begin()`."""

    def start_queue_runners(self, sess: Any, coord: Any) -> None:
        """Starts the graph's queue runners, if any, under `coord`."""

    def check_call(self, owner: str) -> None:
        """Raises unless `owner.call(step)` (a TF2 step function) can run in this mode."""

    def resolve_fetch(self, owner: str, argument: str, target: Any) -> Any:
        """What a hook fetches for `target` (see `monsession.plugins.resolve_fetch`)."""


def current_mode() -> Mode:
    """The mode of the code running now: eager unless a graph is the default."""
    if tf.executing_eagerly():
        from monsession._backends._eager_mode import EAGER

        return EAGER
    from monsession._backends._graph_mode import GRAPH

    return GRAPH


def resolve_fetch(owner: str, argument: str, target: Any) -> Any:
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
