"""The execution mode: what differs between graph and eager around the steps.

Everything that differs by mode before and around a session (building the graph, resolving what
hooks fetch, owning the global step, creating and restoring the session, fusing steps) is a
member of the `Mode` protocol, implemented by `_graph_mode` and `_eager_mode`; `current_mode()`
picks one. Per-step work is the `Backend`'s (`_backend`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, ParamSpec, Protocol

import tensorflow as tf

from monsession._api._types import Fetches, Results, Unchecked, in_eager_mode

if TYPE_CHECKING:
    import numpy as np

    from monsession._backends._backend import (
        Backend,
        ChiefRestore,
        CreatedSession,
        Session,
        WorkerRestore,
    )
    from monsession._fusion._fusion import Fusion
    from monsession._fusion._plan import PlanningHooks

_P = ParamSpec("_P")


class Mode(Protocol):
    """What one execution mode decides before and around a session's steps."""

    eager: bool
    """Whether this is eager mode (`TrainingSettings.eager`, for plugins)."""

    def build_graph(self, build: Callable[[], None]) -> None:
        """Runs `build`, which builds graph pieces; eager mode has no graph to build."""

    def check_steps_per_execution(self, owner: str, value: Unchecked) -> int | None:
        """The cap on steps per call (`None`: "auto"); raises unless the mode runs it.

        Graph mode runs one step per `Session.run`: only 1.
        """

    def fusion(self, owner: str, cap: int | None, hooks: PlanningHooks) -> Fusion | None:
        """The session's `Fusion` (eager mode, when some run may skip the hooks), or `None`."""

    def keep_graph_finalization(self) -> Callable[[], None]:
        """Notes whether the default graph is finalized; returns what undoes finalizing it."""

    def own_global_step(self) -> None:
        """Gives the session a global step of its own when the program made none."""

    def check_hooks(self, owner: str, hooks: Sequence[Unchecked]) -> None:
        """Refuses hooks that cannot run in this mode, naming what to use instead."""

    def prepare_graph(self) -> None:
        """Adds what the backend fetches to the graph, after the hooks' `begin()`."""

    def create_chief_session(self, restore: ChiefRestore) -> CreatedSession:
        """The chief's session: the newest readable checkpoint restored, or initialized."""

    def create_worker_session(self, worker: WorkerRestore) -> CreatedSession:
        """A worker's session: graph mode waits for the chief's; eager mode may restore."""

    def multi_worker_strategy(self) -> tf.distribute.Strategy | None:
        """The current `tf.distribute` strategy if it spans several workers (eager mode)."""

    def make_backend(self, sess: Session, follow_step: bool) -> Backend:
        """The backend that runs the steps of `sess`; `follow_step`: whether hooks are
        called per step (they may ask for the global step on every run)."""

    def start_queue_runners(self, sess: Session, coord: tf.train.Coordinator) -> None:
        """Starts the graph's queue runners, if any, under `coord`."""

    def bind_call(
        self, owner: str, step: Callable[_P, Results], /, *args: _P.args, **kwargs: _P.kwargs
    ) -> object:
        """The fetches of `owner.call(step, *args, **kwargs)`; raises in graph mode."""

    def reruns_after_recovery(self, fetches: Fetches) -> bool:
        """Whether a run of `fetches` runs again once a preemption error re-created the session."""

    def resolve_fetch(self, owner: str, argument: str, target: Unchecked) -> Fetches:
        """What a hook fetches for `target` (see `monsession.plugins.resolve_fetch`)."""


def current_mode() -> Mode:
    """The mode of the code running now: eager unless a graph is the default."""
    if in_eager_mode():
        from monsession._backends._eager_mode import EAGER

        return EAGER
    from monsession._backends._graph_mode import GRAPH

    return GRAPH


def resolve_fetch(owner: str, argument: str, target: Unchecked) -> Fetches:
    """Returns what a hook fetches for `target`, checked for the current mode.

    Graph mode (call it in `begin()`, under the session's graph): a string names a tensor of the
    default graph (``"loss"`` means ``"loss:0"``; an op with several outputs must be named with
    the index); a tensor, op or variable must belong to the default graph; callables are
    refused. Eager mode: a string names an entry of the mapping the step returns, and
    `tf.Variable`s, tensors and zero-argument callables are kept.

    Args:
      owner: The hook's name, for messages.
      argument: The constructor argument `target` came from, for messages.
      target: What the hook was given.

    Returns:
      The fetch to put in `SessionRunArgs`.

    Raises:
      TensorNotFoundError: (a `KeyError` and `ValueError`) If a name is not in the graph.
      ValueError: If a name is ambiguous or a tensor belongs to another graph.
      TypeError: If `target` is of a type the mode cannot fetch.
    """
    return current_mode().resolve_fetch(owner, argument, target)


def check_scalar(
    owner: str,
    argument: str,
    what: str,
    dtype: tf.dtypes.DType | np.dtype,
    shape: tf.TensorShape | Sequence[int | None] | None,
    *,
    floating: bool = True,
) -> None:
    """Raises unless `dtype` and `shape` describe one number.

    Args:
      owner: The hook's name, for messages.
      argument: The constructor argument the value came from.
      what: What has this dtype and shape, e.g. ``"tensor 'loss:0'"``.
      dtype: A dtype (TensorFlow or NumPy).
      shape: A shape; unknown dimensions pass, more than one element fails.
      floating: Require a floating dtype; otherwise any integer or float.

    Raises:
      TypeError: If the dtype is not a number type (or not floating).
      ValueError: If the shape holds more than one element.
    """
    dtype = tf.as_dtype(dtype)
    numeric = dtype.is_floating or (not floating and dtype.is_integer and not dtype.is_bool)
    if not numeric:
        kind = "float" if floating else "numeric"
        raise TypeError(
            f"{owner}: {argument} must be a scalar {kind} tensor; {what} has dtype {dtype.name}."
        )
    known = tf.TensorShape(shape)
    if known.rank is not None and known.num_elements() not in (None, 1):
        raise ValueError(
            f"{owner}: {argument} must be a scalar; {what} has shape {known.as_list()}. "
            "Reduce it to a scalar, e.g. with tf.reduce_mean."
        )
