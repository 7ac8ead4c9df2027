"""The workers of a multi-worker strategy together: failures, barrier, stop agreement."""

from __future__ import annotations

import logging
import signal
import weakref
from typing import Any

import numpy as np
import tensorflow as tf

from monsession._distribution._distributed import describe
from monsession._durability._preemption_errors import PREEMPTION_ERRORS
from monsession._durability._retry import error_summary
from monsession._fusion._plan import MAX_COUNTED_SILENT_STEPS

logger = logging.getLogger("monsession")


def peer_failure_reason(strategy: tf.distribute.Strategy) -> str:
    """Why a preemption error under collective ops is not retried (for messages)."""
    return (
        f"under {describe(strategy)} it means that a worker of the job failed or cannot be "
        "reached, and collective ops cannot go on in this process (TensorFlow aborted them). "
        "Restart every worker of the job: each resumes from the chief's latest checkpoint"
    )


def peer_failed(strategy: tf.distribute.Strategy, error: Exception, while_doing: str) -> Exception:
    """The clear error for `error` from a collective op of `strategy` (same TensorFlow type)."""
    message = (
        f"MonitoredSession: {while_doing} failed with {type(error).__name__} "
        f"({error_summary(error)}): "
        f"{peer_failure_reason(strategy)}."
    )
    return type(error)(None, None, message)


def wait_for_workers(strategy: tf.distribute.Strategy, max_wait_secs: float) -> None:
    """Blocks until every worker of `strategy` gets here: an all-reduce as barrier.

    Raises:
      tf.errors.DeadlineExceededError: If a worker did not arrive within
        `max_wait_secs`.
    """
    options = tf.distribute.experimental.CommunicationOptions(
        timeout_seconds=max_wait_secs if max_wait_secs and max_wait_secs > 0 else None
    )

    @tf.function(autograph=False)
    def arrive() -> tf.Tensor:
        ones = strategy.run(lambda: tf.ones((), tf.int32))
        return strategy.extended.reduce_to(
            tf.distribute.ReduceOp.SUM, ones, destinations=ones, options=options
        )

    arrived = strategy.experimental_local_results(arrive())[0]
    logger.info("%s: all %d replicas are ready.", describe(strategy), int(arrived.numpy()))


# Each strategy's agreement: every session of a worker reuses its traced all-reduce.
_AGREEMENTS: weakref.WeakKeyDictionary[Any, StepAgreement] = weakref.WeakKeyDictionary()


class StepAgreement:
    """Agrees, at each step boundary, on a stop signal and on the next run's fused steps.

    Under collective ops every worker must run the same steps and stop after
    the same one, but a signal usually reaches one worker only, and each
    worker's hooks plan their own next action. After each run every worker
    contributes the signal it received (if any) and how many silent steps it
    could fuse into the next run to one all-reduce of a tiny vector; all of
    them then see the same answer: the lowest signal received, and the fewest
    silent steps (which no worker's hook acts on).

    The vector holds one slot per signal number, then one slot per count of
    silent steps from 0 to `MAX_COUNTED_SILENT_STEPS` (collective all-reduces
    only sum: the fewest is the first count some worker voted for).

    Build it with `StepAgreement.of(strategy)`: one per strategy, traced once.

    Args:
      strategy: The multi-worker strategy (`MultiWorkerMirroredStrategy`).
    """

    @classmethod
    def of(cls, strategy: tf.distribute.Strategy) -> StepAgreement:
        """The agreement of `strategy`, shared by its sessions (its all-reduce traced once)."""
        agreement = _AGREEMENTS.get(strategy)
        if agreement is None:
            agreement = _AGREEMENTS[strategy] = cls(strategy)
        return agreement

    def __init__(self, strategy: tf.distribute.Strategy) -> None:
        self._strategy = strategy
        self._signal_slots = int(signal.NSIG)
        slots = self._signal_slots + MAX_COUNTED_SILENT_STEPS + 1

        @tf.function(autograph=False)
        def all_reduce(votes: tf.Tensor) -> tf.Tensor:
            per_replica = strategy.run(lambda: tf.identity(votes))
            return strategy.extended.reduce_to(
                tf.distribute.ReduceOp.SUM, per_replica, destinations=per_replica
            )

        self._all_reduce = all_reduce
        self._slots = slots

    def agree(self, received: int | None, silent_steps: int = 0) -> tuple[int | None, int]:
        """Every worker must call this once per step, with what it received and can fuse.

        Args:
          received: The signal this worker received, or `None`.
          silent_steps: How many silent steps this worker's hooks allow in the
            next run (0: none; at most `MAX_COUNTED_SILENT_STEPS` count).

        Returns:
          `(signal, silent_steps)`: the lowest-numbered signal some worker
          received (or `None`), and the fewest silent steps of any worker.
        """
        votes = np.zeros(self._slots, np.int32)
        if received:
            votes[received] = 1  # Slot 0 is no signal number.
        votes[self._signal_slots + max(0, min(silent_steps, MAX_COUNTED_SILENT_STEPS))] = 1
        try:
            result = self._all_reduce(tf.constant(votes))
        except PREEMPTION_ERRORS as error:
            failed = peer_failed(self._strategy, error, "agreeing on a stop signal and fused steps")
            logger.error("%s", failed)
            raise failed from error
        counts = self._strategy.experimental_local_results(result)[0].numpy()
        signals = np.flatnonzero(counts[1 : self._signal_slots])
        steps = np.flatnonzero(counts[self._signal_slots :])
        return (int(signals[0]) + 1 if signals.size else None), int(steps[0])
