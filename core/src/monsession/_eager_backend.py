"""The eager backend: runs the step, then evaluates the hooks' fetches.

Nothing is read back from the device for a hook that fetched nothing, and
the caller's results stay tensors. A variable or tensor fetched by several
hooks (typically the global step) is read once per step; a callable fetch
may change variables, so reads after it start afresh.

The step service: the global step is read from the device once, when the
session is created (or re-created after recovery), then advanced on the
host by one for every run that calls a step. Whenever hooks make the
session read the device anyway, the variable is read too and compared; if
the step did not advance it by exactly one, a warning is logged once and
the backend reads the variable after every run from then on.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

import tensorflow as tf

from monsession._eager import (
    _CONTAINERS,
    EagerSession,
    _is_step_callable,
    _map_structure,
    to_numpy,
)
from monsession._global_step import get_global_step
from monsession._per_replica import host_value, is_per_replica

logger = logging.getLogger("monsession")

_REMOTE_VALUE = tf.distribute.experimental.coordinator.RemoteValue


def _calls_a_step(fetches: Any) -> bool:
    """Whether running `fetches` calls at least one callable."""
    if isinstance(fetches, _CONTAINERS):
        return any(_is_step_callable(leaf) for leaf in tf.nest.flatten(fetches))
    return _is_step_callable(fetches)


def _hook_name(hook: Any) -> str:
    return type(hook).__name__


class EagerBackend:
    """`Backend` for an `EagerSession`.

    Args:
      sess: The `EagerSession` to run steps in.
    """

    def __init__(self, sess: EagerSession) -> None:
        self._sess = sess
        self._variable = get_global_step()
        self._after: int | None = None  # After the last run: the host copy.
        self._before: int | None = None  # Before the current run.
        self._exact = False
        self._protos: tuple[Any, Any] | None = None
        self._last_fetches: Any = None
        self._last_calls = False
        if self._variable is not None:
            self._after = self._before = int(to_numpy(self._variable))

    def _calls_a_step(self, fetches: Any) -> bool:
        """Whether running `fetches` calls a step (remembered for the last step object)."""
        if fetches is self._last_fetches:
            return self._last_calls
        calls = _calls_a_step(fetches)
        if not isinstance(fetches, _CONTAINERS):  # A container may change between runs.
            self._last_fetches, self._last_calls = fetches, calls
        return calls

    def start_run(self) -> None:
        self._before = self._after

    def global_step_before(self) -> int | None:
        return self._before

    def global_step_after(self, reaching: Callable[[int], bool] | None = None) -> int | None:
        value = self._after
        if value is None or (reaching is not None and not reaching(value)):
            return None
        return value

    def empty_run_protos(self) -> tuple[Any, Any]:
        if self._protos is None:
            self._protos = (tf.compat.v1.RunOptions(), tf.compat.v1.RunMetadata())
        return self._protos

    def new_run_metadata(self) -> Any:
        return tf.compat.v1.RunMetadata()

    def run(
        self,
        fetches: Any,
        hook_fetches: dict[Any, Any],
        feed_dict: Any,
        options: Any,
        run_metadata: Any,
        feed_owners: Mapping[Any, str],
    ) -> tuple[Any, dict[Any, Any]]:
        outputs = self._sess.call(fetches, feed_dict, feed_owners)
        if self._after is not None and self._calls_a_step(fetches):
            self._after += 1
        if not hook_fetches:
            if self._exact:
                self._after = int(to_numpy(self._variable))
            return outputs, {}
        read: dict[int, Any] = {}  # id of a variable or tensor -> its value, this step.
        hook_results = {
            hook: self._evaluate(hook, requested, outputs, read)
            for hook, requested in hook_fetches.items()
        }
        if self._after is not None:
            self._check_step(read)
        return outputs, hook_results

    def _check_step(self, read: dict[int, Any]) -> None:
        """Compares the host copy with the variable, read with the hooks' values."""
        assert self._variable is not None
        value = read.get(id(self._variable))
        actual = int(to_numpy(self._variable) if value is None else value)
        if actual != self._after and not self._exact:
            logger.warning(
                "The global step is %d after this run, but the session counted %s: the step "
                "does not advance the global step by exactly one per run. Hooks now read it "
                "from the device after every run (slower). Increment it once in the step, "
                "e.g. global_step.assign_add(1).",
                actual,
                self._after,
            )
            self._exact = True
        self._after = actual

    @classmethod
    def _evaluate(cls, hook: Any, requested: Any, outputs: Any, read: dict[int, Any]) -> Any:
        if isinstance(requested, _CONTAINERS):
            return _map_structure(lambda leaf: cls._value_of(hook, leaf, outputs, read), requested)
        return cls._value_of(hook, requested, outputs, read)

    @staticmethod
    def _value_of(hook: Any, leaf: Any, outputs: Any, read: dict[int, Any]) -> Any:
        fetch = leaf

        def to_host(value: Any) -> Any:
            if isinstance(value, _REMOTE_VALUE):
                # ClusterCoordinator.schedule's result: fetched (waiting for
                # its closure) only now that a hook asks for it.
                return _map_structure(to_host, value.fetch())
            if is_per_replica(value):
                return host_value(value, _hook_name(hook), fetch)
            return to_numpy(value)

        if isinstance(leaf, str):
            if not isinstance(outputs, Mapping) or leaf not in outputs:
                available = sorted(outputs) if isinstance(outputs, Mapping) else []
                raise ValueError(
                    f"{_hook_name(hook)} fetches {leaf!r}, but the step returned no entry "
                    f"of that name. The step returned "
                    + (
                        f"entries {available}."
                        if isinstance(outputs, Mapping)
                        else f"a {type(outputs).__name__}, not a mapping."
                    )
                )
            leaf = outputs[leaf]
        elif _is_step_callable(leaf):
            read.clear()
            return _map_structure(to_host, leaf())
        if isinstance(leaf, (tf.Tensor, tf.Variable)):
            # Alive for the whole step (held by the request or the outputs),
            # so its id names it until the step ends.
            key = id(leaf)
            if key not in read:
                read[key] = to_numpy(leaf)
            return read[key]
        return _map_structure(to_host, leaf)
