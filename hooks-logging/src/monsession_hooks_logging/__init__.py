"""monsession-hooks-logging: log tensor values and show a progress bar.

`LoggingTensorHook` is TensorFlow's hook of the same name, for graph and
eager mode; `ProgressBarHook` draws a tqdm bar (plain log lines when the
output is not a terminal). Both log through TensorFlow's logger
(`monsession.tf_logging`), as TensorFlow's hooks do. Users usually reach them as
``monsession.hooks.LoggingTensorHook`` and ``monsession.hooks.ProgressBarHook``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from monsession.plugins import lazy_attributes

__version__ = "1.0.0"

_CLASSES = {
    "LoggingTensorHook": "monsession_hooks_logging._logging_tensor_hook",
    "ProgressBarHook": "monsession_hooks_logging._progress_bar_hook",
}

if TYPE_CHECKING:
    from monsession_hooks_logging._logging_tensor_hook import LoggingTensorHook
    from monsession_hooks_logging._progress_bar_hook import ProgressBarHook


__getattr__, __dir__ = lazy_attributes(__name__, _CLASSES)

__all__ = ["LoggingTensorHook", "ProgressBarHook"]
