"""The monsession plugin of monsession-hooks-earlystop.

The entry point ``earlystop`` of the ``monsession`` group names this module.
It implements two of core's hookspecs:

* `monsession_hook_classes`: registers `EarlyStoppingHook` for
  `monsession.hooks` and `monsession plugins`, as a lazy reference, so
  listing plugins never imports TensorFlow;
* `monsession_default_hooks`: adds an `EarlyStoppingHook` to
  `MonitoredTrainingSession` when ``MONSESSION_EARLYSTOP_MONITOR`` names the
  metric to watch, and nothing otherwise.

`MonitoredTrainingSession` has no argument for early stopping, so the plugin
does not implement `monsession_training_arguments`.

This module must not import TensorFlow at import time.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, TypeVar

import monsession
from monsession.plugins import ORDER_OTHER, DefaultHook, TrainingSettings

ENV_MONITOR = "MONSESSION_EARLYSTOP_MONITOR"
ENV_PATIENCE = "MONSESSION_EARLYSTOP_PATIENCE"
ENV_EVERY_N_STEPS = "MONSESSION_EARLYSTOP_EVERY_N_STEPS"
ENV_MIN_DELTA = "MONSESSION_EARLYSTOP_MIN_DELTA"
ENV_MODE = "MONSESSION_EARLYSTOP_MODE"

_T = TypeVar("_T")


@monsession.hookimpl
def monsession_hook_classes() -> list[str]:
    """Returns a lazy reference to `EarlyStoppingHook`."""
    return ["monsession_hooks_earlystop._early_stopping:EarlyStoppingHook"]


def _setting(name: str, convert: Callable[[str], _T], expected: str) -> _T | None:
    text = os.environ.get(name, "").strip()
    if not text:
        return None
    try:
        return convert(text)
    except ValueError:
        raise ValueError(f"{name} must be {expected}, got {text!r}.") from None


@monsession.hookimpl
def monsession_default_hooks(settings: TrainingSettings) -> list[DefaultHook] | None:
    """Adds an `EarlyStoppingHook` when ``MONSESSION_EARLYSTOP_MONITOR`` is set.

    The variable names the metric: a tensor of the graph in graph mode, an
    entry of the mapping the step returns in eager mode. The hook's other
    arguments come from ``MONSESSION_EARLYSTOP_PATIENCE``,
    ``MONSESSION_EARLYSTOP_EVERY_N_STEPS``, ``MONSESSION_EARLYSTOP_MIN_DELTA``
    and ``MONSESSION_EARLYSTOP_MODE`` when they are set, else from the hook's
    defaults. The hook runs after the other default hooks (`ORDER_OTHER`), so
    a checkpoint saver before it still sees the last step.

    Raises:
      ValueError: If one of these variables holds a value the hook refuses;
        the message names the variable. monsession passes it on to the
        user unchanged, before training starts.
    """
    monitor = os.environ.get(ENV_MONITOR, "").strip()
    if not monitor:
        return None
    arguments: dict[str, Any] = {}
    for key, value in (
        ("patience", _setting(ENV_PATIENCE, int, "an integer >= 1")),
        ("every_n_steps", _setting(ENV_EVERY_N_STEPS, int, "an integer >= 1")),
        ("min_delta", _setting(ENV_MIN_DELTA, float, "a number >= 0")),
        ("mode", _setting(ENV_MODE, str, "'min' or 'max'")),
    ):
        if value is not None:
            arguments[key] = value
    from monsession_hooks_earlystop._early_stopping import EarlyStoppingHook

    try:
        hook = EarlyStoppingHook(monitor, **arguments)
    except (TypeError, ValueError) as error:
        raise ValueError(
            f"The MONSESSION_EARLYSTOP_* environment variables ({ENV_MONITOR}={monitor!r}, "
            f"{arguments}) do not make a valid hook: {error}"
        ) from error
    return [DefaultHook(hook, ORDER_OTHER)]
