"""The session `MonitoredTrainingSession` returns: hooks, creator, directory lock."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from monsession._api._hook_api import SessionRunHook
from monsession._distribution import _strategy_training
from monsession._distribution._distributed import is_chief, multi_worker_strategy
from monsession._distribution._replicas import EagerReplicaSessionCreator
from monsession._durability._directory_lock import lock_checkpoint_dir
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


def assemble(
    settings: TrainingSettings,
    hooks: list[Any] | None,
    chief_only_hooks: list[Any] | None,
    stop_grace_period_secs: float,
    stop_on_signals: Any,
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
    return holding_directory_lock(
        settings,
        lambda: MonitoredSession(
            session_creator=chief_creator,
            hooks=all_hooks,
            stop_grace_period_secs=stop_grace_period_secs,
            stop_on_signals=stop_signals(stop_on_signals),
            steps_per_execution=steps_per_execution,
        ),
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
    strategy: Any,
    settings: TrainingSettings,
    hooks: list[Any] | None,
    chief_only_hooks: list[Any] | None,
    stop_grace_period_secs: float,
    stop_on_signals: Any,
    steps_per_execution: int | str,
) -> MonitoredSession:
    """An eager session on one worker of a multi-worker strategy; the chief holds the lock."""
    signals = _strategy_training.stop_signals_in_strategy(
        strategy, stop_on_signals, given=stop_on_signals is not USE_DEFAULT
    )
    steps_per_execution = _strategy_training.steps_per_execution_in_strategy(
        strategy, steps_per_execution
    )

    def in_strategy() -> MonitoredSession:
        replica = _strategy_training.settings_in_strategy(strategy, settings)
        if replica.is_chief:
            all_hooks = chief_hooks(replica, chief_only_hooks, hooks)
        else:
            all_hooks = _strategy_training.worker_hooks(strategy, replica, hooks)
        return _strategy_training.replica_session(
            strategy, replica, all_hooks, stop_grace_period_secs, signals, steps_per_execution
        )

    if not is_chief(strategy):
        return in_strategy()
    return holding_directory_lock(settings, in_strategy)


def holding_directory_lock(
    settings: TrainingSettings, make_session: Callable[[], MonitoredSession]
) -> MonitoredSession:
    """The chief's session, holding the lock of `checkpoint_dir` until it closes.

    Only a chief that saves checkpoints locks the directory: a second one
    fails fast with `DirectoryLockedError` naming the holder. Without a
    family that saves them, nothing will write there: no lock, and the
    directory is not created.
    """
    saves = settings.save_checkpoint_secs or settings.save_checkpoint_steps
    saver = "save_checkpoint_secs" in _defaults.training_argument_owners()
    if not (settings.checkpoint_dir and saves and saver):
        return make_session()
    lock = lock_checkpoint_dir(settings.checkpoint_dir)
    if lock is None:
        return make_session()
    try:
        session = make_session()
    except BaseException:
        lock.release()
        raise
    session.call_on_close(lock.release)
    return session


def chief_hooks(
    settings: TrainingSettings,
    chief_only_hooks: Iterable[SessionRunHook] | None,
    hooks: Iterable[SessionRunHook] | None,
) -> list[Any]:
    """The chief's hooks in TensorFlow's order: chief-only, defaults, the user's."""
    check_families_installed(settings)
    chief_only_hooks, hooks = list(chief_only_hooks or []), list(hooks or [])
    defaults = _defaults.default_hook_items(settings)
    warn_same_kind(settings, defaults, [*chief_only_hooks, *hooks])
    return [*chief_only_hooks, *(item.hook for item in defaults), *hooks]
