"""`ProfilerHook`: captures execution traces every N steps or seconds.

Graph mode traces one step with `RunOptions.FULL_TRACE` and writes
``timeline-<step>.json`` (Chrome trace format) and the step's `RunMetadata`
for TensorBoard, as TensorFlow does. Eager mode has no `RunOptions`; it runs
the TF2 profiler (`tf.profiler.experimental.start/stop`) around a window of
steps and writes what TensorBoard's profile tab reads:
``<output_dir>/plugins/profile/<run>/<host>.xplane.pb``.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any

import tensorflow as tf

from monsession import (
    SecondOrStepTimer,
    SessionRunArgs,
    SessionRunContext,
    SessionRunHook,
    SessionRunValues,
)
from monsession._global_step import get_global_step, global_step_read

logger = logging.getLogger("monsession.debug")

_HOOK = "ProfilerHook"


def _check_positive_int(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{_HOOK}: {name} must be an int >= 1, got {value!r}.")


class ProfilerHook(SessionRunHook):
    """Captures CPU/GPU profiling information every N steps or seconds.

    Graph mode: produces files called ``timeline-<step>.json`` in Chrome trace
    format (open them in ``chrome://tracing`` or Perfetto), and adds the traced
    step's `RunMetadata` to the event file of `output_dir` as ``step_<step>``
    for TensorBoard's graph tab.

    Eager mode: captures a TF2 profiler trace of `trace_steps` steps into
    `output_dir`, viewable in TensorBoard's profile tab. `show_dataflow` and
    `show_memory` apply to graph-mode timelines only.

    As in TensorFlow, the first step is never traced: the timer starts there.

    Args:
      save_steps: Trace every N steps. Exactly one of `save_secs` and
        `save_steps` must be set.
      save_secs: Trace every N seconds.
      output_dir: The directory for the traces; the current directory by default.
      show_dataflow: Add flow events linking producers and consumers of tensors.
      show_memory: Add snapshot events showing the sizes and lifetimes of tensors.
      trace_steps: Eager mode: how many consecutive steps each profiler trace
        covers (not in TensorFlow).

    Raises:
      ValueError: If both or neither of `save_steps` and `save_secs` are set,
        either is negative, or `trace_steps` is not a positive int.
    """

    def __init__(
        self,
        save_steps: int | None = None,
        save_secs: float | None = None,
        output_dir: str = "",
        show_dataflow: bool = True,
        show_memory: bool = False,
        *,
        trace_steps: int = 1,
    ) -> None:
        if (save_steps is None) == (save_secs is None):
            raise ValueError(
                f"{_HOOK}: set exactly one of save_steps and save_secs; got "
                f"save_steps={save_steps!r}, save_secs={save_secs!r}."
            )
        for name, value in (("save_steps", save_steps), ("save_secs", save_secs)):
            if value is not None and value < 0:
                raise ValueError(f"{_HOOK}: {name} must be non-negative, got {value!r}.")
        _check_positive_int("trace_steps", trace_steps)
        self._timer = SecondOrStepTimer(every_secs=save_secs, every_steps=save_steps)
        self._output_dir = output_dir
        self._output_file = os.path.join(output_dir, "timeline-{}.json")
        self._show_dataflow = show_dataflow
        self._show_memory = show_memory
        self._trace_steps = trace_steps
        self._file_writer: Any = None
        self._eager = False
        self._global_step: Any = None
        self._next_step: int | None = None
        self._request_trace = False
        self._trace_options: Any = None
        # Eager state.
        self._known_step = 0
        self._runs_since_known = 0
        self._tracing_left = 0
        self._trace_first_step = 0
        self._last_export_second = -1

    def begin(self) -> None:
        self._eager = tf.executing_eagerly()
        self._next_step = None
        self._global_step = get_global_step() if self._eager else global_step_read()
        if self._global_step is None:
            raise RuntimeError("Global step should be created to use ProfilerHook.")
        if not self._eager:
            from tensorflow.python.summary.writer.writer_cache import FileWriterCache

            self._file_writer = FileWriterCache.get(self._output_dir)
            self._trace_options = tf.compat.v1.RunOptions(
                trace_level=tf.compat.v1.RunOptions.FULL_TRACE
            )

    def after_create_session(self, session: Any, coord: Any) -> None:
        if self._eager:
            self._known_step = int(session.run(self._global_step))
            self._runs_since_known = 0
            if self._next_step is not None:  # A re-created session: resync.
                self._next_step = self._known_step + 1

    def before_run(self, run_context: SessionRunContext) -> SessionRunArgs | None:
        if self._eager:
            self._maybe_start_trace()
            return None
        self._request_trace = self._next_step is not None and self._timer.should_trigger_for_step(
            self._next_step
        )
        options = self._trace_options if self._request_trace else None
        return SessionRunArgs({"global_step": self._global_step}, options=options)

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        if self._eager:
            self._after_eager_run(run_context.session)
            return
        stale_step = int(run_values.results["global_step"])
        if self._next_step is None:
            self._timer.update_last_triggered_step(stale_step)
        step = stale_step + 1
        if self._request_trace:
            step = int(run_context.session.run(self._global_step))
            self._timer.update_last_triggered_step(step)
            self._write_timeline(step, run_values.run_metadata)
        self._next_step = step + 1

    def end(self, session: Any) -> None:
        if not self._eager:
            flush = getattr(self._file_writer, "flush", None)
            if flush is not None:
                flush()
        elif self._tracing_left:
            self._tracing_left = 0
            self._stop_trace(int(session.run(self._global_step)))

    # Graph mode.

    def _write_timeline(self, step: int, run_metadata: Any) -> None:
        from tensorflow.python.client import timeline

        path = self._output_file.format(step)
        logger.info("Saving timeline for %d into '%s'.", step, path)
        trace = timeline.Timeline(run_metadata.step_stats)
        with tf.io.gfile.GFile(path, "w") as handle:
            handle.write(
                trace.generate_chrome_trace_format(
                    show_dataflow=self._show_dataflow, show_memory=self._show_memory
                )
            )
        self._file_writer.add_run_metadata(run_metadata, f"step_{step}")

    # Eager mode: the global step is read when the session is created and
    # after each trace; in between, each run() is one step.

    def _maybe_start_trace(self) -> None:
        if self._tracing_left or self._next_step is None:
            return
        if not self._timer.should_trigger_for_step(self._next_step):
            return
        if int(time.time()) <= self._last_export_second:
            # The profiler names runs by the second; wait for a fresh name.
            return
        try:
            tf.profiler.experimental.start(self._output_dir or ".")
        except tf.errors.AlreadyExistsError:
            logger.warning(
                "%s: another profiler session is running; skipping the trace at step %d.",
                _HOOK,
                self._next_step,
            )
            self._timer.update_last_triggered_step(self._next_step)
            return
        self._tracing_left = self._trace_steps
        self._trace_first_step = self._next_step

    def _after_eager_run(self, session: Any) -> None:
        self._runs_since_known += 1
        if self._next_step is None:
            self._timer.update_last_triggered_step(self._known_step)
        if self._tracing_left:
            self._tracing_left -= 1
            if not self._tracing_left:
                step = int(session.run(self._global_step))
                self._known_step, self._runs_since_known = step, 0
                self._timer.update_last_triggered_step(step)
                self._stop_trace(step)
        self._next_step = self._known_step + self._runs_since_known + 1

    def _stop_trace(self, last_step: int) -> None:
        try:
            tf.profiler.experimental.stop()
        except tf.errors.UnavailableError:  # Stopped by someone else; not a preemption.
            logger.warning("%s: the profiler was stopped by someone else.", _HOOK)
            return
        finally:
            self._last_export_second = int(time.time())
        logger.info(
            "Saved the profile of steps %d to %d into '%s'.",
            self._trace_first_step,
            last_step,
            os.path.join(self._output_dir or ".", "plugins", "profile"),
        )
