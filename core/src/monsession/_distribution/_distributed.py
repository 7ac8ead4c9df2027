"""Multi-worker training: who is the chief, and `MonitoredTrainingSession` under a
multi-worker `tf.distribute` strategy.

The roles are TensorFlow's. In graph mode the caller says who is chief and TensorFlow's
cluster runtime does the rest; in eager mode the strategy's cluster resolver names this
task, and the chief is the task of type ``"chief"``, or worker 0 when there is none.
With collective ops (`MultiWorkerMirroredStrategy`) every worker must run the same ops in
the same order, saves and stop decisions included: the workers wait for each other once
restored, and agree after each step (`StepAgreement`). A failed peer ends the survivors:
collective ops cannot go on in their process.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import signal
import weakref
from collections.abc import Iterable
from typing import Any

import numpy as np
import tensorflow as tf

from monsession._api._hook_api import SessionRunHook
from monsession._backends._backend import WorkerRestore
from monsession._durability._retry import PREEMPTION_ERRORS, RetryPolicy, error_summary
from monsession._durability._signal_stop import resolve_stop_signals
from monsession._fusion._plan import MAX_COUNTED_SILENT_STEPS
from monsession._plugins import _families
from monsession._plugins._hookspecs import TrainingSettings
from monsession._session._session_creators import WorkerSessionCreator

logger = logging.getLogger("monsession")


def _resolver_is_chief(resolver: tf.distribute.cluster_resolver.ClusterResolver | None) -> bool:
    """TensorFlow's chief rule for the task a cluster resolver names."""
    task_type = getattr(resolver, "task_type", None)
    if resolver is None or not task_type:
        return True  # Not part of a cluster: a single process is its own chief.
    if task_type == "chief":
        return True
    if task_type == "worker":
        return resolver.task_id == 0 and "chief" not in resolver.cluster_spec().jobs
    return False  # "ps", "evaluator": never the chief.


def is_chief(strategy: tf.distribute.Strategy | None = None) -> bool:
    """Whether this process is the chief of its `tf.distribute` cluster: the task of type
    ``"chief"``, or worker 0 when there is none (never a parameter server or evaluator); a
    process outside any cluster is its own chief.

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
    return _resolver_is_chief(_cluster_resolver(strategy))


def _cluster_resolver(
    strategy: tf.distribute.Strategy | None,
) -> tf.distribute.cluster_resolver.ClusterResolver | None:
    """The cluster resolver of `strategy`, the current strategy, or ``TF_CONFIG``."""
    if strategy is None and tf.distribute.has_strategy():
        strategy = tf.distribute.get_strategy()
    if strategy is None:
        return tf.distribute.cluster_resolver.TFConfigClusterResolver()
    return getattr(strategy, "cluster_resolver", None)


def worker_output_dir(directory: str, strategy: tf.distribute.Strategy | None = None) -> str:
    """Where this process writes files that another worker of its job would name alike.

    Some of TensorFlow's files are named after the host and the second (the TF2 profiler's
    ``plugins/profile/<time>/<host>.xplane.pb``) or the global step (``timeline-<step>.json``):
    workers sharing a directory would overwrite each other's. The chief, and a process outside
    any cluster, write into `directory` itself; every other task into its own subdirectory
    ``<directory>/<task type>-<task id>`` (``worker-1``), a run of its own in TensorBoard.

    ```python
    profile_dir = monsession.plugins.worker_output_dir(self._output_dir)
    ```

    Args:
      directory: The directory the user gave.
      strategy: A `tf.distribute.Strategy`; by default as for `monsession.is_chief`.

    Returns:
      `directory`, or the subdirectory of this task.
    """
    resolver = _cluster_resolver(strategy)
    if _resolver_is_chief(resolver):
        return directory
    assert resolver is not None  # Outside a cluster a process is its own chief.
    return os.path.join(directory, f"{resolver.task_type}-{resolver.task_id}")


def uses_collectives(strategy: tf.distribute.Strategy) -> bool:
    """Whether every worker of `strategy` must run the same ops in the same order: its
    variables are kept in sync by collective ops (`MultiWorkerMirroredStrategy`)."""
    return isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy)


def schedules_closures(strategy: tf.distribute.Strategy) -> bool:
    """Whether steps under `strategy` schedule closures (`ParameterServerStrategy`)."""
    return isinstance(strategy, tf.distribute.experimental.ParameterServerStrategy)


def describe(strategy: tf.distribute.Strategy) -> str:
    """``"MultiWorkerMirroredStrategy worker:1"`` for messages."""
    resolver = strategy.cluster_resolver
    # TensorFlow's class is CollectiveAllReduceStrategy; users know its public name.
    name = "MultiWorkerMirroredStrategy" if uses_collectives(strategy) else type(strategy).__name__
    return f"{name} {resolver.task_type}:{resolver.task_id}"


_OWNER = "MonitoredTrainingSession"


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
    """Blocks until every worker of `strategy` gets here (an all-reduce as barrier); raises
    `DeadlineExceededError` if one did not arrive within `max_wait_secs`."""
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

    A signal usually reaches one worker, and each worker's hooks plan their own next action; yet
    all must run the same steps. After each run every worker votes in one all-reduce (it only
    sums) of a small vector: one slot per signal number, then one per count of silent steps.
    Build it with `StepAgreement.of(strategy)` (traced once).
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
        self._slots = self._signal_slots + MAX_COUNTED_SILENT_STEPS + 1

        @tf.function(autograph=False)
        def all_reduce(votes: tf.Tensor) -> tf.Tensor:
            per_replica = strategy.run(lambda: tf.identity(votes))
            return strategy.extended.reduce_to(
                tf.distribute.ReduceOp.SUM, per_replica, destinations=per_replica
            )

        self._all_reduce = all_reduce

    def agree(self, received: int | None, silent_steps: int = 0) -> tuple[int | None, int]:
        """Every worker must call this once per step, with the signal it `received` (or
        `None`) and the `silent_steps` its hooks allow next (at most `MAX_COUNTED_SILENT_STEPS`
        count); returns the lowest signal some worker received, and the fewest steps."""
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


class ReplicaSessionCreator(WorkerSessionCreator):
    """Creates the session of a worker of `MonitoredTrainingSession`, in either mode.

    Graph mode: it waits for the chief, as `WorkerSessionCreator`. Eager mode: the worker
    restores the latest checkpoint of the chief's `checkpoint_dir` into its own copy of the
    variables. Under collective ops (`strategy` given) every replica, the chief's too, is
    created so, then the workers wait for each other (at most `max_wait_secs`) before any step.
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


def steps_per_execution_in_strategy(
    strategy: tf.distribute.Strategy, steps_per_execution: int | str
) -> int | str:
    """`steps_per_execution` on a worker of `strategy`: kept under collective ops (agreed
    after each run) and `ParameterServerStrategy` (one closure); else 1, with a warning."""
    if steps_per_execution == 1 or uses_collectives(strategy) or schedules_closures(strategy):
        return steps_per_execution
    logger.warning(
        "MonitoredTrainingSession: steps_per_execution=%r is not used under %s; "
        "running single steps.",
        steps_per_execution,
        describe(strategy),
    )
    return 1


def stop_signals_in_strategy(
    strategy: tf.distribute.Strategy, stop_on_signals: bool | Iterable[int] | None, given: bool
) -> bool | Iterable[int] | None:
    """`stop_on_signals` under a multi-worker strategy (`given`: the caller set it).

    Under collective ops SIGTERM and SIGINT stop every worker by default (`None` too, so all
    decide alike): the workers agree after each step (`StepAgreement`), so all stop after the
    same step and save together. Other strategies leave signals alone unless asked.
    """
    if uses_collectives(strategy):
        if not given or stop_on_signals is None:
            stop_on_signals = True
        return resolve_stop_signals(stop_on_signals, lambda: True, _OWNER)
    if not given:
        logger.info(
            "MonitoredTrainingSession: under %s, SIGTERM and SIGINT are not handled "
            "(stop_on_signals=False).",
            describe(strategy),
        )
        return False
    return stop_on_signals


def settings_in_strategy(
    strategy: tf.distribute.Strategy, settings: TrainingSettings
) -> TrainingSettings:
    """The settings of this worker: the strategy decides `is_chief`; collectives save on steps.

    Raises:
      ValueError: If the caller said `is_chief=False` on the strategy's chief.
    """
    chief = is_chief(strategy)
    if chief and not settings.is_chief:
        raise ValueError(
            f"MonitoredTrainingSession: is_chief=False, but this process is the chief of "
            f"{describe(strategy)} (task type 'chief', or worker 0 when the "
            "cluster has no chief task). Under a multi-worker strategy the strategy decides "
            "who is chief: leave is_chief at its default."
        )
    if uses_collectives(strategy):
        settings = _save_steps_for_collectives(settings, type(strategy).__name__)
    return dataclasses.replace(settings, is_chief=chief)


def _save_steps_for_collectives(settings: TrainingSettings, strategy_name: str) -> TrainingSettings:
    """With collective ops every worker saves on the same steps: seconds become 1000 steps."""
    if not settings.save_checkpoint_secs:
        return settings
    logger.warning(
        "MonitoredTrainingSession: under %s every worker must save on the same steps; "
        "saving every 1000 steps instead of every %s seconds. Use save_checkpoint_steps.",
        strategy_name,
        settings.save_checkpoint_secs,
    )
    return dataclasses.replace(settings, save_checkpoint_secs=None, save_checkpoint_steps=1000)


def worker_hooks(
    strategy: tf.distribute.Strategy,
    settings: TrainingSettings,
    hooks: Iterable[SessionRunHook] | None,
) -> list[SessionRunHook]:
    """The hooks of a worker that is not the chief: with collective ops the default hooks
    with `saves_with_chief` (saving with the chief into a temporary directory), then `hooks`."""
    collective = uses_collectives(strategy)
    worker_settings = dataclasses.replace(settings, summary_dir=None, saves_with_chief=collective)
    saving = _families.default_hooks(worker_settings) if collective else []
    return [*saving, *(hooks or [])]


def replica_creator(
    strategy: tf.distribute.Strategy, settings: TrainingSettings
) -> ReplicaSessionCreator:
    """The creator of this worker's session: every worker restores the chief's latest
    checkpoint (with collective ops, then waits for the others)."""
    logger.info(
        "MonitoredTrainingSession: %s is %s.",
        describe(strategy),
        "the chief" if settings.is_chief else "not the chief",
    )
    return ReplicaSessionCreator(settings, strategy if uses_collectives(strategy) else None)


def step_agreement(
    strategy: tf.distribute.Strategy,
    stop_on_signals: bool | Iterable[int] | None,
    steps_per_execution: int | str,
) -> StepAgreement | None:
    """How the workers agree after each run on a stop signal and the next run's fused steps
    (with collective ops), or `None`."""
    if uses_collectives(strategy) and (stop_on_signals or steps_per_execution != 1):
        return StepAgreement.of(strategy)
    return None
