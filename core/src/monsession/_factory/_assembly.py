"""The session `MonitoredTrainingSession` returns: its hooks and its creator.

The lock of `checkpoint_dir` is not core's: the family that saves
checkpoints takes it when it builds its hook (see `lock_checkpoint_dir`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from monsession._api._hook_api import SessionRunHook
from monsession._distribution import _strategy_training
from monsession._distribution._distributed import multi_worker_strategy
from monsession._distribution._replicas import EagerReplicaSessionCreator
from monsession._factory._settings import USE_DEFAULT, stop_signals
from monsession._factory._validation import check_families_installed, warn_same_kind
from monsession._plugins import _defaults
from monsession._plugins._hookspecs import TrainingSettings
from monsession._session._monitored_session import MonitoredSession
from monsession._session._session_creators import (
    ChiefSessionCreator,
    SessionCreator,
    WorkerSessionCreator,
)

if TYPE_CHECKING:
    import tensorflow as tf


def assemble(
    settings: TrainingSettings,
    hooks: list[SessionRunHook] | None,
    chief_only_hooks: list[SessionRunHook] | None,
    stop_grace_period_secs: float,
    stop_on_signals: bool | Iterable[int] | None,
    steps_per_execution: int | str,
) -> MonitoredSession:
    """The chief's, a worker's, or (eager, inside a multi-worker strategy) a replica's session."""
    strategy = multi_worker_strategy() if settings.eager else None
    if strategy is not None:
        return _session_in_strategy(
            strategy,
            settings,
            hooks,
            chief_only_hooks,
            stop_grace_period_secs,
            stop_on_signals,
            steps_per_execution,
        )
    if not settings.is_chief:
        return MonitoredSession(
            session_creator=_worker_creator(settings),
            hooks=hooks or [],
            stop_grace_period_secs=stop_grace_period_secs,
            stop_on_signals=stop_signals(stop_on_signals),
            steps_per_execution=steps_per_execution,
        )
    all_hooks = chief_hooks(settings, chief_only_hooks, hooks)
    chief_creator = ChiefSessionCreator(
        scaffold=settings.scaffold,
        checkpoint_dir=settings.checkpoint_dir,
        master=settings.master,
        config=settings.config,
    )
    return MonitoredSession(
        session_creator=chief_creator,
        hooks=all_hooks,
        stop_grace_period_secs=stop_grace_period_secs,
        stop_on_signals=stop_signals(stop_on_signals),
        steps_per_execution=steps_per_execution,
    )


def _worker_creator(settings: TrainingSettings) -> SessionCreator:
    """A worker's creator: it restores its own copy (eager) or waits for the chief (graph)."""
    if settings.eager:
        return EagerReplicaSessionCreator(
            settings.scaffold, settings.checkpoint_dir, None, settings.max_wait_secs
        )
    return WorkerSessionCreator(
        scaffold=settings.scaffold,
        master=settings.master,
        config=settings.config,
        max_wait_secs=settings.max_wait_secs,
    )


def _session_in_strategy(
    strategy: tf.distribute.Strategy,
    settings: TrainingSettings,
    hooks: list[SessionRunHook] | None,
    chief_only_hooks: list[SessionRunHook] | None,
    stop_grace_period_secs: float,
    stop_on_signals: bool | Iterable[int] | None,
    steps_per_execution: int | str,
) -> MonitoredSession:
    """An eager session on one worker of a multi-worker strategy."""
    signals = _strategy_training.stop_signals_in_strategy(
        strategy, stop_on_signals, given=stop_on_signals is not USE_DEFAULT
    )
    steps_per_execution = _strategy_training.steps_per_execution_in_strategy(
        strategy, steps_per_execution
    )

    replica = _strategy_training.settings_in_strategy(strategy, settings)
    if replica.is_chief:
        all_hooks = chief_hooks(replica, chief_only_hooks, hooks)
    else:
        all_hooks = _strategy_training.worker_hooks(strategy, replica, hooks)
    return _strategy_training.replica_session(
        strategy, replica, all_hooks, stop_grace_period_secs, signals, steps_per_execution
    )


def chief_hooks(
    settings: TrainingSettings,
    chief_only_hooks: Iterable[SessionRunHook] | None,
    hooks: Iterable[SessionRunHook] | None,
) -> list[SessionRunHook]:
    """The chief's hooks in TensorFlow's order: chief-only, defaults, the user's."""
    check_families_installed(settings)
    chief_only_hooks, hooks = list(chief_only_hooks or []), list(hooks or [])
    defaults = _defaults.default_hook_items(settings)
    warn_same_kind(settings, defaults, [*chief_only_hooks, *hooks])
    return [*chief_only_hooks, *(item.hook for item in defaults), *hooks]
