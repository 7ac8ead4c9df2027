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

from collections.abc import Mapping
from typing import Any

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


def _signature(fetches: Any) -> Any:
    """A hashable key for a fetch structure; raises TypeError if there is none."""
    kind = type(fetches)
    if kind is list or kind is tuple or (isinstance(fetches, tuple) and hasattr(kind, "_fields")):
        return (kind, tuple(_signature(item) for item in fetches))
    if kind is dict:
        return (dict, tuple((key, _signature(value)) for key, value in fetches.items()))
    hash(fetches)
    return fetches


class GraphStepRunner(GenericStepRunner):
    """Graph mode: prepares each distinct merged fetch structure once.

    Without feeds, the merged fetches go through `Session.make_callable`, so
    TensorFlow parses them once per distinct structure instead of every step.
    Steps with feeds use `Session.run`, which is what a callable with feeds
    would do anyway.
    """

    def __init__(self, sess: Any) -> None:
        super().__init__(sess)
        self._callables: dict[Any, Any] = {}

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
        merged = {_CALLER: fetches, **hook_fetches}
        with_options = options is not None or run_metadata is not None
        try:
            key = (with_options, _signature(merged))
            step = self._callables.get(key)
        except TypeError:  # An unhashable fetch: nothing to cache by.
            return super().run(fetches, hook_fetches, feed_dict, options, run_metadata, feed_owners)
        if step is None:
            if len(self._callables) >= _MAX_CACHED_CALLABLES:
                self._callables.clear()
            step = self._sess.make_callable(merged, accept_options=with_options)
            self._callables[key] = step
        if with_options:
            outputs = step(options=options, run_metadata=run_metadata)
        else:
            outputs = step()
        return outputs[_CALLER], outputs
