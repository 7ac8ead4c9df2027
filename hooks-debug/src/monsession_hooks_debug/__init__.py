"""monsession-hooks-debug: NaN detection, profiling and hook timing.

`import monsession_hooks_debug` does not import TensorFlow; the classes that
need it are loaded on first use. Users usually reach them through
`monsession.hooks`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from monsession.plugins import lazy_attributes

__version__ = "1.0.0"

_CLASSES = {
    "NanTensorHook": "monsession_hooks_debug._nan",
    "NanLossDuringTrainingError": "monsession_hooks_debug._nan",
    "ProfilerHook": "monsession_hooks_debug._profiler",
    "HookTimingHook": "monsession_hooks_debug._hook_timing",
}

if TYPE_CHECKING:
    from monsession_hooks_debug._hook_timing import HookTimingHook
    from monsession_hooks_debug._nan import NanLossDuringTrainingError, NanTensorHook
    from monsession_hooks_debug._profiler import ProfilerHook


__getattr__, __dir__ = lazy_attributes(__name__, _CLASSES)

__all__ = ["HookTimingHook", "NanLossDuringTrainingError", "NanTensorHook", "ProfilerHook"]
