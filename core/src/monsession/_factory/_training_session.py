"""`MonitoredTrainingSession`: its arguments checked and resolved into `TrainingSettings`,
then the chief's, a worker's or a replica's session assembled. The checkpoint family, not
core, locks `checkpoint_dir` (see `lock_checkpoint_dir`)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, NamedTuple

from monsession._api._hook_api import SessionRunHook, check_hooks
from monsession._api._types import Unchecked, check_directory, check_flag, check_interval
from monsession._backends._mode import current_mode
from monsession._distribution import _distributed
from monsession._plugins._families import (
    KNOWN_ARGUMENTS,
    default_hook_items,
    missing_family_message,
    training_argument_owners,
)
from monsession._plugins._hookspecs import DefaultHook, TrainingSettings
from monsession._plugins._plugin_manager import warn_once
from monsession._session._monitored_session import MonitoredSession
from monsession._session._scaffold import Scaffold
from monsession._session._session_creators import (
    ChiefSessionCreator,
    SessionCreator,
    check_creator_arguments,
    check_session_arguments,
)

if TYPE_CHECKING:
    import tensorflow as tf

__all__ = ["USE_DEFAULT", "MonitoredTrainingSession"]

OWNER = "MonitoredTrainingSession"


class _UseDefault:
    def __repr__(self) -> str:
        return "USE_DEFAULT"


USE_DEFAULT: Any = _UseDefault()
"""Marks an argument the caller did not set."""


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
    waits up to `max_wait_secs` for the chief and runs only `hooks` (in eager
    mode it restores the latest checkpoint itself).

    Inside the `scope()` of a multi-worker `tf.distribute` strategy, its cluster resolver
    decides who is chief (see `monsession.is_chief`): leave `is_chief` at its default. Only the
    chief writes checkpoints and summaries; under `MultiWorkerMirroredStrategy` the other
    workers run the same saves into a temporary directory, and `save_checkpoint_secs` becomes
    `save_checkpoint_steps=1000` (steps, unlike seconds, agree).

    The default hooks come from the installed families: a step counter and a summary saver
    (every 100 steps) from `monsession-hooks-summary`, a checkpoint saver (every 600 seconds)
    from `monsession-hooks-checkpoint`. Setting an argument whose family is missing raises
    `ImportError`; left at its default, it is skipped with a warning naming what to install.

    SIGTERM and SIGINT stop training at a step boundary (`stop_on_signals`), as in
    `MonitoredSession`: closing runs the hooks' `end()` (the checkpoint saver saves) before the
    signal is handed on. Under `MultiWorkerMirroredStrategy` the workers agree after each step
    whether one received a signal, so all stop after the same step; under other multi-worker
    strategies this is off by default.

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
        except under multi-worker strategies without collective ops), `False`,
        or an iterable of signal numbers (see `MonitoredSession`).
      steps_per_execution: Keyword only; not in TensorFlow; eager mode; see `MonitoredSession`.
        Under `MultiWorkerMirroredStrategy` the workers agree after each call how many steps the
        next fuses (the fewest any worker's hooks allow, at most 500); under
        `ParameterServerStrategy` it stays 1 (with a warning).

    Returns:
      A `MonitoredSession`.

    Raises:
      ImportError: If an argument set here needs a hook family that is not installed.
      TypeError: If an argument has the wrong type (hooks: the message names
        the item's index; steps: an int, never a `bool`).
      ValueError: If `steps_per_execution` is invalid (see `MonitoredSession`), a schedule
        argument, `max_wait_secs` or `stop_grace_period_secs` is negative, both arguments of a
        schedule are positive, `checkpoint_dir` or `summary_dir` is a file, or `is_chief=False`
        is passed on the chief of the current multi-worker strategy.
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
    # Checked in the documented order.
    checked_hooks = check_hooks(OWNER, "hooks", hooks)
    checked_chief_only_hooks = check_hooks(OWNER, "chief_only_hooks", chief_only_hooks)
    current_mode().check_steps_per_execution(OWNER, steps_per_execution)
    _check_schedules(**schedules)
    for name, directory in {"checkpoint_dir": checkpoint_dir, "summary_dir": summary_dir}.items():
        if directory:
            check_directory(OWNER, name, directory, writable=False)
    check_flag(OWNER, "is_chief", is_chief)
    check_flag(OWNER, "save_graph_def", save_graph_def)
    check_creator_arguments(OWNER, scaffold, master, config)
    check_interval(OWNER, "max_wait_secs", max_wait_secs, "secs", allow_zero=True)
    check_session_arguments(OWNER, None, stop_grace_period_secs)
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
    return assemble(settings, checked_hooks, checked_chief_only_hooks, options)


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
        return options.session(_distributed.ReplicaSessionCreator(settings), hooks or [])
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
        _distributed.stop_signals_in_strategy(
            strategy, options.stop_on_signals, given=options.stop_on_signals is not USE_DEFAULT
        ),
        _distributed.steps_per_execution_in_strategy(strategy, options.steps_per_execution),
    )
    replica = _distributed.settings_in_strategy(strategy, settings)
    if replica.is_chief:
        all_hooks = chief_hooks(replica, chief_only_hooks, hooks)
    else:
        all_hooks = _distributed.worker_hooks(strategy, replica, hooks)
    session = options.session(_distributed.replica_creator(strategy, replica), all_hooks)
    agreement = _distributed.step_agreement(
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
    defaults = default_hook_items(settings)
    warn_same_kind(settings, defaults, [*chief_only_hooks, *hooks])
    return [*chief_only_hooks, *(item.hook for item in defaults), *hooks]


_DEFAULT_LOG_STEP_COUNT_STEPS = 100


def _resolve_pair(
    steps: int | None, secs: float | None, default_steps: int | None, default_secs: float | None
) -> tuple[int | None, float | None]:
    """TensorFlow's rule: both unset gives the defaults, one set disables the other."""
    if steps is USE_DEFAULT and secs is USE_DEFAULT:
        return default_steps, default_secs
    return (None if steps is USE_DEFAULT else steps), (None if secs is USE_DEFAULT else secs)


def _explicit_arguments(**values: object) -> frozenset[str]:
    explicit = {name for name, value in values.items() if value is not USE_DEFAULT}
    if values.get("log_step_count_steps") == _DEFAULT_LOG_STEP_COUNT_STEPS:
        explicit.discard("log_step_count_steps")
    return frozenset(explicit)


def training_settings(
    *,
    master: str,
    is_chief: bool,
    checkpoint_dir: str | None,
    summary_dir: str | None,
    scaffold: Scaffold | None,
    schedules: dict[str, Any],
    save_graph_def: bool,
    config: tf.compat.v1.ConfigProto | None,
    max_wait_secs: float,
) -> TrainingSettings:
    """The settings of one call from the five `schedules` arguments as given: summaries every
    100 steps and checkpoints every 600 seconds by default; one of a pair turns the other off."""
    save_summaries_steps, save_summaries_secs = _resolve_pair(
        schedules["save_summaries_steps"], schedules["save_summaries_secs"], 100, None
    )
    save_checkpoint_steps, save_checkpoint_secs = _resolve_pair(
        schedules["save_checkpoint_steps"], schedules["save_checkpoint_secs"], None, 600
    )
    return TrainingSettings(
        master=master,
        is_chief=is_chief,
        checkpoint_dir=checkpoint_dir,
        summary_dir=summary_dir or checkpoint_dir,
        scaffold=scaffold or Scaffold(),
        save_checkpoint_secs=save_checkpoint_secs,
        save_checkpoint_steps=save_checkpoint_steps,
        save_summaries_steps=save_summaries_steps,
        save_summaries_secs=save_summaries_secs,
        log_step_count_steps=schedules["log_step_count_steps"],
        save_graph_def=save_graph_def,
        config=config,
        max_wait_secs=max_wait_secs,
        eager=current_mode().eager,
        explicit=_explicit_arguments(**schedules),
    )


# Each pair: (steps argument, seconds argument); both may not be positive at once.
_SCHEDULES = (
    ("save_checkpoint_steps", "save_checkpoint_secs"),
    ("save_summaries_steps", "save_summaries_secs"),
)


def _check_schedules(**values: Unchecked) -> None:
    """`None` or 0 turns a default hook off (as in TensorFlow); anything else must be a
    positive number, and only one of a pair positive."""
    for name, value in values.items():
        if value is USE_DEFAULT or value is None:
            continue
        in_secs = name.endswith("_secs")
        number = "number of seconds" if in_secs else "int number of steps"
        check_interval(
            OWNER,
            name,
            value,
            "secs" if in_secs else "steps",
            allow_zero=True,
            expected=f"None or 0 (off), or a positive {number}",
        )
    for steps_name, secs_name in _SCHEDULES:
        steps, secs = values[steps_name], values[secs_name]
        if steps not in (USE_DEFAULT, None, 0) and secs not in (USE_DEFAULT, None, 0):
            raise ValueError(
                f"{OWNER}: give only one of {steps_name} and {secs_name}; got "
                f"{steps_name}={steps!r} and {secs_name}={secs!r}. Set the other to None."
            )


def check_families_installed(settings: TrainingSettings) -> None:
    """Raises for an explicit argument whose family is missing; warns for the others."""
    served = training_argument_owners()
    skipped: dict[str, list[str]] = {}
    for argument, known in KNOWN_ARGUMENTS.items():
        value = getattr(settings, argument)
        if argument in served or not (value and value > 0 and known.directory_in(settings)):
            continue  # Served, or its default hook would write nothing.
        if argument in settings.explicit:
            reason = missing_family_message(f"{argument}={value!r}", known.distribution)
            raise ImportError(f"MonitoredTrainingSession: {reason}")
        skipped.setdefault(known.distribution, []).append(argument)
    for distribution, arguments in skipped.items():
        _warn_not_saving(settings, distribution, arguments)


def _warn_not_saving(settings: TrainingSettings, distribution: str, arguments: list[str]) -> None:
    """Warns, once per process and family, that the defaults of `arguments` save nothing."""
    known = [KNOWN_ARGUMENTS[argument] for argument in arguments]
    saved = " and ".join(dict.fromkeys(argument.saves for argument in known))
    directory = known[0].directory_in(settings)
    values = ", ".join(f"{argument}={getattr(settings, argument)!r}" for argument in arguments)
    reason = missing_family_message(f"Saving {saved}", distribution)
    turn_off = ", ".join(f"{argument}=None" for argument in arguments)
    warn_once(
        f"MonitoredTrainingSession is not saving {saved} to {directory!r} ({values}, by "
        f"default): {reason.rstrip('.')}. Pass {turn_off} to turn them off and silence "
        "this warning.",
        key=f"MonitoredTrainingSession: {distribution} missing",
    )


def warn_same_kind(
    settings: TrainingSettings, defaults: list[DefaultHook], user_hooks: list[SessionRunHook]
) -> None:
    """Warns, once per process and class, of a user hook of a default hook's kind (both run,
    as in TensorFlow), naming the arguments that turn the default off."""
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
        warn_once(
            f"MonitoredTrainingSession: your hooks include a {kind.__name__} and the default "
            f"{kind.__name__}{turned_on} is on too; both run, as in TensorFlow, and save the "
            f"same things twice. To keep only yours, pass {turn_off}.",
            key=f"MonitoredTrainingSession: same kind as {kind.__module__}.{kind.__qualname__}",
        )
