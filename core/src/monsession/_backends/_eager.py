"""The session of eager mode (`EagerSession`), for TF2 loops.

There is no graph and no `tf.compat.v1.Session`: `run()` calls the step
(usually a `tf.function`), and the state is a `tf.train.Checkpoint` given as
`Scaffold(saver=...)`. A session created without a global step creates and
*owns* one (`own_global_step_if_missing`), which joins that checkpoint. Under
a `ClusterCoordinator` steps schedule closures: `settle` waits for them, and
`closure_record` keeps which worker ran each (TensorFlow keeps no record).
"""

from __future__ import annotations

import dataclasses
import threading
import weakref
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any, TypeVar

import tensorflow as tf

from monsession._api._types import (
    FeedDict,
    FeedKey,
    FeedValue,
    Fetches,
    Results,
    get_global_step,
    get_or_create_global_step,
)
from monsession._backends._eager_calls import (
    CONTAINERS,
    Traces,
    accepted_keywords,
    advancing,
    describe,
    is_step_callable,
    map_structure,
    not_a_step_error,
    read_fetched,
    returning_global_step,
)
from monsession._durability._retry import join_unless_lost, parameter_server_tasks
from monsession._fusion._loop import BoundStep
from monsession._tf_compat import (
    cluster_coordinator,
    read_variable_to_host,
    wait_for_closures,
    watch_closures,
)

_R = TypeVar("_R")


_NO_FEEDS: Mapping[str, FeedValue] = {}  # Never changed: passed on as `**feeds`.
_NO_OWNERS: Mapping[FeedKey, str] = {}  # Never changed.

_Caller = Callable[..., Any]


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
        if is_step_callable(leaf)
    ]


class _StepCaller:
    """Calls the leaves of a step structure, checking feeds once per shape."""

    def __init__(self, traces: Traces, owned_step: tf.Variable | None = None) -> None:
        self._checked: set[tuple[int, frozenset[str]]] = set()
        self._traces = traces
        self.owned_step = owned_step  # The global step, if the session advances it.
        # The global step to read inside the step's call on this run (`returning_global_step`),
        # and its value after the last such call.
        self.read_with: tf.Variable | None = None
        self.step_value: tf.Tensor | None = None

    def check_feeds(
        self, fn: _Caller, names: frozenset[str], owner_of: Mapping[FeedKey, str]
    ) -> None:
        key = (id(fn), names)
        if key in self._checked:
            return
        accepted = accepted_keywords(fn)
        if accepted is not None:
            for name in sorted(names - accepted):
                raise TypeError(
                    f"{owner_of.get(name, 'The caller')} feeds {name!r}, but the step "
                    f"{describe(fn)!r} takes no argument of that name; it takes "
                    f"{sorted(accepted)}."
                )
        self._checked.add(key)

    def call(
        self, fetches: Fetches, feeds: Mapping[str, FeedValue], owner_of: Mapping[FeedKey, str]
    ) -> Results:
        names = frozenset(feeds) if feeds else None
        if isinstance(fetches, CONTAINERS):
            return map_structure(lambda leaf: self.run_leaf(leaf, feeds, names, owner_of), fetches)
        return self.run_leaf(fetches, feeds, names, owner_of)

    def run_leaf(
        self,
        leaf: Fetches,
        feeds: Mapping[str, FeedValue],
        names: frozenset[str] | None,
        owner_of: Mapping[FeedKey, str],
    ) -> Results:
        if isinstance(leaf, tf.Variable):
            return read_fetched(leaf)
        if isinstance(leaf, tf.Tensor):
            return leaf
        if not callable(leaf):
            raise not_a_step_error(leaf)
        if names:  # Without feeds there is nothing to check.
            self.check_feeds(leaf, names, owner_of)
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
        returning = None if read_with is None else returning_global_step(step, read_with)
        # Through its trace (`Traces`), with or without arguments.
        called = step if returning is None else returning
        outputs = self._traces.call_with(called, args) if args else self._traces.call(called)
        if returning is not None:
            outputs, self.step_value = outputs
        return outputs


def _keywords(feed_dict: FeedDict, owner_of: Mapping[FeedKey, str]) -> dict[str, FeedValue]:
    """The feeds as the step's keyword arguments; raises for a key that is no name."""
    feeds = {}
    for key, value in feed_dict.items():
        if not isinstance(key, str):
            raise TypeError(
                f"{owner_of.get(key, 'The caller')} feeds {key!r}; in eager mode feed_dict "
                "keys are the names of the step's keyword arguments (strings)."
            )
        feeds[key] = value
    return feeds


def to_numpy(value: Any) -> Any:
    """A tensor or variable as a NumPy value; other values as they are.

    Every device-to-host copy of core goes through here (count it to count host reads).
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
        """The global step the session advances per step (`owned_global_step`), or `None`."""
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
        return map_structure(to_numpy, self.call(fetches, feed_dict, advance=False))

    def call(
        self,
        fetches: Fetches,
        feed_dict: FeedDict | None = None,
        owner_of: Mapping[FeedKey, str] | None = None,
        advance: bool = True,
        read_global_step: tf.Variable | None = None,
    ) -> Results:
        """Runs `fetches` and returns the step's outputs as they are (tensors).

        `advance`: whether the steps advance a global step the session owns.
        `read_global_step`: read inside the step's call where it allows
        (`returning_global_step`), then given by `take_global_step()`.
        """
        if self._closed:
            raise RuntimeError("Attempted to use a closed EagerSession.")
        caller = self._caller if advance else self._side_caller
        caller.read_with, caller.step_value = read_global_step, None
        if not feed_dict:
            if isinstance(fetches, CONTAINERS):
                return caller.call(fetches, _NO_FEEDS, owner_of or _NO_OWNERS)
            return caller.run_leaf(fetches, _NO_FEEDS, None, owner_of or _NO_OWNERS)  # Most steps.
        owner_of = owner_of or {}
        return caller.call(fetches, _keywords(feed_dict, owner_of), owner_of)

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


_RECORDS: weakref.WeakKeyDictionary[Any, ClosureRecord] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


@dataclasses.dataclass
class ClosureRecord:
    """What the workers of one `ClusterCoordinator` did with its closures.

    Attributes:
      ran: Closures each worker ran to the end (a closure that raised counts), by worker index.
      put_back: Closures put back for another worker because their worker
        failed while running them, by the index of the worker that failed.
    """

    ran: dict[int, int] = dataclasses.field(default_factory=dict)
    put_back: dict[int, int] = dataclasses.field(default_factory=dict)

    def _count(self, into: dict[int, int], worker: int) -> None:
        with _LOCK:
            into[worker] = into.get(worker, 0) + 1

    def snapshot(self) -> ClosureRecord:
        """A copy, as of now (the workers go on counting in the record itself)."""
        with _LOCK:
            return ClosureRecord(dict(self.ran), dict(self.put_back))


def closure_record(coordinator: Any) -> ClosureRecord:
    """The record of the closures `coordinator`'s workers ran and put back.

    Counting starts at the first call (a monitored session created on the
    coordinator makes it) and goes on for the coordinator's life.

    Args:
      coordinator: A `tf.distribute.experimental.coordinator.ClusterCoordinator`.

    Returns:
      The `ClosureRecord`; read it with `snapshot()`.
    """
    with _LOCK:
        record = _RECORDS.get(coordinator)
        if record is not None:
            return record
        record = _RECORDS[coordinator] = ClosureRecord()
    watch_closures(
        coordinator,
        ran=lambda worker: record._count(record.ran, worker),
        put_back=lambda worker: record._count(record.put_back, worker),
    )
    return record


CHECKPOINT_NAME = "monsession_global_step"  # An owned global step's name in the checkpoint.
_OWNED: weakref.WeakValueDictionary[int, Any] = weakref.WeakValueDictionary()


def own_global_step_if_missing() -> bool:
    """Creates the global step, owned by the sessions, if there is none; returns whether."""
    if get_global_step() is not None:
        return False
    get_or_create_global_step()
    # The collection's variable: under ParameterServerStrategy the one
    # returned is a wrapper (a `CachingVariable`) that nothing else holds.
    variable = get_global_step()
    _OWNED[id(variable)] = variable
    return True


def owned_global_step() -> tf.Variable | None:
    """The global step if the sessions own it, else `None`."""
    variable = get_global_step()
    return variable if variable is not None and _OWNED.get(id(variable)) is variable else None


def add_to_checkpoint(checkpoint: tf.train.Checkpoint | tf.train.CheckpointManager | None) -> None:
    """Adds an owned global step to `checkpoint` (a `tf.train.Checkpoint`), once."""
    variable = owned_global_step()
    if variable is not None and isinstance(checkpoint, tf.train.Checkpoint):
        if getattr(checkpoint, CHECKPOINT_NAME, None) is not variable:
            setattr(checkpoint, CHECKPOINT_NAME, variable)
