"""The workers of a multi-worker strategy together: failures, barrier, stop agreement."""

from __future__ import annotations

import logging
import signal
from typing import Any

import tensorflow as tf

from monsession._distribution._distributed import describe
from monsession._durability._retry import error_summary
from monsession._session._session_layers import PREEMPTION_ERRORS

logger = logging.getLogger("monsession")


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
