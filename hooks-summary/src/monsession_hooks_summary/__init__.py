"""monsession-hooks-summary: TensorBoard summaries and the step rate, in graph and eager mode.

    from monsession.hooks import StepCounterHook, SummarySaverHook

Importing this package does not import TensorFlow; the classes are loaded on
first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from monsession.plugins import lazy_attributes

__version__ = "1.0.0"

_LAZY = {
    "SummarySaverHook": "monsession_hooks_summary._summary_saver",
    "StepCounterHook": "monsession_hooks_summary._step_counter",
    "SummaryWriterCache": "monsession_hooks_summary._writer_cache",
    "SummaryWriteError": "monsession_hooks_summary._sinks",
}

if TYPE_CHECKING:
    from monsession_hooks_summary._sinks import SummaryWriteError
    from monsession_hooks_summary._step_counter import StepCounterHook
    from monsession_hooks_summary._summary_saver import SummarySaverHook
    from monsession_hooks_summary._writer_cache import SummaryWriterCache


__getattr__, __dir__ = lazy_attributes(__name__, _LAZY)

__all__ = ["StepCounterHook", "SummarySaverHook", "SummaryWriteError", "SummaryWriterCache"]
