"""Plugin registration for monsession-hooks-summary.

Importing this module does not import TensorFlow: the hook classes are named
by lazy references and imported only when `MonitoredTrainingSession` asks for
its default hooks.
"""

from __future__ import annotations

from collections.abc import Sequence

import monsession
from monsession.plugins import (
    ORDER_STEP_COUNTER,
    ORDER_SUMMARY_SAVER,
    DefaultHook,
    TrainingSettings,
)

_PACKAGE = "monsession_hooks_summary"
_SUMMARY_ARGUMENTS = ("save_summaries_steps", "save_summaries_secs")


@monsession.hookimpl
def monsession_hook_classes() -> Sequence[str]:
    return [
        f"{_PACKAGE}._summary_saver:SummarySaverHook",
        f"{_PACKAGE}._step_counter:StepCounterHook",
    ]


@monsession.hookimpl
def monsession_other_classes() -> Sequence[str]:
    return [f"{_PACKAGE}._writer_cache:SummaryWriterCache"]  # Not a hook.


@monsession.hookimpl
def monsession_training_arguments() -> Sequence[str]:
    return ["save_summaries_steps", "save_summaries_secs", "log_step_count_steps"]


def _positive(value: float | None) -> float | None:
    return value if value is not None and value > 0 else None


@monsession.hookimpl
def monsession_default_hooks(settings: TrainingSettings) -> Sequence[DefaultHook] | None:
    if not settings.summary_dir:
        return None
    from monsession_hooks_summary._step_counter import StepCounterHook
    from monsession_hooks_summary._summary_saver import default_summary_saver

    hooks = []
    log_steps = _positive(settings.log_step_count_steps)
    if log_steps is not None:
        step_counter = StepCounterHook(
            output_dir=settings.summary_dir, every_n_steps=int(log_steps)
        )
        hooks.append(
            DefaultHook(step_counter, ORDER_STEP_COUNTER, arguments=("log_step_count_steps",))
        )
    save_steps = _positive(settings.save_summaries_steps)
    save_secs = _positive(settings.save_summaries_secs)
    if save_steps is not None or save_secs is not None:
        summary_saver = default_summary_saver(
            scaffold=settings.scaffold,
            save_steps=None if save_steps is None else int(save_steps),
            save_secs=save_secs,
            output_dir=settings.summary_dir,
        )
        hooks.append(DefaultHook(summary_saver, ORDER_SUMMARY_SAVER, arguments=_SUMMARY_ARGUMENTS))
    return hooks
