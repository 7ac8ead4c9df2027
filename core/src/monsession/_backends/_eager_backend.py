"""The eager backend: runs the step, then evaluates the hooks' fetches.

Nothing is read back for a hook that fetched nothing; the caller's results
stay tensors. A variable or tensor fetched by several hooks is read once per
step (a callable fetch may change variables: reads after it start afresh).
A per-replica value of `strategy.run` becomes one value (`host_value`).

The step service: the global step is read once as the session starts, then
counted on the host per training run that calls a step. Runs whose hooks read
the device compare the count with the variable: those that fetch it anyway,
and the 1st, 3rd, 7th, 15th ... then every `MOST_UNCHECKED`-th (a traced step
returns it from its own call). A step that does not advance it by one is
warned of once, and the variable is read after every run from then on. Under a
`ClusterCoordinator` it is compared only after a join (`ClosureSteps`).
A run given a step's outputs instead of the step is an error or a warning
(`check_value_run`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

import numpy as np
import tensorflow as tf

from monsession._api._types import FeedDict, FeedKey, Fetches, Results, get_global_step
from monsession._backends._backend import HookResults, StepCounter
from monsession._backends._eager import EagerSession, to_numpy
from monsession._backends._eager_calls import (
    CONTAINERS,
    describe,
    graph_fetch_error,
    is_step_callable,
    map_structure,
)
from monsession._backends._eager_loops import ClosureSteps, EagerLoops, step_names
from monsession._fusion._loop import is_per_replica
from monsession._tf_compat import is_plain_resource_variable, local_replica_values

logger = logging.getLogger("monsession")

_REMOTE_VALUE = tf.distribute.experimental.coordinator.RemoteValue


def _hook_name(hook: object) -> str:
    return type(hook).__name__


OUTPUT = "output"  # What hooks call a step output that is not a mapping.
MOST_UNCHECKED = 100  # The most runs whose hooks read the device between two checks of the step.


def _output_entry(hook: object, name: str, outputs: object) -> object:
    """The step output a hook names: a mapping's key, `"output"`, or `"output/<i>"`.

    Raises:
      ValueError: If the step returned no such entry.
    """
    if isinstance(outputs, Mapping):
        if name in outputs:
            return outputs[name]
        got = f"entries {sorted(outputs)}"
    else:
        if name == OUTPUT:
            return outputs
        prefix, _, index = name.partition("/")
        if prefix == OUTPUT and index.isdigit() and isinstance(outputs, (tuple, list)):
            if int(index) < len(outputs):
                return outputs[int(index)]
        got = f"a {type(outputs).__name__} (name it {OUTPUT!r}"
        got += f", its items {OUTPUT!r}/0, /1...)" if isinstance(outputs, (tuple, list)) else ")"
    raise ValueError(
        f"{_hook_name(hook)} fetches {name!r}, but the step returned no entry of that name. "
        f"The step returned {got}."
    )


class EagerBackend:
    """`Backend` for an `EagerSession`.

    Args:
      sess: The `EagerSession` to run steps in.
    """

    def __init__(self, sess: EagerSession) -> None:
        self._sess = sess
        self._variable = get_global_step()
        self._values_checked = False  # Whether a run of values alone was checked.
        # Closures in flight (ClusterCoordinator): the device lags the count.
        self._in_flight = sess.coordinator is not None
        # Whether a run whose hooks read the device has the step return the global step.
        self._reads_with_step = (
            not self._in_flight
            and is_plain_resource_variable(self._variable)
            and not tf.distribute.has_strategy()
        )
        self._counter = StepCounter(None if self._variable is None else self._read_step)
        # Runs whose hooks read the device until the next check of the step, and the gap
        # after it (doubling up to `MOST_UNCHECKED`).
        self._unchecked, self._check_gap = 1, 1
        if self._variable is not None:
            self._counter.read_before()
        self._loops = EagerLoops(sess, self._counter, self._variable)
        self.start_run: Callable[[], None] = self._counter.start_run  # Called on every run.
        self._stepped: object = None  # The fetches of the last run that called a step.
        if self._in_flight and self._variable is not None:
            closure_steps = ClosureSteps(
                self._counter,
                lambda: int(to_numpy(self._variable)),
                lambda: step_names(self._stepped, is_step_callable, describe),
            )
            sess.call_after_join(closure_steps.after_join)

    def forget_step(self) -> None:
        self._counter.forget_step()

    def _read_step(self) -> int:
        assert self._variable is not None
        self._sess.settle()
        return int(to_numpy(self._variable))

    def global_step_before(self) -> int | None:
        return self._counter.before

    def global_step_after(self, reaching: Callable[[int], bool] | None = None) -> int | None:
        value = self._counter.known_after()
        if value is None or (reaching is not None and not reaching(value)):
            return None
        return value

    def loop_runner(self) -> EagerLoops:
        return self._loops

    def run(
        self,
        fetches: Fetches,
        hook_fetches: HookResults,
        feed_dict: FeedDict | None,
        options: tf.compat.v1.RunOptions | None,
        run_metadata: tf.compat.v1.RunMetadata | None,
        feed_owners: Mapping[FeedKey, str],
    ) -> tuple[Results, HookResults]:
        # A run that is not a training step is a side call: an owned global
        # step is not advanced by it, and the host copy is read again when needed.
        counter, loops = self._counter, self._loops
        counted = not counter.uncounted
        known = fetches is loops.last_fetches  # The last step object's answer, without a call.
        calls = counted and (loops.last_calls if known else loops.calls_a_step(fetches))
        if counted and not calls and not self._values_checked:
            self._check_value_run(fetches)
        # Hooks read the device on this run: a check of the step has the step's call
        # return the global step too.
        check = bool(hook_fetches) and calls and self._check_due()
        read_with = self._variable if check and self._reads_with_step else None
        outputs = self._sess.call(fetches, feed_dict, feed_owners, counted, read_with)
        counter.end_run(calls)
        if calls:
            self._stepped = fetches
        if not hook_fetches:
            if counter.drifted:
                counter.refresh()
            return outputs, {}
        return outputs, self._hook_values(hook_fetches, outputs, read_with is not None, check)

    def _check_due(self) -> bool:
        """Whether this run, whose hooks read the device, checks the host count: every run
        once drifted, else the 1st, 3rd, 7th ... then every `MOST_UNCHECKED`-th."""
        self._unchecked -= 1
        if self._unchecked and not self._counter.drifted:
            return False
        self._check_gap = min(2 * self._check_gap, MOST_UNCHECKED)
        self._unchecked = self._check_gap
        return True

    def _hook_values(
        self, hook_fetches: HookResults, outputs: Results, step_read: bool, check: bool
    ) -> HookResults:
        """The values the hooks asked for, then the host count compared (`_compare_count`).

        `step_read`: whether the step's call returned the global step (`returning_global_step`).
        """
        if self._in_flight:  # Hooks' values may wait for closures: a bounded wait first.
            self._sess.wait_for_closures()
        read: dict[int, Any] = {}  # id of a variable or tensor -> its value, this step.
        returned = self._sess.take_global_step() if step_read else None
        if returned is not None:  # Hooks fetching the global step get this value too.
            read[id(self._variable)] = to_numpy(returned)
        hook_results: HookResults = {}
        for hook, requested in hook_fetches.items():
            if isinstance(requested, CONTAINERS):
                value_of = partial(self._value_of, outputs, read, hook)
                hook_results[hook] = map_structure(value_of, requested)
            else:
                hook_results[hook] = self._value_of(outputs, read, hook, requested)
        if not self._in_flight:  # Read after a join, only when asked (module docstring).
            self._compare_count(read.get(id(self._variable)), check)
        return hook_results

    def _compare_count(self, value: Any, check: bool) -> None:
        """Takes the step `value` read with the hooks' values (`None`: not read) when the count
        is unknown; compares the count with the variable when `check` or `value` was read."""
        counter = self._counter
        if counter.stale:
            if value is not None:
                counter.adopt(int(value))
        elif counter.after is not None and (check or value is not None):
            self._check_step(value)

    def _check_value_run(self, fetches: Fetches) -> None:
        """`sess.run(train_step())`: an error or a WARNING (`check_value_run`), the first time."""
        self._values_checked = only_values(fetches)
        if self._values_checked:
            readable = self._variable is not None and not self._in_flight
            check_value_run(
                fetches,
                self._sess.owned_global_step is not None,
                self._counter.before,
                self._read_step if readable else None,
            )

    def _check_step(self, value: Any) -> None:
        """Compares the host copy with the variable's `value` (`None`: read it now)."""
        assert self._variable is not None
        actual = int(to_numpy(self._variable) if value is None else value)
        if actual != self._counter.after:
            self._counter.drift(
                "The global step is %d after this run, but the session counted %s: the step "
                "does not advance the global step by exactly one per run. Hooks now read it "
                "from the device after every run (slower). Increment it once in the step, "
                "e.g. global_step.assign_add(1).",
                actual,
                self._counter.after,
            )
        self._counter.adopt(actual)

    @staticmethod
    def _value_of(outputs: object, read: dict[int, Any], hook: object, leaf: object) -> object:
        """The value of a hook's fetch `leaf` (`read`: the variables and tensors read so far)."""
        fetch = leaf

        def to_host(value: object) -> object:
            if isinstance(value, _REMOTE_VALUE):
                # ClusterCoordinator.schedule's result: fetched (waiting for
                # its closure) only now that a hook asks for it.
                return map_structure(to_host, value.fetch())
            if is_per_replica(value):
                return host_value(value, _hook_name(hook), fetch)
            return to_numpy(value)

        if isinstance(leaf, str):  # A step output's name, most often a key of the step's dict.
            if type(outputs) is dict and leaf in outputs:
                leaf = outputs[leaf]
            else:
                leaf = _output_entry(hook, leaf, outputs)
        elif is_step_callable(leaf):
            read.clear()
            return map_structure(to_host, leaf())
        if isinstance(leaf, (tf.Tensor, tf.Variable)):
            # Alive for the whole step (held by the request or the outputs),
            # so its id names it until the step ends.
            key = id(leaf)
            if key not in read:
                read[key] = to_numpy(leaf)
            return read[key]
        return map_structure(to_host, leaf)


FIX = "pass the step itself: sess.run(train_step), not sess.run(train_step())"


def only_values(fetches: Fetches) -> bool:
    """Whether `fetches` (a run calling no step) holds tensors and nothing to run or read."""
    leaves = tf.nest.flatten(fetches)
    return bool(leaves) and all(isinstance(leaf, tf.Tensor) for leaf in leaves)


def _described(fetches: Fetches) -> str:
    if isinstance(fetches, tf.Tensor):
        return "a tensor"
    count = len(tf.nest.flatten(fetches))
    return f"a {type(fetches).__name__} of {count} tensor{'s' if count != 1 else ''}"


def check_value_run(
    fetches: Fetches, owned: bool, counted_step: int | None, read_step: Callable[[], int] | None
) -> None:
    """Raises or warns for a run of values already computed (`sess.run(train_step())`).

    It runs nothing: an error where that can only be a mistake (the session
    owns the global step, or the step moved outside the session), otherwise
    a warning, once per session.

    Args:
      fetches: The run's fetches: only tensors (`only_values`).
      owned: Whether the session owns the global step.
      counted_step: The step service's global step before this run, or `None`.
      read_step: Reads the global step variable (a device read), or `None`
        when it must not be read now.

    Raises:
      TypeError: When a run of these fetches can only be a mistake (also
        when they come from a graph: `graph_fetch_error`).
    """
    graph_error = graph_fetch_error(fetches)
    if graph_error is not None:
        raise graph_error
    given = (
        f"MonitoredSession.run() was given {_described(fetches)}, values already computed, "
        "instead of a step to run: in eager mode run() calls the step"
    )
    if owned:
        raise TypeError(
            f"{given}; {FIX}. This run calls nothing, and the global step, which the session "
            f"advances for each step it calls, would stay at {counted_step}: StopAtStepHook and "
            "every step-based hook would never act."
        )
    if counted_step is not None and read_step is not None:
        actual = read_step()
        if actual != counted_step:
            raise TypeError(
                f"{given}; {FIX}. The global step moved from {counted_step} to {actual} outside "
                "the session, so a step ran outside it: its hooks would see the wrong steps."
            )
    logger.warning(
        "%s, so this run calls nothing and advances no step. If you wrote "
        "sess.run(train_step()), %s. (Logged once per session.)",
        given,
        FIX,
    )


def host_value(
    value: tf.distribute.DistributedValues, hook_name: str, fetch: Fetches
) -> np.ndarray | np.generic:
    """One NumPy value for a per-replica `value`: the mean over this process's replicas
    of a floating-point value, else the value they all hold.

    Args:
      value: A `tf.distribute.DistributedValues` that is not a variable.
      hook_name: The hook that fetched it, for the error.
      fetch: What the hook fetched (e.g. ``"loss"``), for the error.

    Raises:
      ValueError: If non-floating values differ between replicas.
    """
    replicas = [np.asarray(to_numpy(item)) for item in local_replica_values(value)]
    first = replicas[0]
    if np.issubdtype(first.dtype, np.inexact):
        return np.mean(np.stack(replicas), axis=0).astype(first.dtype)[()]
    if all(item.shape == first.shape and np.array_equal(item, first) for item in replicas):
        return first[()]
    raise ValueError(
        f"{hook_name} fetches {fetch!r}, a per-replica value of strategy.run whose "
        f"{len(replicas)} replicas differ ({', '.join(str(item) for item in replicas)}), and "
        f"its dtype ({first.dtype}) has no mean. Reduce it in the step, e.g. "
        "strategy.reduce(tf.distribute.ReduceOp.SUM, value, axis=None), and return that."
    )
