"""The session of `MonitoredTrainingSession`'s workers, created through the mode."""

from __future__ import annotations

from typing import TYPE_CHECKING

from monsession._backends._mode import WorkerRestore
from monsession._distribution._peers import peer_failure_reason, wait_for_workers
from monsession._durability._retry import RetryPolicy
from monsession._plugins._hookspecs import TrainingSettings
from monsession._session._session_creators import WorkerSessionCreator

if TYPE_CHECKING:
    import tensorflow as tf


class ReplicaSessionCreator(WorkerSessionCreator):
    """Creates the session of a worker of `MonitoredTrainingSession`, in either mode.

    Graph mode: as `WorkerSessionCreator`, it waits until the chief has
    initialized or restored the model. Eager mode: each process owns its copy
    of the variables, so the worker restores the latest checkpoint of the
    chief's `checkpoint_dir` itself (or runs the scaffold's `init_fn` when
    there is none). Under a multi-worker strategy with collective ops every
    replica, the chief's included, is created so, and the workers then wait
    for each other (at most `max_wait_secs`), so that none starts a step, or
    a save, before all of them have restored.

    Args:
      settings: The settings of `MonitoredTrainingSession` on this worker.
      strategy: The multi-worker strategy whose workers wait for each other,
        or `None`.
    """

    def __init__(
        self, settings: TrainingSettings, strategy: tf.distribute.Strategy | None = None
    ) -> None:
        scaffold, master, config = settings.scaffold, settings.master, settings.config
        super().__init__(scaffold, master, config, settings.max_wait_secs)
        self._checkpoint_dir = settings.checkpoint_dir
        self._strategy = strategy
        if strategy is not None:
            # A peer failed: collective ops in this process are aborted for good.
            self.retry_policy = RetryPolicy(
                max_attempts=0, no_retry_reason=peer_failure_reason(strategy)
            )

    def _worker_restore(self) -> WorkerRestore:
        return WorkerRestore(
            self._wait_for_chief,
            self._scaffold.saver,
            self._scaffold.init_fn,
            self._checkpoint_dir,
            restores=True,
            wait_for_peers=None if self._strategy is None else self._wait_for_peers,
        )

    def _wait_for_peers(self) -> None:
        assert self._strategy is not None
        wait_for_workers(self._strategy, self._max_wait_secs)
