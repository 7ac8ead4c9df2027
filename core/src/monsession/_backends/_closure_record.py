"""Under a `ClusterCoordinator`: which worker ran each closure, and which were put back.

TensorFlow's `ClusterCoordinator` hands each scheduled closure to the first
free worker and, when that worker fails while running it, puts the closure
back for another worker (at least once execution). It keeps no record of
either. `closure_record(coordinator)` keeps one from the first call on (a
session calls it when it is created on the coordinator), so that a test or
a hook can tell that a dead worker's closure ran again elsewhere.
"""

from __future__ import annotations

import dataclasses
import threading
import weakref
from typing import Any

_RECORDS: weakref.WeakKeyDictionary[Any, ClosureRecord] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


@dataclasses.dataclass
class ClosureRecord:
    """What the workers of one `ClusterCoordinator` did with its closures.

    Attributes:
      ran: Closures each worker ran to the end (a closure that raised counts),
        by worker index.
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

    Counting starts at the first call for a coordinator (a monitored session
    created on it makes that call), and goes on for the coordinator's life.

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
    from monsession._tf_compat import watch_closures

    watch_closures(
        coordinator,
        ran=lambda worker: record._count(record.ran, worker),
        put_back=lambda worker: record._count(record.put_back, worker),
    )
    return record
