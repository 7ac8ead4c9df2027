"""Eager mode: a recording step whose step wrote no `tf.summary` is warned about, once.

In eager mode the step writes the summaries itself (`tf.summary.scalar(...)`
inside it); `SummarySaverHook` only lets them record on its steps. A step
that calls no `tf.summary` (e.g. Keras's own `train_step` under `model.fit`)
leaves an event file with nothing but the hook's `SessionLog.START`, and
nobody notices. So the first recording step of a session is checked: the
writer is flushed before and after it, and if the event files of its
directory did not grow, a WARNING names the hook, the step and the fix.
Later steps are not checked (two flushes, once per session).
"""

from __future__ import annotations

import glob
import os
from collections.abc import Callable

from monsession import tf_logging


def _event_bytes(directory: str) -> int:
    """The size of the event files in `directory`."""
    paths = glob.glob(os.path.join(glob.escape(directory), "events.out.tfevents.*"))
    return sum(os.path.getsize(path) for path in paths if os.path.isfile(path))


class EmptyRecordingCheck:
    """Checks the first recording step of a session for summaries (see the module doc).

    Args:
      hook_name: The hook, for the warning.
      directory: Where the writer writes; `None` or a writer with no known
        directory: nothing is checked.
      flush: Flushes the writer.
    """

    def __init__(self, hook_name: str, directory: str | None, flush: Callable[[], None]) -> None:
        self._hook_name = hook_name
        self._directory = directory if directory and os.path.isdir(directory) else None
        self._flush = flush
        self._before: int | None = None
        self._done = self._directory is None

    def before_recording(self) -> None:
        """Called before a recording step runs."""
        if not self._done and self._directory is not None:
            self._flush()
            self._before = _event_bytes(self._directory)

    def after_step(self, global_step: int) -> None:
        """Called after a step; warns if it was the checked one and wrote nothing."""
        before, self._before = self._before, None
        if before is None or self._directory is None:
            return
        self._done = True
        self._flush()
        if _event_bytes(self._directory) == before:
            tf_logging.warning(
                "%s: the step recorded no summary at global step %d: nothing in it calls "
                "tf.summary (under model.fit, Keras's train_step writes none), so the event "
                "file in %s gets none. Call tf.summary.scalar(...) (or another tf.summary "
                "function) inside the step, e.g. in your model's train_step; or, under "
                "model.fit, use keras.callbacks.TensorBoard instead.",
                self._hook_name,
                global_step,
                self._directory,
            )
