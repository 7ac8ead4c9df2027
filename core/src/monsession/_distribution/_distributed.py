"""Roles in a distributed job: who is the chief, and how eager workers start.

The roles are TensorFlow's. In graph mode the caller says who is chief
(`MonitoredTrainingSession(is_chief=...)`) and TensorFlow's cluster runtime
(`tf.distribute.Server`, `SessionManager`) does the rest. In eager mode a
`tf.distribute` strategy describes the cluster: its cluster resolver names
this task, and the chief is the task of type ``"chief"``, or worker 0 when
the cluster has no chief task (TensorFlow's rule for
`MultiWorkerMirroredStrategy`).
"""

from __future__ import annotations

import logging
import signal
from typing import Any

import tensorflow as tf

from monsession._backends._eager import EagerSession
from monsession._durability._retry import RetryPolicy, error_summary
from monsession._session._scaffold import Scaffold
from monsession._session._session_creators import SessionCreator, create_eager_session

logger = logging.getLogger("monsession")

_WORKER_JOBS = ("chief", "worker")

PREEMPTION_ERRORS = (tf.errors.AbortedError, tf.errors.UnavailableError)


def peer_failure_reason(strategy: Any) -> str:
    """Why a preemption error under collective ops is not retried (for messages)."""
    return (
        f"under {describe(strategy)} it means that a worker of the job failed or cannot be "
        "reached, and collective ops cannot go on in this process (TensorFlow aborted them). "
        "Restart every worker of the job: each resumes from the chief's latest checkpoint"
    )


def peer_failed(strategy: Any, error: Exception, while_doing: str) -> Exception:
    """The clear error for `error` from a collective op of `strategy` (same TensorFlow type)."""
    message = (
        f"MonitoredSession: {while_doing} failed with {type(error).__name__} "
        f"({error_summary(error)}): "
        f"{peer_failure_reason(strategy)}."
    )
    return type(error)(None, None, message)


def _resolver_is_chief(resolver: Any) -> bool:
    """TensorFlow's chief rule for the task a cluster resolver names."""
    task_type = getattr(resolver, "task_type", None) if resolver is not None else None
    if not task_type:
        return True  # Not part of a cluster: a single process is its own chief.
    if task_type == "chief":
        return True
    if task_type == "worker":
        return resolver.task_id == 0 and "chief" not in resolver.cluster_spec().jobs
    return False  # "ps", "evaluator": never the chief.


def is_chief(strategy: Any = None) -> bool:
    """Whether this process is the chief of its `tf.distribute` cluster.

    The chief is the task of type ``"chief"``, or worker 0 when the cluster has
    no ``"chief"`` task; parameter servers and evaluators are never the chief;
    a process outside any cluster is its own chief.

    ```python
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    if monsession.is_chief(strategy):
        export_model(...)
    ```

    Args:
      strategy: A `tf.distribute.Strategy`. By default the current one (inside
        `strategy.scope()`); outside any scope, the cluster described by the
        ``TF_CONFIG`` environment variable (so graph-mode jobs can use it too).

    Returns:
      `True` on the chief.
    """
    if strategy is None and tf.distribute.has_strategy():
        strategy = tf.distribute.get_strategy()
    if strategy is None:
        resolver: Any = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    else:
        resolver = getattr(strategy, "cluster_resolver", None)
    return _resolver_is_chief(resolver)


def multi_worker_strategy() -> Any:
    """The current strategy if it spans several worker processes, else `None`.

    Only a strategy entered with `strategy.scope()` (or set with
    `tf.distribute.experimental_set_strategy`) counts.
    """
    if not tf.distribute.has_strategy():
        return None
    strategy = tf.distribute.get_strategy()
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not getattr(resolver, "task_type", None):
        return None
    jobs = resolver.cluster_spec().as_dict()
    workers = sum(len(jobs.get(job, ())) for job in _WORKER_JOBS)
    return strategy if workers > 1 else None


def uses_collectives(strategy: Any) -> bool:
    """Whether every worker of `strategy` must run the same ops in the same order.

    True for `MultiWorkerMirroredStrategy`: its variables are kept in sync by
    collective ops, which a worker that skips them would leave waiting.
    """
    return isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy)


def describe(strategy: Any) -> str:
    """``"MultiWorkerMirroredStrategy worker:1"`` for messages."""
    resolver = strategy.cluster_resolver
    # TensorFlow's class is CollectiveAllReduceStrategy; users know its public name.
    name = "MultiWorkerMirroredStrategy" if uses_collectives(strategy) else type(strategy).__name__
    return f"{name} {resolver.task_type}:{resolver.task_id}"


def wait_for_workers(strategy: Any, max_wait_secs: float) -> None:
    """Blocks until every worker of `strategy` gets here: an all-reduce as barrier.

    Raises:
      tf.errors.DeadlineExceededError: If a worker did not arrive within
        `max_wait_secs`.
    """
    options = tf.distribute.experimental.CommunicationOptions(
        timeout_seconds=max_wait_secs if max_wait_secs and max_wait_secs > 0 else None
    )

    @tf.function(autograph=False)
    def arrive() -> Any:
        ones = strategy.run(lambda: tf.ones((), tf.int32))
        return strategy.extended.reduce_to(
            tf.distribute.ReduceOp.SUM, ones, destinations=ones, options=options
        )

    arrived = strategy.experimental_local_results(arrive())[0]
    logger.info("%s: all %d replicas are ready.", describe(strategy), int(arrived.numpy()))


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
        strategy: Any,
        max_wait_secs: float,
    ) -> None:
        self._scaffold = scaffold
        self._checkpoint_dir = checkpoint_dir
        self._strategy = strategy
        self._max_wait_secs = max_wait_secs
        if strategy is not None:
            # A peer failed: collective ops in this process are aborted for good.
            self._retry_policy = RetryPolicy(
                max_attempts=0, no_retry_reason=peer_failure_reason(strategy)
            )

    def create_session(self) -> EagerSession:
        self._scaffold.finalize()
        session = create_eager_session(self._scaffold, self._checkpoint_dir)
        if self._strategy is not None:
            wait_for_workers(self._strategy, self._max_wait_secs)
        return session


class StopAgreement:
    """Agrees, at each step boundary, whether some worker received a stop signal.

    Under collective ops every worker must stop after the same step and take
    part in the same final save, but a signal usually reaches one worker
    only. After each step every worker contributes the signal it received (if
    any) to one all-reduce of a tiny vector, one slot per signal number; all
    of them then see the same answer, at the same step.

    Args:
      strategy: The multi-worker strategy (`MultiWorkerMirroredStrategy`).
    """

    def __init__(self, strategy: Any) -> None:
        self._strategy = strategy
        slots = int(signal.NSIG)

        @tf.function(autograph=False)
        def all_reduce(received: Any) -> Any:
            votes = tf.one_hot(received, slots, dtype=tf.int32)
            per_replica = strategy.run(lambda: tf.identity(votes))
            return strategy.extended.reduce_to(
                tf.distribute.ReduceOp.SUM, per_replica, destinations=per_replica
            )

        self._all_reduce = all_reduce

    def agreed_signal(self, received: int | None) -> int | None:
        """The signal the workers stop on, or `None`: every worker must call this once per step.

        Args:
          received: The signal this worker received, or `None`.

        Returns:
          The lowest-numbered signal some worker received, or `None`.
        """
        # one_hot(-1) is all zeros: no vote. Slot 0 is no signal number.
        try:
            result = self._all_reduce(tf.constant(received or -1, tf.int32))
        except PREEMPTION_ERRORS as error:
            failed = peer_failed(self._strategy, error, "agreeing on a stop signal")
            logger.error("%s", failed)
            raise failed from error
        counts = self._strategy.experimental_local_results(result)[0].numpy()
        for signum, count in enumerate(counts):
            if signum and count:
                return signum
        return None
