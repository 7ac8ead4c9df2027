"""`MonitoredTrainingSession` under a multi-worker `tf.distribute` strategy.

The strategy's cluster resolver decides who is chief. With collective ops
(`MultiWorkerMirroredStrategy`) every worker must run the same ops in the
same order, saves and stop decisions included.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

from monsession._api._hook_api import SessionRunHook
from monsession._distribution._distributed import (
    describe,
    is_chief,
    schedules_closures,
    uses_collectives,
)
from monsession._distribution._peers import StepAgreement
from monsession._distribution._replicas import ReplicaSessionCreator
from monsession._durability._signal_stop import resolve_stop_signals
from monsession._plugins import _families
from monsession._plugins._hookspecs import TrainingSettings

if TYPE_CHECKING:
    import tensorflow as tf

logger = logging.getLogger("monsession")

_OWNER = "MonitoredTrainingSession"


def steps_per_execution_in_strategy(
    strategy: tf.distribute.Strategy, steps_per_execution: int | str
) -> int | str:
    """`steps_per_execution` on a worker of `strategy`.

    Under collective ops the workers fuse the steps they agree on after each
    run (`StepAgreement`). Under `ParameterServerStrategy` the coordinator
    schedules the silent steps as one closure (`_fusion`). Other
    multi-worker strategies run single steps, with a warning.
    """
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
    """`stop_on_signals` under a multi-worker strategy.

    Under collective ops (`MultiWorkerMirroredStrategy`) SIGTERM and SIGINT
    stop every worker by default: the workers agree after each step whether
    one of them received a signal (`StepAgreement`), so all stop after the
    same step and take part in the same final save. `None` means on there
    too, so that every worker decides alike. Under other multi-worker
    strategies signals are left alone unless asked for.

    Args:
      strategy: The multi-worker strategy.
      stop_on_signals: The caller's argument.
      given: Whether the caller set it (else it is `USE_DEFAULT`).

    Returns:
      The resolved signals (a tuple) under collective ops, else `stop_on_signals`.
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
    """The hooks of a worker that is not the chief.

    With collective ops it takes part in the chief's saves: the checkpoint
    family's hooks with `saves_with_chief` save on the same steps into a
    temporary directory. Then come the caller's `hooks`.
    """
    collective = uses_collectives(strategy)
    worker_settings = dataclasses.replace(settings, summary_dir=None, saves_with_chief=collective)
    saving = _families.default_hooks(worker_settings) if collective else []
    return [*saving, *(hooks or [])]


def replica_creator(
    strategy: tf.distribute.Strategy, settings: TrainingSettings
) -> ReplicaSessionCreator:
    """The creator of this worker's session: every worker restores the chief's latest checkpoint.

    With collective ops the workers wait for each other once restored.
    """
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
    """How the workers agree after each run, or `None`.

    With collective ops they agree whether one of them received a stop
    signal and how many steps the next run fuses.
    """
    if uses_collectives(strategy) and (stop_on_signals or steps_per_execution != 1):
        return StepAgreement.of(strategy)
    return None
