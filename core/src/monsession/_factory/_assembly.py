"""The session `MonitoredTrainingSession` returns: its hooks and its creator.

The lock of `checkpoint_dir` is not core's: the family that saves
checkpoints takes it when it builds its hook (see `lock_checkpoint_dir`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, NamedTuple

from monsession._api._hook_api import SessionRunHook
from monsession._backends._current_mode import current_mode
from monsession._distribution import _strategy_training
from monsession._distribution._replicas import ReplicaSessionCreator
from monsession._factory._settings import USE_DEFAULT
from monsession._factory._validation import check_families_installed, warn_same_kind
from monsession._plugins import _families
from monsession._plugins._hookspecs import TrainingSettings
from monsession._session._monitored_session import MonitoredSession
from monsession._session._session_creators import ChiefSessionCreator, SessionCreator

if TYPE_CHECKING:
    import tensorflow as tf


class SessionOptions(NamedTuple):
    """What `MonitoredTrainingSession` hands on to the `MonitoredSession` it returns."""

    stop_grace_period_secs: float
    stop_on_signals: bool | Iterable[int] | None
    steps_per_execution: int | str

    def session(self, creator: SessionCreator, hooks: list[SessionRunHook]) -> MonitoredSession:
        """The monitored session; signals are handled unless the caller said otherwise."""
        signals = True if self.stop_on_signals is USE_DEFAULT else self.stop_on_signals
        return MonitoredSession(
            session_creator=creator,
            hooks=hooks,
            stop_grace_period_secs=self.stop_grace_period_secs,
            stop_on_signals=signals,
            steps_per_execution=self.steps_per_execution,
        )


def assemble(
    settings: TrainingSettings,
    hooks: list[SessionRunHook] | None,
    chief_only_hooks: list[SessionRunHook] | None,
    options: SessionOptions,
) -> MonitoredSession:
    """The chief's, a worker's, or (inside a multi-worker strategy) a replica's session."""
    strategy = current_mode().multi_worker_strategy()
    if strategy is not None:
        return _session_in_strategy(strategy, settings, hooks, chief_only_hooks, options)
    if not settings.is_chief:
        return options.session(ReplicaSessionCreator(settings), hooks or [])
    chief_creator = ChiefSessionCreator(
        scaffold=settings.scaffold,
        checkpoint_dir=settings.checkpoint_dir,
        master=settings.master,
        config=settings.config,
    )
    return options.session(chief_creator, chief_hooks(settings, chief_only_hooks, hooks))


def _session_in_strategy(
    strategy: tf.distribute.Strategy,
    settings: TrainingSettings,
    hooks: list[SessionRunHook] | None,
    chief_only_hooks: list[SessionRunHook] | None,
    options: SessionOptions,
) -> MonitoredSession:
    """An eager session on one worker of a multi-worker strategy."""
    options = SessionOptions(
        options.stop_grace_period_secs,
        _strategy_training.stop_signals_in_strategy(
            strategy, options.stop_on_signals, given=options.stop_on_signals is not USE_DEFAULT
        ),
        _strategy_training.steps_per_execution_in_strategy(strategy, options.steps_per_execution),
    )
    replica = _strategy_training.settings_in_strategy(strategy, settings)
    if replica.is_chief:
        all_hooks = chief_hooks(replica, chief_only_hooks, hooks)
    else:
        all_hooks = _strategy_training.worker_hooks(strategy, replica, hooks)
    session = options.session(_strategy_training.replica_creator(strategy, replica), all_hooks)
    agreement = _strategy_training.step_agreement(
        strategy, options.stop_on_signals, options.steps_per_execution
    )
    if agreement is not None:
        session.agree_with_workers(agreement)
    return session


def chief_hooks(
    settings: TrainingSettings,
    chief_only_hooks: Iterable[SessionRunHook] | None,
    hooks: Iterable[SessionRunHook] | None,
) -> list[SessionRunHook]:
    """The chief's hooks in TensorFlow's order: chief-only, defaults, the user's."""
    check_families_installed(settings)
    chief_only_hooks, hooks = list(chief_only_hooks or []), list(hooks or [])
    defaults = _families.default_hook_items(settings)
    warn_same_kind(settings, defaults, [*chief_only_hooks, *hooks])
    return [*chief_only_hooks, *(item.hook for item in defaults), *hooks]
