"""The session object of eager mode, for TF2 loops.

In eager mode there is no graph and no `tf.compat.v1.Session`. The "session"
is an `EagerSession` whose `run()` calls the step (usually a `tf.function`);
`_eager_backend` runs it with the hooks. Checkpoint state is a
`tf.train.Checkpoint` handed over through `Scaffold(saver=...)`.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any, TypeGuard, TypeVar

import tensorflow as tf

from monsession._api._types import FeedKey, FeedValue, Fetches, Results
from monsession._backends._backend import FeedDict
from monsession._backends._called_step import graph_fetch_error
from monsession._backends._closure_record import closure_record
from monsession._backends._owned_step import advancing, owned_global_step
from monsession._backends._step_value import can_return_global_step, returning_global_step
from monsession._backends._traces import Traces
from monsession._durability._retry import join_unless_lost, parameter_server_tasks
from monsession._tf_compat import cluster_coordinator, read_variable_to_host, wait_for_closures

logger = logging.getLogger("monsession")

_NO_FEEDS: Mapping[str, FeedValue] = {}  # Never changed: passed on as `**feeds`.
_NO_OWNERS: Mapping[FeedKey, str] = {}  # Never changed.

_Caller = Callable[..., Any]
_R = TypeVar("_R")


def _is_step_callable(leaf: Fetches) -> TypeGuard[Callable[..., Results]]:
    return callable(leaf) and not isinstance(leaf, (tf.Variable, tf.Tensor))


def _accepted_keywords(fn: _Caller) -> frozenset[str] | None:
    """The keyword names `fn` accepts, or `None` when it takes `**kwargs`."""
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return None
    usable = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return frozenset(p.name for p in parameters if p.kind in usable)


_CONTAINERS = (list, tuple, dict)


def _map_structure(fn: _Caller, structure: Fetches | Results) -> Results:
    """`tf.nest.map_structure` over lists, tuples and dicts; other values are leaves.

    Plain lists, tuples and dicts (what hooks fetch) are mapped here, keeping
    the key order as `tf.nest` does; their subclasses (namedtuples,
    `OrderedDict`...) go to `tf.nest`.
    """
    if type(structure) is dict:
        return {key: _map_structure(fn, value) for key, value in structure.items()}
    if type(structure) is list:
        return [_map_structure(fn, item) for item in structure]
    if type(structure) is tuple:
        return tuple([_map_structure(fn, item) for item in structure])
    if isinstance(structure, _CONTAINERS):
        return tf.nest.map_structure(fn, structure)
    return fn(structure)


class BoundStep:
    """A step with the arguments of one `MonitoredSession.call()`.

    Calling it calls the step with them (and a hook's feeds as keywords).
    `retry=False`: after a preemption error the session is re-created (the
    checkpoint restored) but the call is not retried with these arguments;
    it returns `None` (`Epochs.run` takes the batch again at the restored
    position).
    """

    def __init__(
        self,
        step: _Caller,
        args: tuple[FeedValue, ...],
        kwargs: Mapping[str, FeedValue],
        retry: bool = True,
    ) -> None:
        self.step = step
        self.args = args
        self.kwargs = kwargs
        self.retry = retry

    def __call__(self, **feeds: FeedValue) -> Results:
        return self.step(*self.args, **self.kwargs, **feeds)

    @property
    def __name__(self) -> str:
        return _describe(self.step)


def steps_called(fetches: Fetches) -> list[_Caller]:
    """The step functions a `run(fetches)` calls, seen through `MonitoredSession.call`.

    For a hook that wraps the user's step (as `NanTensorHook.watch` does) and
    asks, in `before_run`, whether the run calls its wrapper:

    ```python
    steps = monsession.plugins.steps_called(run_context.original_args.fetches)
    watched = any(step is self._wrapper for step in steps)
    ```

    Args:
      fetches: What the run was given: a step, `sess.call(step, ...)`'s
        binding, a structure of them, or graph-mode fetches.

    Returns:
      The callables among the leaves of `fetches`, in order; for a
      `sess.call`, the step called (not its binding). Empty in graph mode.
    """
    leaves = [fetches] if callable(fetches) else tf.nest.flatten(fetches)
    return [
        leaf.step if isinstance(leaf, BoundStep) else leaf
        for leaf in leaves
        if _is_step_callable(leaf)
    ]


def _describe(fn: _Caller) -> str:
    return getattr(fn, "__name__", None) or type(fn).__name__


class _StepCaller:
    """Calls the leaves of a step structure, checking feeds once per shape."""

    def __init__(self, traces: Traces, owned_step: tf.Variable | None = None) -> None:
        self._checked: set[tuple[int, frozenset[str]]] = set()
        self._traces = traces
        self.owned_step = owned_step  # The global step, if the session advances it.
        # The global step to read inside the step's call on this run (`_step_value`),
        # and its value after the last such call.
        self.read_with: tf.Variable | None = None
        self.step_value: tf.Tensor | None = None

    def check_feeds(
        self, fn: _Caller, names: frozenset[str], owner_of: Mapping[FeedKey, str]
    ) -> None:
        key = (id(fn), names)
        if key in self._checked:
            return
        accepted = _accepted_keywords(fn)
        if accepted is not None:
            for name in sorted(names - accepted):
                raise TypeError(
                    f"{owner_of.get(name, 'The caller')} feeds {name!r}, but the step "
                    f"{_describe(fn)!r} takes no argument of that name; it takes "
                    f"{sorted(accepted)}."
                )
        self._checked.add(key)

    def call(
        self, fetches: Fetches, feeds: Mapping[str, FeedValue], owner_of: Mapping[FeedKey, str]
    ) -> Results:
        names = frozenset(feeds) if feeds else None
        if isinstance(fetches, _CONTAINERS):
            return _map_structure(
                lambda leaf: self._run_leaf(leaf, feeds, names, owner_of), fetches
            )
        return self._run_leaf(fetches, feeds, names, owner_of)

    def _run_leaf(
        self,
        leaf: Fetches,
        feeds: Mapping[str, FeedValue],
        names: frozenset[str] | None,
        owner_of: Mapping[FeedKey, str],
    ) -> Results:
        if isinstance(leaf, tf.Variable):
            return _read(leaf)
        if isinstance(leaf, tf.Tensor):
            return leaf
        if not callable(leaf):
            raise _not_a_step(leaf)
        if names:  # Without feeds there is nothing to check.
            self.check_feeds(leaf, names, owner_of)
        return self._call_step(leaf, feeds)

    def _call_step(self, leaf: _Caller, feeds: Mapping[str, FeedValue]) -> Results:
        step, args, kwargs = (
            (leaf.step, leaf.args, leaf.kwargs)
            if isinstance(leaf, BoundStep)
            else (leaf, (), _NO_FEEDS)
        )
        if self.owned_step is not None:
            step = advancing(step, self.owned_step)
        if kwargs or feeds:
            return step(*args, **kwargs, **feeds)
        read_with = self.read_with
        if read_with is not None and can_return_global_step(step):
            outputs, self.step_value = self._traced_call(
                returning_global_step(step, read_with), args
            )
            return outputs
        return self._traced_call(step, args)

    def _traced_call(self, step: Callable[..., _R], args: tuple[FeedValue, ...]) -> _R:
        """Calls `step` through the trace of its arguments' signature, or straight to its
        trace without arguments (see `_traces`)."""
        return self._traces.call_with(step, args) if args else self._traces.call(step)


def _check_feed_keys(feed_dict: Mapping[Any, Any], owner_of: Mapping[Any, str]) -> None:
    for key in feed_dict:
        if not isinstance(key, str):
            raise TypeError(
                f"{owner_of.get(key, 'The caller')} feeds {key!r}; in eager mode feed_dict "
                "keys are the names of the step's keyword arguments (strings)."
            )


def to_numpy(value: Any) -> Any:
    """A tensor or variable as a NumPy value; other values as they are.

    Every device-to-host copy of core goes through here (count it to count
    host reads).
    """
    if isinstance(value, tf.Tensor):
        return value.numpy()
    if isinstance(value, tf.Variable):
        return read_variable_to_host(value)
    return value


def _current_coordinator() -> tuple[
    tf.distribute.experimental.coordinator.ClusterCoordinator | None, dict[str, str]
]:
    """The `ClusterCoordinator` of the current `ParameterServerStrategy`, if any, and
    the addresses of its parameter servers."""
    if not tf.distribute.has_strategy():
        return None, {}
    strategy = tf.distribute.get_strategy()
    if not isinstance(strategy, tf.distribute.experimental.ParameterServerStrategy):
        return None, {}
    coordinator = cluster_coordinator(strategy)
    return coordinator, parameter_server_tasks(strategy) if coordinator else {}


def _read(variable: tf.Variable) -> tf.Tensor:
    """Reads `variable`; one of a graph gets the error naming where to create the session."""
    try:
        return variable.read_value()
    except TypeError:
        graph_error = graph_fetch_error(variable)
        if graph_error is not None:
            raise graph_error from None
        raise


def _not_a_step(leaf: Fetches) -> TypeError:
    """The error for a fetch that is no step, no variable and no tensor."""
    graph_error = graph_fetch_error(leaf)
    if graph_error is not None:
        return graph_error
    return TypeError(
        f"MonitoredSession.run() in eager mode takes a step: a callable (usually a "
        f"tf.function), a tf.Variable, a tensor, or a structure of them. Got "
        f"{leaf!r} of type {type(leaf).__name__}. If it is what a step returned, "
        "pass the step itself: sess.run(train_step), not sess.run(train_step())."
    )


class EagerSession:
    """The session of eager mode, handed to hooks and to `run_step_fn`.

    `run(fetches, feed_dict=None)` takes a callable (called with `feed_dict`
    as keyword arguments), a `tf.Variable`, a tensor, or a structure of them,
    and returns NumPy values, as `tf.compat.v1.Session.run` does in graph
    mode. `MonitoredSession.run()` itself returns tensors.
    """

    graph = None
    sess_str = ""

    def __init__(self) -> None:
        self.traces = Traces()  # The session's direct calls of traced functions.
        self._caller = _StepCaller(self.traces, owned_global_step())
        self._side_caller = _StepCaller(self.traces)  # Advances nothing.
        self._closed = False
        self._coordinator, self._parameter_servers = _current_coordinator()
        if self._coordinator is not None:
            closure_record(self._coordinator)  # Where its closures run, from now on.
        self._after_join: Callable[[], None] | None = None

    @property
    def owned_global_step(self) -> tf.Variable | None:
        """The global step the session advances per step (see `_owned_step`), or `None`."""
        return self._caller.owned_step

    @property
    def coordinator(self) -> tf.distribute.experimental.coordinator.ClusterCoordinator | None:
        """The `ClusterCoordinator` of the strategy the session was created in, or `None`."""
        return self._coordinator

    def settle(self) -> None:
        """Waits until the closures scheduled so far have run (see `monsession.plugins.settle`)."""
        if self._coordinator is not None:
            self.wait_for_closures()
            if self._after_join is not None:
                self._after_join()

    def wait_for_closures(self) -> None:
        """Joins the coordinator; raises once a parameter server is gone (`join_unless_lost`)."""
        join_unless_lost(partial(wait_for_closures, self._coordinator), self._parameter_servers)

    def call_after_join(self, check: Callable[[], None]) -> None:
        """Has `settle` call `check` after each join (the backend compares the global step)."""
        self._after_join = check

    def run(
        self,
        fetches: Fetches,
        feed_dict: FeedDict | None = None,
        options: tf.compat.v1.RunOptions | None = None,
        run_metadata: tf.compat.v1.RunMetadata | None = None,
    ) -> Results:
        """Runs `fetches` and returns their values as NumPy (without hooks: advances nothing)."""
        return _map_structure(to_numpy, self.call(fetches, feed_dict, advance=False))

    def call(
        self,
        fetches: Fetches,
        feed_dict: FeedDict | None = None,
        owner_of: Mapping[FeedKey, str] | None = None,
        advance: bool = True,
        read_global_step: tf.Variable | None = None,
    ) -> Results:
        """Runs `fetches` and returns the step's outputs as they are (tensors).

        `advance`: whether a global step the session owns is advanced by the
        steps called (not by a call with chosen hooks). `read_global_step`:
        the global step, to be read inside the step's call where the step
        allows (`_step_value`); `take_global_step()` then returns its value.
        """
        if self._closed:
            raise RuntimeError("Attempted to use a closed EagerSession.")
        caller = self._caller if advance else self._side_caller
        caller.read_with, caller.step_value = read_global_step, None
        if not feed_dict:
            return caller.call(fetches, _NO_FEEDS, owner_of or _NO_OWNERS)
        feeds = dict(feed_dict)
        owner_of = owner_of or {}
        _check_feed_keys(feeds, owner_of)
        return caller.call(fetches, feeds, owner_of)

    def take_global_step(self) -> tf.Tensor | None:
        """The global step read inside the last `call`'s step, or `None` (not read there)."""
        value, self._caller.step_value = self._caller.step_value, None
        return value

    @property
    def closed(self) -> bool:
        """Whether `close()` was called."""
        return self._closed

    def close(self) -> None:
        """Marks the session closed (eager mode has no TensorFlow session to release)."""
        self._closed = True
