"""`MonitoredTrainingSession`'s arguments resolved into `TrainingSettings`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from monsession._backends._current_mode import current_mode
from monsession._plugins._hookspecs import TrainingSettings
from monsession._session._scaffold import Scaffold

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
