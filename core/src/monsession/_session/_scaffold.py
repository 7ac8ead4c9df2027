"""`Scaffold`: the pieces needed to create, initialize and save a session."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

import tensorflow as tf

from monsession import _tf_compat
from monsession._api._types import FeedDict
from monsession._backends._backend import ScaffoldSaver, Session
from monsession._backends._mode import current_mode

logger = logging.getLogger("monsession")

_v1 = tf.compat.v1
_GraphKeys = _v1.GraphKeys


_T = TypeVar("_T")


class Scaffold:
    """Gathers or builds the pieces used to initialize, restore and save.

    Pieces not passed to the constructor are picked from the graph's
    collections by `finalize()`, or created and added to them when missing.
    In eager mode there is no graph: pass the `tf.train.Checkpoint` (or
    `tf.train.CheckpointManager`) holding the model, optimizer and global
    step as `saver`; the chief restores into it, the checkpoint family saves it.

    Args:
      init_op: Op initializing the variables.
      init_feed_dict: Feeds used when running `init_op`.
      init_fn: Called as `init_fn(scaffold, session)` after `init_op` when the
        model is initialized rather than restored.
      ready_op: Op returning an empty 1-D string tensor when the variables are
        initialized, or the names of those that are not.
      ready_for_local_init_op: Like `ready_op`, for the global variables that
        `local_init_op` needs.
      local_init_op: Op initializing the local variables.
      summary_op: Op merging the summaries into a serialized `Summary`.
      saver: A `tf.compat.v1.train.Saver`; or a `tf.train.Checkpoint` (graph
        mode: saved object-based; eager mode: the state to restore and save),
        or in eager mode a `tf.train.CheckpointManager`.
      copy_from_scaffold: A `Scaffold` whose pieces fill the arguments not given here.
      local_init_feed_dict: Feeds used when running `local_init_op`.

    Raises:
      TypeError: If `copy_from_scaffold` is not a `Scaffold`.
    """

    def __init__(
        self,
        init_op: tf.Operation | None = None,
        init_feed_dict: FeedDict | None = None,
        init_fn: Callable[[Scaffold, Session], None] | None = None,
        ready_op: tf.Tensor | None = None,
        ready_for_local_init_op: tf.Tensor | None = None,
        local_init_op: tf.Operation | None = None,
        summary_op: tf.Tensor | None = None,
        saver: ScaffoldSaver | None = None,
        copy_from_scaffold: Scaffold | None = None,
        local_init_feed_dict: FeedDict | None = None,
    ) -> None:
        if copy_from_scaffold is not None and not isinstance(copy_from_scaffold, Scaffold):
            raise TypeError(
                "copy_from_scaffold is not a Scaffold instance: got "
                f"{type(copy_from_scaffold).__name__}."
            )
        self._user_init_fn: Callable[[Scaffold, Session], None] | None = init_fn
        self._init_op = init_op
        self._init_feed_dict = init_feed_dict
        self._ready_op = ready_op
        self._ready_for_local_init_op = ready_for_local_init_op
        self._local_init_op = local_init_op
        self._local_init_feed_dict = local_init_feed_dict
        self._summary_op = summary_op
        self._saver = saver
        if copy_from_scaffold is not None:  # It fills the pieces not given here.
            for piece in _PIECES:
                if getattr(self, f"_{piece}") is None:
                    setattr(self, f"_{piece}", getattr(copy_from_scaffold, piece))

    def finalize(self) -> Scaffold:
        """Creates the missing pieces and finalizes the default graph (eager mode: nothing);
        returns this scaffold."""
        current_mode().build_graph(self._build_graph)
        return self

    def _build_graph(self) -> None:
        for piece, collection_key, default_constructor in _GRAPH_PIECES:
            if getattr(self, f"_{piece}") is None:
                default = Scaffold.get_or_default(piece, collection_key, default_constructor)
                setattr(self, f"_{piece}", default)
        self._saver = _graph_saver(self._saver)
        _v1.get_default_graph().finalize()
        logger.info("Graph was finalized.")

    @property
    def init_fn(self) -> Callable[[Session], None] | None:
        """`init_fn` bound to this scaffold: called as `init_fn(session)`."""
        user_init_fn = self._user_init_fn
        if user_init_fn is None:
            return None
        return lambda session: user_init_fn(self, session)

    @property
    def user_init_fn(self) -> Callable[[Scaffold, Session], None] | None:
        """`init_fn` as given to the constructor: called as `init_fn(scaffold, session)`."""
        return self._user_init_fn

    @property
    def init_op(self) -> tf.Operation | None:
        """The op that initializes the variables (after `finalize()`, the default if none given)."""
        return self._init_op

    @property
    def ready_op(self) -> tf.Tensor | None:
        """The op that lists the variables not yet initialized (empty when ready)."""
        return self._ready_op

    @property
    def ready_for_local_init_op(self) -> tf.Tensor | None:
        """The op that lists the global variables `local_init_op` still needs."""
        return self._ready_for_local_init_op

    @property
    def local_init_op(self) -> tf.Operation | None:
        """The op that initializes local variables and tables, run in every session."""
        return self._local_init_op

    @property
    def local_init_feed_dict(self) -> FeedDict | None:
        """The feed of `local_init_op`, or `None`."""
        return self._local_init_feed_dict

    @property
    def summary_op(self) -> tf.Tensor | None:
        """The op that merges the graph's summaries, or `None`."""
        return self._summary_op

    @property
    def saver(self) -> ScaffoldSaver | None:
        """What saves and restores: a `tf.compat.v1.train.Saver`; in eager mode the
        `tf.train.Checkpoint` (or `tf.train.CheckpointManager`) handed over."""
        return self._saver

    @property
    def init_feed_dict(self) -> FeedDict | None:
        """The feed of `init_op`, or `None`."""
        return self._init_feed_dict

    @staticmethod
    def get_or_default(
        arg_name: str, collection_key: str, default_constructor: Callable[[], _T]
    ) -> _T:
        """The single item of graph collection `collection_key`, or one built by
        `default_constructor` and added; raises `RuntimeError` naming the `Scaffold`
        argument `arg_name` if the collection holds more than one item."""
        elements = _v1.get_collection(collection_key)
        if elements:
            if len(elements) > 1:
                raise RuntimeError(
                    f'More than one item in the collection "{collection_key}". Please indicate '
                    f"which one to use by passing it to the Scaffold constructor as: "
                    f"Scaffold({arg_name}=item to use)"
                )
            return elements[0]
        op = default_constructor()
        if op is not None:
            _v1.add_to_collection(collection_key, op)
        return op

    @staticmethod
    def default_local_init_op() -> tf.Operation:
        """Groups the local variable, table and local resource initializers."""
        return _default_local_init_op()


def _graph_saver(saver: ScaffoldSaver | None) -> tf.compat.v1.train.Saver:
    """The graph's built `Saver`: `saver`, the default one, or one over a `Checkpoint`'s state."""
    if saver is None:
        saver = _default_saver()
    if isinstance(saver, tf.train.Checkpoint):
        return _v1.train.Saver(var_list=_tf_compat.checkpoint_saveables(saver), sharded=True)
    saver.build()
    return saver


_resources_module = _tf_compat.resources_module


def _default_local_init_op() -> tf.Operation:
    resources = _resources_module()
    return tf.group(
        _v1.local_variables_initializer(),
        _v1.tables_initializer(),
        resources.initialize_resources(resources.local_resources()),
    )


def _default_init_op() -> tf.Operation:
    resources = _resources_module()
    return tf.group(
        _v1.global_variables_initializer(),
        resources.initialize_resources(resources.shared_resources()),
        _v1.get_collection("saved_model_initializers"),
    )


def _default_ready_op() -> tf.Tensor:
    resources = _resources_module()
    return tf.concat(
        [_v1.report_uninitialized_variables(), resources.report_uninitialized_resources()], 0
    )


def _default_ready_for_local_init_op() -> tf.Tensor:
    resources = _resources_module()
    return tf.concat(
        [
            _v1.report_uninitialized_variables(_v1.global_variables()),
            resources.report_uninitialized_resources(resources.shared_resources()),
        ],
        0,
    )


# The pieces `copy_from_scaffold` fills, and those `finalize()` finds in the graph or builds.
_PIECES = (
    "init_op init_feed_dict user_init_fn ready_op ready_for_local_init_op local_init_op "
    "local_init_feed_dict summary_op saver"
).split()
_GRAPH_PIECES: tuple[tuple[str, str, Callable[[], tf.Operation | tf.Tensor | None]], ...] = (
    ("init_op", _GraphKeys.INIT_OP, _default_init_op),
    ("ready_op", _GraphKeys.READY_OP, _default_ready_op),
    (
        "ready_for_local_init_op",
        _GraphKeys.READY_FOR_LOCAL_INIT_OP,
        _default_ready_for_local_init_op,
    ),
    ("local_init_op", _GraphKeys.LOCAL_INIT_OP, _default_local_init_op),
    ("summary_op", _GraphKeys.SUMMARY_OP, _v1.summary.merge_all),
)


def _default_saver() -> tf.compat.v1.train.Saver:
    """The graph's single saver from the SAVERS collection, or a new one."""
    savers = _v1.get_collection(_GraphKeys.SAVERS)
    if savers:
        if len(savers) > 1:
            raise RuntimeError(
                f"More than one item in the collection {_GraphKeys.SAVERS}. Please pass the "
                "saver to use to the Scaffold constructor as Scaffold(saver=...)."
            )
        return savers[0]
    saver = _v1.train.Saver(sharded=True, allow_empty=True)
    _v1.add_to_collection(_GraphKeys.SAVERS, saver)
    return saver
