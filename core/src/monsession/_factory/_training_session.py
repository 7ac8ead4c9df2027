"""`MonitoredTrainingSession`: a `MonitoredSession` set up for training."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterable
from typing import Any

import tensorflow as tf

from monsession._api._arguments import check_directory, check_flag, check_hooks, check_interval
from monsession._api._hook_api import SessionRunHook
from monsession._backends._fusion import check_steps_per_execution
from monsession._distribution import _distributed
from monsession._durability._directory_lock import lock_checkpoint_dir
from monsession._durability._signal_stop import resolve_stop_signals
from monsession._plugins import _plugin_manager
from monsession._plugins._hookspecs import DefaultHook, TrainingSettings
from monsession._session._monitored_session import MonitoredSession, check_session_arguments
from monsession._session._scaffold import Scaffold
from monsession._session._session_creators import (
    ChiefSessionCreator,
    SessionCreator,
    WorkerSessionCreator,
    check_creator_arguments,
)

logger = logging.getLogger("monsession")


class _UseDefault:
    def __repr__(self) -> str:
        return "USE_DEFAULT"


USE_DEFAULT: Any = _UseDefault()
"""Marks an argument the caller did not set."""

_DEFAULT_LOG_STEP_COUNT_STEPS = 100


def _resolve_pair(steps: Any, secs: Any, default_steps: Any, default_secs: Any) -> tuple[Any, Any]:
    """TensorFlow's rule: both unset gives the defaults, one set disables the other."""
    if steps is USE_DEFAULT and secs is USE_DEFAULT:
        return default_steps, default_secs
    return (None if steps is USE_DEFAULT else steps), (None if secs is USE_DEFAULT else secs)


def _explicit_arguments(**values: Any) -> frozenset[str]:
    explicit = {name for name, value in values.items() if value is not USE_DEFAULT}
    if values.get("log_step_count_steps") == _DEFAULT_LOG_STEP_COUNT_STEPS:
        explicit.discard("log_step_count_steps")
    return frozenset(explicit)


_OWNER = "MonitoredTrainingSession"

# Each pair: (steps argument, seconds argument); both may not be positive at once.
_SCHEDULES = (
    ("save_checkpoint_steps", "save_checkpoint_secs"),
    ("save_summaries_steps", "save_summaries_secs"),
)


def _check_schedules(**values: Any) -> None:
    """TensorFlow's rule: `None` or 0 turns a default hook off; anything else must be positive.

    TensorFlow builds no hook for 0 or a negative value, and raises for both
    of a pair set; a negative value, a `bool` or a string is refused here.
    """
    for name, value in values.items():
        if value is USE_DEFAULT or value is None:
            continue
        secs = name.endswith("_secs")
        number = "number of seconds" if secs else "int number of steps"
        check_interval(
            _OWNER,
            name,
            value,
            "secs" if secs else "steps",
            allow_zero=True,
            expected=f"None or 0 (off), or a positive {number}",
        )
    for steps_name, secs_name in _SCHEDULES:
        steps, secs = values[steps_name], values[secs_name]
        if steps not in (USE_DEFAULT, None, 0) and secs not in (USE_DEFAULT, None, 0):
            raise ValueError(
                f"{_OWNER}: give only one of {steps_name} and {secs_name}; got "
                f"{steps_name}={steps!r} and {secs_name}={secs!r}. Set the other to None."
            )


# What the default hooks of each argument save, for the warning when their
# family is missing.
_SAVED_BY_ARGUMENT = {
    "save_checkpoint_secs": "checkpoints",
    "save_checkpoint_steps": "checkpoints",
    "save_summaries_steps": "summaries",
    "save_summaries_secs": "summaries",
    "log_step_count_steps": "the step rate",
}


def _check_families_installed(settings: TrainingSettings) -> None:
    """Raises for an explicit argument whose family is missing; warns for the others."""
    served = _plugin_manager.training_argument_owners()
    skipped: dict[str, list[str]] = {}
    for argument, distribution in _plugin_manager.KNOWN_ARGUMENT_FAMILIES.items():
        if argument in served:
            continue
        value = getattr(settings, argument)
        directory = settings.checkpoint_dir if "checkpoint" in argument else settings.summary_dir
        if argument in settings.explicit and value and value > 0 and directory:
            reason = _plugin_manager.missing_family_message(f"{argument}={value!r}", distribution)
            raise ImportError(f"MonitoredTrainingSession: {reason}")
        if value and value > 0 and directory:
            skipped.setdefault(distribution, []).append(argument)
    for distribution, arguments in skipped.items():
        _warn_not_saving(settings, distribution, arguments)


def _warn_not_saving(settings: TrainingSettings, distribution: str, arguments: list[str]) -> None:
    """Warns, once per process and family, that the defaults of `arguments` save nothing."""
    saved = " and ".join(dict.fromkeys(_SAVED_BY_ARGUMENT[argument] for argument in arguments))
    directory = settings.checkpoint_dir if "checkpoint" in arguments[0] else settings.summary_dir
    values = ", ".join(f"{argument}={getattr(settings, argument)!r}" for argument in arguments)
    reason = _plugin_manager.missing_family_message(f"Saving {saved}", distribution)
    turn_off = ", ".join(f"{argument}=None" for argument in arguments)
    _plugin_manager.warn_once(
        f"MonitoredTrainingSession is not saving {saved} to {directory!r} ({values}, by "
        f"default): {reason.rstrip('.')}. Pass {turn_off} to turn them off and silence "
        "this warning.",
        key=f"MonitoredTrainingSession: {distribution} missing",
    )


def MonitoredTrainingSession(  # noqa: N802 - TensorFlow's name.
    master: str = "",
    is_chief: bool = True,
    checkpoint_dir: str | None = None,
    scaffold: Scaffold | None = None,
    hooks: Iterable[SessionRunHook] | None = None,
    chief_only_hooks: Iterable[SessionRunHook] | None = None,
    save_checkpoint_secs: Any = USE_DEFAULT,
    save_summaries_steps: Any = USE_DEFAULT,
    save_summaries_secs: Any = USE_DEFAULT,
    config: Any = None,
    stop_grace_period_secs: float = 120,
    log_step_count_steps: int | None = 100,
    max_wait_secs: float = 7200,
    save_checkpoint_steps: Any = USE_DEFAULT,
    summary_dir: str | None = None,
    save_graph_def: bool = True,
    *,
    stop_on_signals: Any = USE_DEFAULT,
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
        `MonitoredSession`). Under a multi-worker strategy every worker must
        run the same collective ops in the same order, so it stays 1 there
        (with a warning).

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
    hooks = check_hooks(_OWNER, "hooks", hooks)
    chief_only_hooks = check_hooks(_OWNER, "chief_only_hooks", chief_only_hooks)
    check_steps_per_execution(_OWNER, steps_per_execution, tf.executing_eagerly())
    _check_schedules(
        save_checkpoint_secs=save_checkpoint_secs,
        save_checkpoint_steps=save_checkpoint_steps,
        save_summaries_steps=save_summaries_steps,
        save_summaries_secs=save_summaries_secs,
        log_step_count_steps=log_step_count_steps,
    )
    for name, directory in (("checkpoint_dir", checkpoint_dir), ("summary_dir", summary_dir)):
        if directory:
            check_directory(_OWNER, name, directory, writable=False)
    for name, flag in (("is_chief", is_chief), ("save_graph_def", save_graph_def)):
        check_flag(_OWNER, name, flag)
    check_creator_arguments(_OWNER, scaffold, master, config)
    check_interval(_OWNER, "max_wait_secs", max_wait_secs, "secs", allow_zero=True)
    check_session_arguments(_OWNER, None, stop_grace_period_secs)
    explicit = _explicit_arguments(
        save_checkpoint_secs=save_checkpoint_secs,
        save_checkpoint_steps=save_checkpoint_steps,
        save_summaries_steps=save_summaries_steps,
        save_summaries_secs=save_summaries_secs,
        log_step_count_steps=log_step_count_steps,
    )
    save_summaries_steps, save_summaries_secs = _resolve_pair(
        save_summaries_steps, save_summaries_secs, 100, None
    )
    save_checkpoint_steps, save_checkpoint_secs = _resolve_pair(
        save_checkpoint_steps, save_checkpoint_secs, None, 600
    )
    scaffold = scaffold or Scaffold()
    settings = TrainingSettings(
        master=master,
        is_chief=is_chief,
        checkpoint_dir=checkpoint_dir,
        summary_dir=summary_dir or checkpoint_dir,
        scaffold=scaffold,
        save_checkpoint_secs=save_checkpoint_secs,
        save_checkpoint_steps=save_checkpoint_steps,
        save_summaries_steps=save_summaries_steps,
        save_summaries_secs=save_summaries_secs,
        log_step_count_steps=log_step_count_steps,
        save_graph_def=save_graph_def,
        config=config,
        max_wait_secs=max_wait_secs,
        eager=tf.executing_eagerly(),
        explicit=explicit,
    )
    strategy = _distributed.multi_worker_strategy() if settings.eager else None
    if strategy is not None:
        signals = _stop_signals_in_strategy(strategy, stop_on_signals)
        if steps_per_execution != 1:
            logger.warning(
                "MonitoredTrainingSession: steps_per_execution=%r is not used under %s: "
                "every worker must run the same steps; running single steps.",
                steps_per_execution,
                _distributed.describe(strategy),
            )

        def in_strategy() -> MonitoredSession:
            return _session_in_strategy(
                strategy, settings, hooks, chief_only_hooks, stop_grace_period_secs, signals
            )

        if not _distributed.is_chief(strategy):
            return in_strategy()
        return _holding_directory_lock(
            settings,
            in_strategy,
        )
    if stop_on_signals is USE_DEFAULT:
        stop_on_signals = True
    if not is_chief:
        worker_creator: SessionCreator
        if settings.eager:
            worker_creator = _distributed.EagerReplicaSessionCreator(
                scaffold, checkpoint_dir, None, max_wait_secs
            )
        else:
            worker_creator = WorkerSessionCreator(
                scaffold=scaffold, master=master, config=config, max_wait_secs=max_wait_secs
            )
        return MonitoredSession(
            session_creator=worker_creator,
            hooks=hooks or [],
            stop_grace_period_secs=stop_grace_period_secs,
            stop_on_signals=stop_on_signals,
            steps_per_execution=steps_per_execution,
        )
    all_hooks = _chief_hooks(settings, chief_only_hooks, hooks)
    chief_creator = ChiefSessionCreator(
        scaffold=scaffold, checkpoint_dir=checkpoint_dir, master=master, config=config
    )
    return _holding_directory_lock(
        settings,
        lambda: MonitoredSession(
            session_creator=chief_creator,
            hooks=all_hooks,
            stop_grace_period_secs=stop_grace_period_secs,
            stop_on_signals=stop_on_signals,
            steps_per_execution=steps_per_execution,
        ),
    )


def _holding_directory_lock(
    settings: TrainingSettings, make_session: Callable[[], MonitoredSession]
) -> MonitoredSession:
    """The chief's session, holding the lock of `checkpoint_dir` until it closes.

    Only a chief that saves checkpoints locks the directory: a second one
    fails fast with `DirectoryLockedError` naming the holder. Without a
    family that saves them, nothing will write there: no lock, and the
    directory is not created.
    """
    saves = settings.save_checkpoint_secs or settings.save_checkpoint_steps
    saver = "save_checkpoint_secs" in _plugin_manager.training_argument_owners()
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


def _chief_hooks(
    settings: TrainingSettings,
    chief_only_hooks: Iterable[SessionRunHook] | None,
    hooks: Iterable[SessionRunHook] | None,
) -> list[Any]:
    """The chief's hooks in TensorFlow's order: chief-only, defaults, the user's."""
    _check_families_installed(settings)
    chief_only_hooks, hooks = list(chief_only_hooks or []), list(hooks or [])
    defaults = _plugin_manager.default_hook_items(settings)
    _warn_same_kind(settings, defaults, [*chief_only_hooks, *hooks])
    return [*chief_only_hooks, *(item.hook for item in defaults), *hooks]


def _warn_same_kind(
    settings: TrainingSettings, defaults: list[DefaultHook], user_hooks: list[Any]
) -> None:
    """Warns, once per process and class, of a user hook of a default hook's kind.

    Both run, as in TensorFlow (so both save: checkpoints twice, summaries
    and the step rate twice); the warning names the arguments that turn the
    default hook off. Only default hooks that declare their `arguments` are
    checked.
    """
    for item in defaults:
        kind = type(item.hook)
        if not item.arguments or not any(isinstance(hook, kind) for hook in user_hooks):
            continue
        values = [
            f"{argument}={getattr(settings, argument)!r}"
            for argument in item.arguments
            if getattr(settings, argument, None)
        ]
        turned_on = f" ({', '.join(values)})" if values else ""
        turn_off = ", ".join(f"{argument}=None" for argument in item.arguments)
        _plugin_manager.warn_once(
            f"MonitoredTrainingSession: your hooks include a {kind.__name__} and the default "
            f"{kind.__name__}{turned_on} is on too; both run, as in TensorFlow, and save the "
            f"same things twice. To keep only yours, pass {turn_off}.",
            key=f"MonitoredTrainingSession: same kind as {kind.__module__}.{kind.__qualname__}",
        )


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


def _stop_signals_in_strategy(strategy: Any, stop_on_signals: Any) -> Any:
    """`stop_on_signals` under a multi-worker strategy.

    Under collective ops (`MultiWorkerMirroredStrategy`) SIGTERM and SIGINT
    stop every worker by default: the workers agree after each step whether
    one of them received a signal (`_distributed.StopAgreement`), so all stop
    after the same step and take part in the same final save. `None` means on
    there too, so that every worker decides alike. Under other multi-worker
    strategies signals are left alone unless asked for.

    Returns:
      The resolved signals (a tuple) under collective ops, else `stop_on_signals`.
    """
    if _distributed.uses_collectives(strategy):
        if stop_on_signals is USE_DEFAULT or stop_on_signals is None:
            stop_on_signals = True
        return resolve_stop_signals(stop_on_signals, lambda: True, _OWNER)
    if stop_on_signals is USE_DEFAULT:
        logger.info(
            "MonitoredTrainingSession: under %s, SIGTERM and SIGINT are not handled "
            "(stop_on_signals=False).",
            _distributed.describe(strategy),
        )
        return False
    return stop_on_signals


def _session_in_strategy(
    strategy: Any,
    settings: TrainingSettings,
    hooks: Iterable[SessionRunHook] | None,
    chief_only_hooks: Iterable[SessionRunHook] | None,
    stop_grace_period_secs: float,
    stop_on_signals: Any,
) -> MonitoredSession:
    """An eager session on one worker of a multi-worker `tf.distribute` strategy.

    The strategy's cluster resolver decides who is chief. The chief runs the
    chief-only and default hooks. With collective ops every worker must run
    the same ops in the same order, saves included: the other workers get the
    checkpoint family's hooks with `saves_with_chief`, which save on the same
    steps into a temporary directory, and a schedule in steps, never seconds.
    """
    chief = _distributed.is_chief(strategy)
    if chief and not settings.is_chief:
        raise ValueError(
            f"MonitoredTrainingSession: is_chief=False, but this process is the chief of "
            f"{_distributed.describe(strategy)} (task type 'chief', or worker 0 when the "
            "cluster has no chief task). Under a multi-worker strategy the strategy decides "
            "who is chief: leave is_chief at its default."
        )
    collective = _distributed.uses_collectives(strategy)
    if collective:
        settings = _save_steps_for_collectives(settings, type(strategy).__name__)
    settings = dataclasses.replace(settings, is_chief=chief)
    all_hooks: list[Any]
    if chief:
        all_hooks = _chief_hooks(settings, chief_only_hooks, hooks)
    else:
        worker_settings = dataclasses.replace(
            settings, summary_dir=None, saves_with_chief=collective
        )
        saving = _plugin_manager.default_hooks(worker_settings) if collective else []
        all_hooks = [*saving, *(hooks or [])]
    creator = _distributed.EagerReplicaSessionCreator(
        settings.scaffold,
        settings.checkpoint_dir,
        strategy if collective else None,
        settings.max_wait_secs,
    )
    logger.info(
        "MonitoredTrainingSession: %s is %s.",
        _distributed.describe(strategy),
        "the chief" if chief else "not the chief",
    )
    session = MonitoredSession(
        session_creator=creator,
        hooks=all_hooks,
        stop_grace_period_secs=stop_grace_period_secs,
        stop_on_signals=stop_on_signals,
    )
    if collective and stop_on_signals:
        session.agree_with_workers(_distributed.StopAgreement(strategy))
    return session
