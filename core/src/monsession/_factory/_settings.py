"""`MonitoredTrainingSession`'s arguments: checked, then resolved into `TrainingSettings`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from monsession._api._hook_api import SessionRunHook, check_hooks
from monsession._api._types import Unchecked, check_directory, check_flag, check_interval
from monsession._backends._mode import current_mode
from monsession._plugins._families import (
    KNOWN_ARGUMENTS,
    missing_family_message,
    training_argument_owners,
)
from monsession._plugins._hookspecs import DefaultHook, TrainingSettings
from monsession._plugins._plugin_manager import warn_once
from monsession._session._scaffold import Scaffold
from monsession._session._session_creators import check_creator_arguments, check_session_arguments

if TYPE_CHECKING:
    import tensorflow as tf


class _UseDefault:
    def __repr__(self) -> str:
        return "USE_DEFAULT"


USE_DEFAULT: Any = _UseDefault()
"""Marks an argument the caller did not set."""

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
    """The settings of one call; `schedules` holds the five schedule arguments as given.

    Summaries default to every 100 steps, checkpoints to every 600 seconds;
    setting one argument of a pair turns the other off.
    """
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


OWNER = "MonitoredTrainingSession"

# Each pair: (steps argument, seconds argument); both may not be positive at once.
_SCHEDULES = (
    ("save_checkpoint_steps", "save_checkpoint_secs"),
    ("save_summaries_steps", "save_summaries_secs"),
)


def check_arguments(
    *,
    hooks: Iterable[SessionRunHook] | None,
    chief_only_hooks: Iterable[SessionRunHook] | None,
    steps_per_execution: int | str,
    schedules: Mapping[str, Unchecked],
    directories: dict[str, str | None],
    flags: Mapping[str, Unchecked],
    scaffold: Scaffold | None,
    master: str,
    config: Unchecked,
    max_wait_secs: Unchecked,
    stop_grace_period_secs: Unchecked,
) -> tuple[list[SessionRunHook] | None, list[SessionRunHook] | None]:
    """Checks the arguments, in the order of the signature's documentation.

    Returns:
      `hooks` and `chief_only_hooks`, as lists (or `None`).
    """
    hooks = check_hooks(OWNER, "hooks", hooks)
    chief_only_hooks = check_hooks(OWNER, "chief_only_hooks", chief_only_hooks)
    current_mode().check_steps_per_execution(OWNER, steps_per_execution)
    _check_schedules(**schedules)
    for name, directory in directories.items():
        if directory:
            check_directory(OWNER, name, directory, writable=False)
    for name, flag in flags.items():
        check_flag(OWNER, name, flag)
    check_creator_arguments(OWNER, scaffold, master, config)
    check_interval(OWNER, "max_wait_secs", max_wait_secs, "secs", allow_zero=True)
    check_session_arguments(OWNER, None, stop_grace_period_secs)
    return hooks, chief_only_hooks


def _check_schedules(**values: Unchecked) -> None:
    """TensorFlow's rule: `None` or 0 turns a default hook off; anything else must be positive.

    TensorFlow builds no hook for 0 or a negative value, and raises for both
    of a pair set; a negative value, a `bool` or a string is refused here.
    """
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
    """Warns, once per process and family, that the defaults of `arguments` save nothing.

    A family's arguments all write into one directory (`KNOWN_ARGUMENTS`).
    """
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
        warn_once(
            f"MonitoredTrainingSession: your hooks include a {kind.__name__} and the default "
            f"{kind.__name__}{turned_on} is on too; both run, as in TensorFlow, and save the "
            f"same things twice. To keep only yours, pass {turn_off}.",
            key=f"MonitoredTrainingSession: same kind as {kind.__module__}.{kind.__qualname__}",
        )
