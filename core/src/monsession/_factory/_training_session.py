"""`MonitoredTrainingSession`: a `MonitoredSession` set up for training.

The arguments are checked and resolved into `TrainingSettings` (`_settings`);
the session, its hooks and its creator are assembled from them here. The lock
of `checkpoint_dir` is not core's: the family that saves checkpoints takes it
when it builds its hook (see `lock_checkpoint_dir`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, NamedTuple

from monsession._api._hook_api import SessionRunHook
from monsession._backends._mode import current_mode
from monsession._distribution import _strategy_training
from monsession._factory._settings import (
    USE_DEFAULT,
    check_arguments,
    check_families_installed,
    training_settings,
    warn_same_kind,
)
from monsession._plugins import _families
from monsession._plugins._hookspecs import TrainingSettings
from monsession._session._monitored_session import MonitoredSession
from monsession._session._scaffold import Scaffold
from monsession._session._session_creators import ChiefSessionCreator, SessionCreator

if TYPE_CHECKING:
    import tensorflow as tf

__all__ = ["USE_DEFAULT", "MonitoredTrainingSession"]


def MonitoredTrainingSession(  # noqa: N802 - TensorFlow's name.
    master: str = "",
    is_chief: bool = True,
    checkpoint_dir: str | None = None,
    scaffold: Scaffold | None = None,
    hooks: Iterable[SessionRunHook] | None = None,
    chief_only_hooks: Iterable[SessionRunHook] | None = None,
    save_checkpoint_secs: float | None = USE_DEFAULT,
    save_summaries_steps: int | None = USE_DEFAULT,
    save_summaries_secs: float | None = USE_DEFAULT,
    config: tf.compat.v1.ConfigProto | None = None,
    stop_grace_period_secs: float = 120,
    log_step_count_steps: int | None = 100,
    max_wait_secs: float = 7200,
    save_checkpoint_steps: int | None = USE_DEFAULT,
    summary_dir: str | None = None,
    save_graph_def: bool = True,
    *,
    stop_on_signals: bool | Iterable[int] | None = USE_DEFAULT,
    steps_per_execution: int | str = 1,
) -> MonitoredSession:
    """Creates a `MonitoredSession` for training, with TensorFlow's default hooks.

    The chief initializes or restores the model from `checkpoint_dir` and runs
    `chief_only_hooks`, the default hooks and `hooks`, in that order. A worker
    waits up to `max_wait_secs` for the chief and runs only `hooks`.

    In eager mode a worker that is not the chief restores the latest checkpoint
    of `checkpoint_dir` too (each process holds its own copy of the state).
    Created inside the `scope()` of a multi-worker `tf.distribute` strategy
    (e.g. `MultiWorkerMirroredStrategy`), the strategy's cluster resolver
    decides who is chief (see `monsession.is_chief`), as TensorFlow's
    distribute coordinator does: leave `is_chief` at its default on every
    worker. Only the chief writes checkpoints and summaries; under
    `MultiWorkerMirroredStrategy` the other workers run the same saves (they
    may run collective ops) into a temporary directory that is removed, and
    `save_checkpoint_secs` becomes `save_checkpoint_steps=1000` (seconds
    differ between workers, steps do not).

    The default hooks come from the installed hook families: a step counter
    (`log_step_count_steps`) and a summary saver (`save_summaries_steps` or
    `save_summaries_secs`, default every 100 steps) from
    `monsession-hooks-summary`, writing to `summary_dir` or `checkpoint_dir`;
    a checkpoint saver (`save_checkpoint_secs` or `save_checkpoint_steps`,
    default every 600 seconds) from `monsession-hooks-checkpoint`. Setting one
    of these arguments when its family is not installed raises `ImportError`;
    left at its default, it is skipped with a warning (once per process and
    family) naming what is not saved and the distribution to install.

    SIGTERM and SIGINT stop training at a step boundary (`stop_on_signals`):
    the step in progress finishes, `should_stop()` becomes true, and closing
    the session runs the hooks' `end()` (the checkpoint saver saves the step
    reached, summaries are flushed) before the signal is handed on to the
    handler installed before the session (`KeyboardInterrupt` for SIGINT,
    the end of the process for SIGTERM, or the user's own handler). Under
    `MultiWorkerMirroredStrategy` the workers agree after each step whether
    one of them received a signal: all stop after the same step, all take
    part in the final save, and all hand the signal on. Under other
    multi-worker strategies this is off by default.

    Args:
      master: The TensorFlow master to use.
      is_chief: Whether this process is the chief.
      checkpoint_dir: Directory to restore from and save checkpoints to.
      scaffold: A `Scaffold`; in eager mode pass the `tf.train.Checkpoint` as
        `Scaffold(saver=...)`.
      hooks: `SessionRunHook`s run by every process, after the default hooks.
      chief_only_hooks: `SessionRunHook`s run by the chief only, first.
      save_checkpoint_secs: Seconds between checkpoints (`None` or 0: off).
      save_summaries_steps: Steps between summaries (`None` or 0: off).
      save_summaries_secs: Seconds between summaries (`None` or 0: off).
      config: A `tf.compat.v1.ConfigProto` for the session.
      stop_grace_period_secs: Seconds given to threads to stop on `close()`.
      log_step_count_steps: Steps between step-rate logs (`None` or 0: off).
      max_wait_secs: How long a worker waits for the chief's session.
      save_checkpoint_steps: Steps between checkpoints (`None` or 0: off).
      summary_dir: Directory for summaries; `checkpoint_dir` by default.
      save_graph_def: Whether checkpoints also write the graph.
      stop_on_signals: Keyword only; not in TensorFlow. `True` (the default,
        except under multi-worker strategies without collective ops) stops
        at a step boundary on SIGTERM and SIGINT, `False` leaves signals
        alone, an iterable of signal numbers names other signals (e.g.
        `[signal.SIGTERM, signal.SIGUSR1]`).
      steps_per_execution: Keyword only; not in TensorFlow; eager mode. How
        many steps one `run(step)` may run, fused into one `tf.function` up
        to the next step at which a hook acts: an int, or `"auto"` (see
        `MonitoredSession`). Under `MultiWorkerMirroredStrategy` every
        worker must run the same steps: after each call the workers agree
        how many the next call fuses (the fewest any worker's hooks allow,
        at most 500), and a stop signal is agreed at the end of a call.
        Under `ParameterServerStrategy` it stays 1 (with a warning).

    Returns:
      A `MonitoredSession`.

    Raises:
      ImportError: If an argument set here needs a hook family that is not
        installed.
      TypeError: If `hooks` or `chief_only_hooks` is not an iterable of hook
        instances (the message names the argument and the item's index), a
        schedule argument is not a number (steps: an int; never a `bool`),
        `is_chief` or `save_graph_def` is not a bool, `scaffold` not a
        `Scaffold`, `master` not a string, `config` not a `ConfigProto`,
        `max_wait_secs` or `stop_grace_period_secs` not a number, or
        `stop_on_signals` or `steps_per_execution` has the wrong type.
      ValueError: If `steps_per_execution` is smaller than 1 (or not 1 in
        graph mode), a schedule argument, `max_wait_secs` or
        `stop_grace_period_secs` is negative, both arguments of a
        schedule are positive, `checkpoint_dir` or `summary_dir` is a file, or
        `is_chief=False` is passed on the chief of the current multi-worker
        strategy.
      PermissionError: If a default hook would write to a directory this
        process cannot write to.
    """
    schedules = {
        "save_checkpoint_secs": save_checkpoint_secs,
        "save_checkpoint_steps": save_checkpoint_steps,
        "save_summaries_steps": save_summaries_steps,
        "save_summaries_secs": save_summaries_secs,
        "log_step_count_steps": log_step_count_steps,
    }
    hooks, chief_only_hooks = check_arguments(
        hooks=hooks,
        chief_only_hooks=chief_only_hooks,
        steps_per_execution=steps_per_execution,
        schedules=schedules,
        directories={"checkpoint_dir": checkpoint_dir, "summary_dir": summary_dir},
        flags={"is_chief": is_chief, "save_graph_def": save_graph_def},
        scaffold=scaffold,
        master=master,
        config=config,
        max_wait_secs=max_wait_secs,
        stop_grace_period_secs=stop_grace_period_secs,
    )
    settings = training_settings(
        master=master,
        is_chief=is_chief,
        checkpoint_dir=checkpoint_dir,
        summary_dir=summary_dir,
        scaffold=scaffold,
        schedules=schedules,
        save_graph_def=save_graph_def,
        config=config,
        max_wait_secs=max_wait_secs,
    )
    options = SessionOptions(stop_grace_period_secs, stop_on_signals, steps_per_execution)
    return assemble(settings, hooks, chief_only_hooks, options)


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
        return options.session(_strategy_training.ReplicaSessionCreator(settings), hooks or [])
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
