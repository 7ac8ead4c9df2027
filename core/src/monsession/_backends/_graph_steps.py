"""Graph mode's step runners: one `Session.run` per step, prepared once per fetch structure.

The caller's fetches and the hooks' are merged into one structure (keyed
per hook) and run in one call. Each distinct structure without feeds
becomes a prepared step that is reused (see `_CallableStep`).
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Hashable, Mapping
from typing import Any

import tensorflow as tf

from monsession import _tf_compat
from monsession._api._types import Fetches

CALLER = "caller"
"""The key of the caller's fetches among the merged fetches."""

_MAX_CACHED_CALLABLES = 64


_leaf_types: set[type] = set()  # Types seen to be plain leaves (not containers, not names).


def _sequence_key(fetches: list[Any] | tuple[Any, ...]) -> Hashable:
    return (type(fetches), *[_signature(item) for item in fetches])


_KEYS: dict[type, Callable[[Any], Hashable]] = {
    dict: lambda fetches: (dict, *[(key, _signature(value)) for key, value in fetches.items()]),
    list: _sequence_key,
    tuple: _sequence_key,
    str: lambda name: name,
    bytes: lambda name: name,
}


def _signature(fetches: Any) -> Hashable:
    """A hashable key for a fetch structure; raises TypeError if there is none.

    Containers are keyed by type and content, names by value, and every other
    leaf (tensor, op, variable) by identity: hashing a graph `Tensor` runs
    Python code, `id` does not. The cache entry keeps the structure alive, so
    no other object can take the id of one of its leaves.
    """
    kind = type(fetches)
    if kind in _leaf_types:
        return id(fetches)
    key = _KEYS.get(kind)
    if key is not None:
        return key(fetches)
    if isinstance(fetches, tuple) and hasattr(kind, "_fields"):  # A namedtuple.
        return _sequence_key(fetches)
    if isinstance(fetches, (list, tuple, Mapping)):
        raise TypeError(f"No cache key for a {kind.__name__}.")
    _leaf_types.add(kind)
    return id(fetches)


def _none(values: list[Any]) -> None:
    return None


class _NotPlainError(Exception):
    """A fetch structure that `_result_builder` leaves to TensorFlow."""


_HANDLE_OPS = ("GetSessionHandle", "GetSessionHandleV2")


def _result_builder(fetches: Any, index_of: Mapping[Any, int]) -> Callable[[list[Any]], Any]:
    """A function from the fetched values to the structure of `fetches`.

    Handles dicts, lists and tuples of graph tensors and ops, which is what
    hooks fetch; raises `_NotPlainError` for anything else (variables, names,
    sparse tensors, namedtuples...), which TensorFlow's fetch handler builds.
    """
    kind = type(fetches)
    if kind is dict:
        items = [(key, _result_builder(value, index_of)) for key, value in fetches.items()]
        return lambda values: {key: build(values) for key, build in items}
    if kind is list or kind is tuple:
        parts = [_result_builder(item, index_of) for item in fetches]
        if kind is list:
            return lambda values: [build(values) for build in parts]
        return lambda values: tuple([build(values) for build in parts])
    return _leaf_builder(fetches, index_of)


def _leaf_builder(fetch: Any, index_of: Mapping[Any, int]) -> Callable[[list[Any]], Any]:
    """`_result_builder` of one op (`None`) or one fetched tensor (its value)."""
    if isinstance(fetch, tf.Operation):
        return _none
    if isinstance(fetch, tf.Tensor) and fetch.op.type not in _HANDLE_OPS:
        index = index_of.get(fetch.ref())
        if index is not None:
            return operator.itemgetter(index)
    raise _NotPlainError


class _CallableStep:
    """Runs one merged fetch structure through a prepared C++ step.

    `_tf_compat.prepared_step` prepares the step once in the C++ runtime;
    each call then skips the name lookups that `Session.run` (and the
    callables of `Session.make_callable`) repeat on every step. TensorFlow's
    own fetch handler resolves the structure, so fetches mean exactly what
    they mean to `Session.run`; errors are re-raised as `Session.run` raises
    them, naming the failing op.
    """

    def __init__(self, sess: tf.compat.v1.Session, fetches: dict[Any, Any]) -> None:
        handler = _tf_compat.fetch_handler(sess.graph, fetches)
        tensors = handler.fetches()
        self._callable = _tf_compat.prepared_step(
            sess, [tensor.name for tensor in tensors], [op.name for op in handler.targets()]
        )
        self._sess = sess
        try:
            index_of = {tensor.ref(): index for index, tensor in enumerate(tensors)}
            self._build = _result_builder(fetches, index_of)
        except _NotPlainError:
            self._build = functools.partial(handler.build_results, sess)

    def __call__(self) -> dict[Any, Any]:
        try:
            values = self._callable()
        except tf.errors.OpError as error:
            _tf_compat.reraise_as_session_run(self._sess, error)
            raise
        return self._build(values)


class StepRunner:
    """Runs the merged fetches of a step with one call of the session.

    Without feeds, each distinct merged fetch structure is prepared once and
    reused: a `tf.compat.v1.Session` runs it as a C++ callable
    (`_CallableStep`), built on the first step with that structure; steps
    with run options, and session-like objects, use `Session.make_callable`.
    Steps with feeds use `Session.run`, which is what a callable with feeds
    would do anyway, as do session-like objects without `make_callable`.
    """

    def __init__(self, sess: tf.compat.v1.Session) -> None:
        self._sess = sess
        # Signature -> (step, merged fetches). The fetches are kept so that
        # the ids in the signature stay theirs.
        self._callables: dict[Any, tuple[Any, Any]] = {}
        self._prepares = callable(getattr(sess, "make_callable", None))
        self._use_callables = _tf_compat.supports_prepared_steps(sess)

    def run(
        self,
        fetches: Fetches,
        hook_fetches: dict[Any, Any],
        feed_dict: Mapping[Any, Any] | None,
        options: tf.compat.v1.RunOptions | None,
        run_metadata: tf.compat.v1.RunMetadata | None,
    ) -> tuple[Any, dict[Any, Any]]:
        """The caller's results and all results (keyed as `hook_fetches`, and `CALLER`)."""
        with_options = options is not None or run_metadata is not None
        prepare = self._prepares and not feed_dict
        step = self._prepared(fetches, hook_fetches, with_options) if prepare else None
        if step is None:
            merged = {CALLER: fetches, **hook_fetches}
            outputs = self._sess.run(
                merged, feed_dict=feed_dict, options=options, run_metadata=run_metadata
            )
        elif with_options:
            outputs = step(options=options, run_metadata=run_metadata)
        else:
            outputs = step()
        return outputs[CALLER], outputs

    def _prepared(
        self, fetches: Fetches, hook_fetches: dict[Any, Any], with_options: bool
    ) -> Callable[..., dict[Any, Any]] | None:
        """The prepared step of this merged structure, built on first use; `None`: unhashable."""
        try:
            # The signature of {CALLER: fetches, **hook_fetches}, without building it.
            key = (
                with_options,
                _signature(fetches),
                *[(hook, _signature(requested)) for hook, requested in hook_fetches.items()],
            )
            entry = self._callables.get(key)
        except TypeError:  # An unhashable fetch: nothing to cache by.
            return None
        if entry is None:
            if len(self._callables) >= _MAX_CACHED_CALLABLES:
                self._callables.clear()
            merged = {CALLER: fetches, **hook_fetches}
            entry = (self._prepare(merged, with_options), merged)
            self._callables[key] = entry
        step: Callable[..., dict[Any, Any]] = entry[0]
        return step

    def _prepare(self, merged: dict[Any, Any], with_options: bool) -> Callable[..., dict[Any, Any]]:
        if self._use_callables and not with_options:
            try:
                return _CallableStep(self._sess, merged)
            except tf.errors.OpError:
                pass  # Session.run reports it better, with the op that failed.
        return self._sess.make_callable(merged, accept_options=with_options)
