"""monsession-hooks-summary: TensorBoard summaries and the step rate, in graph and eager mode.

    from monsession.hooks import StepCounterHook, SummarySaverHook

Importing this package does not import TensorFlow; the classes are loaded on
first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_LAZY = {
    "SummarySaverHook": "monsession_hooks_summary._summary_saver",
    "StepCounterHook": "monsession_hooks_summary._step_counter",
    "SummaryWriterCache": "monsession_hooks_summary._writer_cache",
}

if TYPE_CHECKING:
    from monsession_hooks_summary._step_counter import StepCounterHook
    from monsession_hooks_summary._summary_saver import SummarySaverHook
    from monsession_hooks_summary._writer_cache import SummaryWriterCache


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])


__all__ = ["StepCounterHook", "SummarySaverHook", "SummaryWriterCache"]
