"""Step runners: the one place where graph and eager execution differ.

A step runner executes the caller's fetches together with the hooks' fetches
in one step and splits the results. `_HookedSession` picks the runner that
fits the session it wraps and never asks which mode it is in.

Interface (duck-typed)::

    runner.run(fetches, hook_fetches, feed_dict, options, run_metadata, feed_owners)
        -> (caller_results, {hook: hook_results})

`hook_fetches` maps each hook that asked for something to its fetches;
`feed_owners` names the hook that fed each key, for error messages.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Mapping
from typing import Any

import tensorflow as tf
from tensorflow.core.protobuf import config_pb2
from tensorflow.python.client import session as tf_session

_CALLER = "caller"
_MAX_CACHED_CALLABLES = 64


def make_step_runner(sess: Any) -> Any:
    """Returns the step runner for `sess` (graph, eager or generic)."""
    from monsession._eager import EagerSession, EagerStepRunner

    if isinstance(sess, EagerSession):
        return EagerStepRunner(sess)
    if callable(getattr(sess, "make_callable", None)):
        return GraphStepRunner(sess)
    return GenericStepRunner(sess)


class GenericStepRunner:
    """Runs the merged fetches with one `sess.run` call (any session-like)."""

    def __init__(self, sess: Any) -> None:
        self._sess = sess

    def run(
        self,
        fetches: Any,
        hook_fetches: dict[Any, Any],
        feed_dict: Any,
        options: Any,
        run_metadata: Any,
        feed_owners: Mapping[Any, str],
    ) -> tuple[Any, dict[Any, Any]]:
        merged = {_CALLER: fetches, **hook_fetches}
        outputs = self._sess.run(
            merged, feed_dict=feed_dict, options=options, run_metadata=run_metadata
        )
        return outputs[_CALLER], outputs


_leaf_types: set[type] = set()  # Types seen to be plain leaves (not containers, not names).


def _signature(fetches: Any) -> Any:
    """A hashable key for a fetch structure; raises TypeError if there is none.

    Containers are keyed by type and content, names by value, and every other
    leaf (tensor, op, variable) by identity: hashing a graph `Tensor` runs
    Python code, `id` does not. The cache entry keeps the structure alive, so
    no other object can take the id of one of its leaves.
    """
    kind = type(fetches)
    if kind in _leaf_types:
        return id(fetches)
    if kind is dict:
        return (dict, *[(key, _signature(value)) for key, value in fetches.items()])
    if kind is list or kind is tuple or (isinstance(fetches, tuple) and hasattr(kind, "_fields")):
        return (kind, *[_signature(item) for item in fetches])
    if kind is str or kind is bytes:
        return fetches
    if isinstance(fetches, (list, tuple, Mapping)):
        raise TypeError(f"No cache key for a {kind.__name__}.")
    _leaf_types.add(kind)
    return id(fetches)


def _raise(error: Exception) -> None:
    raise error


def _none(values: Any) -> None:
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
    if kind is list:
        parts = [_result_builder(item, index_of) for item in fetches]
        return lambda values: [build(values) for build in parts]
    if kind is tuple:
        parts = [_result_builder(item, index_of) for item in fetches]
        return lambda values: tuple([build(values) for build in parts])
    if isinstance(fetches, tf.Operation):
        return _none
    if isinstance(fetches, tf.Tensor) and fetches.op.type not in _HANDLE_OPS:
        index = index_of.get(fetches.ref())
        if index is not None:
            return operator.itemgetter(index)
    raise _NotPlainError


class _CallableStep:
    """Runs one merged fetch structure through a `Session` callable.

    `Session._make_callable_from_options` prepares the step once in the C++
    runtime; each call then skips the name lookups that `Session.run` (and
    the callables of `Session.make_callable`) repeat on every step.
    TensorFlow's own fetch handler resolves the structure, so fetches mean
    exactly what they mean to `Session.run`; errors are re-raised through
    `Session._do_call`, which names the failing op as `Session.run` does.
    """

    def __init__(self, sess: Any, fetches: Any) -> None:
        handler = tf_session._FetchHandler(sess.graph, fetches, {})
        tensors = handler.fetches()
        options = config_pb2.CallableOptions()
        options.fetch.extend(tensor.name for tensor in tensors)
        options.target.extend(op.name for op in handler.targets())
        self._callable = sess._make_callable_from_options(options)
        self._sess = sess
        try:
            index_of = {tensor.ref(): index for index, tensor in enumerate(tensors)}
            self._build = _result_builder(fetches, index_of)
        except _NotPlainError:
            self._build = functools.partial(handler.build_results, sess)

    def __call__(self) -> Any:
        try:
            values = self._callable()
        except tf.errors.OpError as error:
            self._sess._do_call(_raise, error)
            raise
        return self._build(values)


def _supports_callables(sess: Any) -> bool:
    """Whether `sess` is a TensorFlow session with C++ callables (not a wrapper)."""
    return isinstance(sess, tf_session.BaseSession) and hasattr(sess, "_make_callable_from_options")


class GraphStepRunner(GenericStepRunner):
    """Graph mode: prepares each distinct merged fetch structure once.

    Without feeds, the merged fetches of a `tf.compat.v1.Session` become a
    C++ callable (`_CallableStep`), built on the first step with that
    structure and reused; steps with run options and other session-like
    objects use `Session.make_callable`. Steps with feeds use `Session.run`,
    which is what a callable with feeds would do anyway.
    """

    def __init__(self, sess: Any) -> None:
        super().__init__(sess)
        # Signature -> (step, merged fetches). The fetches are kept so that
        # the ids in the signature stay theirs.
        self._callables: dict[Any, tuple[Any, Any]] = {}
        self._use_callables = _supports_callables(sess)

    def run(
        self,
        fetches: Any,
        hook_fetches: dict[Any, Any],
        feed_dict: Any,
        options: Any,
        run_metadata: Any,
        feed_owners: Mapping[Any, str],
    ) -> tuple[Any, dict[Any, Any]]:
        if feed_dict:
            return super().run(fetches, hook_fetches, feed_dict, options, run_metadata, feed_owners)
        with_options = options is not None or run_metadata is not None
        try:
            # The signature of {_CALLER: fetches, **hook_fetches}, without building it.
            key = (
                with_options,
                _signature(fetches),
                *[(hook, _signature(requested)) for hook, requested in hook_fetches.items()],
            )
            entry = self._callables.get(key)
        except TypeError:  # An unhashable fetch: nothing to cache by.
            return super().run(fetches, hook_fetches, feed_dict, options, run_metadata, feed_owners)
        if entry is None:
            if len(self._callables) >= _MAX_CACHED_CALLABLES:
                self._callables.clear()
            merged = {_CALLER: fetches, **hook_fetches}
            entry = (self._prepare(merged, with_options), merged)
            self._callables[key] = entry
        if with_options:
            outputs = entry[0](options=options, run_metadata=run_metadata)
        else:
            outputs = entry[0]()
        return outputs[_CALLER], outputs

    def _prepare(self, merged: Any, with_options: bool) -> Any:
        if self._use_callables and not with_options:
            try:
                return _CallableStep(self._sess, merged)
            except tf.errors.OpError:
                pass  # Session.run reports it better, with the op that failed.
        return self._sess.make_callable(merged, accept_options=with_options)
