"""The session of any worker of an eager job: each worker restores its own copy."""

from __future__ import annotations

from typing import TYPE_CHECKING

from monsession._backends._eager_restore import create_eager_session
from monsession._backends._mode import CreatedSession, Session
from monsession._distribution._peers import peer_failure_reason, wait_for_workers
from monsession._durability._retry import RetryPolicy
from monsession._session._scaffold import Scaffold
from monsession._session._session_creators import SessionCreator

if TYPE_CHECKING:
    import tensorflow as tf


class EagerReplicaSessionCreator(SessionCreator):
    """Creates the session of any worker of an eager job: every worker holds the state.

    In eager mode each process owns its copy of the variables, so every worker,
    not only the chief, restores the latest checkpoint of the chief's
    `checkpoint_dir` (or runs the scaffold's `init_fn` when there is none).
    With a multi-worker strategy, the workers then wait for each other (at most
    `max_wait_secs`), so that none starts a step, or a save, before all of them
    have restored.

    Args:
      scaffold: The `Scaffold` whose `saver` (a `tf.train.Checkpoint`) is restored.
      checkpoint_dir: The chief's checkpoint directory.
      strategy: The multi-worker strategy, or `None`.
      max_wait_secs: How long to wait for the other workers.
    """

    def __init__(
        self,
        scaffold: Scaffold,
        checkpoint_dir: str | None,
        strategy: tf.distribute.Strategy | None,
        max_wait_secs: float,
    ) -> None:
        self._scaffold = scaffold
        self._checkpoint_dir = checkpoint_dir
        self._strategy = strategy
        self._max_wait_secs = max_wait_secs
        if strategy is not None:
            # A peer failed: collective ops in this process are aborted for good.
            self.retry_policy = RetryPolicy(
                max_attempts=0, no_retry_reason=peer_failure_reason(strategy)
            )
        elif max_wait_secs > 0:
            self.retry_policy = RetryPolicy(deadline_secs=float(max_wait_secs))

    def create_session(self) -> Session:
        return self.create_restored().session

    def create_restored(self) -> CreatedSession:
        """This worker's session and the chief's checkpoint restored into it (`None`: none)."""
        self._scaffold.finalize()
        created = create_eager_session(
            self._scaffold.saver, self._scaffold.init_fn, self._checkpoint_dir
        )
        if self._strategy is not None:
            wait_for_workers(self._strategy, self._max_wait_secs)
        return created
