"""How `ProfilerHook` traces: the one place where graph and eager mode differ.

Graph mode traces one `Session.run` with `RunOptions.FULL_TRACE` and saves
its timeline; eager mode has no `RunOptions` and runs the TF2 profiler around
a window of runs. The hook picks one `Tracer` in `begin()` and never asks
which mode it runs in.
"""

from __future__ import annotations

import os
import time
from typing import Any, Protocol

import tensorflow as tf

import monsession
from monsession import SessionRunArgs, SessionRunContext, SessionRunValues, tf_logging
from monsession_hooks_debug import _tf_compat

_HOOK = "ProfilerHook"


class Tracer(Protocol):
    """Traces runs for `ProfilerHook`."""

    tracing: bool
    """Whether a trace is open (started and not yet saved)."""

    def ready(self) -> bool:
        """Whether a new trace may start with the coming run."""

    def start(self, step: int) -> SessionRunArgs | None:
        """Starts a trace with the coming run, expected to end at global step `step`.

        Returns:
          What to add to the run (graph: the trace options), or `None`.
          `tracing` stays false if the trace could not start.
        """

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> int | None:
        """Called after each run of an open trace.

        Returns:
          The global step at which the trace was saved, or `None` while it
          goes on.
        """

    def end(self, session: Any) -> None:
        """Saves what is still open, at the end of the session."""


class TimelineTracer:
    """Graph mode: one run with `FULL_TRACE`, saved as a timeline and `RunMetadata`.

    Writes ``timeline-<step>.json`` (Chrome trace format) into `output_dir`
    and adds the `RunMetadata` as ``step_<step>`` to the event file of
    `output_dir`, as TensorFlow's `ProfilerHook` does.

    Args:
      output_dir: Where to write.
      show_dataflow: Add flow events to the timeline.
      show_memory: Add memory events to the timeline.
    """

    def __init__(self, output_dir: str, show_dataflow: bool, show_memory: bool) -> None:
        self._output_file = os.path.join(output_dir, "timeline-{}.json")
        self._show_dataflow = show_dataflow
        self._show_memory = show_memory
        self._writer = monsession.plugins.event_file_writer(output_dir)
        options = tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
        self._request = SessionRunArgs(None, options=options)
        self.tracing = False

    def ready(self) -> bool:
        return True

    def start(self, step: int) -> SessionRunArgs:
        self.tracing = True
        return self._request

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> int | None:
        self.tracing = False
        # As TensorFlow's hook: the step the traced run ended at, read after it.
        step = run_context.global_step_after()
        assert step is not None  # ProfilerHook.begin() requires a global step.
        path = self._output_file.format(step)
        tf_logging.info("Saving timeline for %d into '%s'.", step, path)
        metadata = run_values.run_metadata
        with tf.io.gfile.GFile(path, "w") as handle:
            handle.write(
                _tf_compat.chrome_trace(
                    metadata.step_stats,
                    show_dataflow=self._show_dataflow,
                    show_memory=self._show_memory,
                )
            )
        self._writer.add_run_metadata(metadata, f"step_{step}")
        return step

    def end(self, session: Any) -> None:
        self._writer.flush()


class ProfilerTracer:
    """Eager mode: the TF2 profiler around `trace_steps` consecutive runs.

    Writes ``<output_dir>/plugins/profile/<run>/<host>.xplane.pb`` for
    TensorBoard's profile tab, and an event file without values if
    `output_dir` has none, so that TensorBoard lists it as a run. The
    profiler names runs by the second, so a trace never starts in the second
    the previous one was saved.

    Args:
      output_dir: Where to write (the current directory if empty).
      trace_steps: How many runs each trace covers.
    """

    def __init__(self, output_dir: str, trace_steps: int) -> None:
        self._output_dir = output_dir or "."
        self._trace_steps = trace_steps
        self._left = 0
        self._first_step = 0
        self._last_export_second = -1
        self._has_event_file = False
        self.tracing = False

    def ready(self) -> bool:
        return int(time.time()) > self._last_export_second

    def start(self, step: int) -> None:
        try:
            tf.profiler.experimental.start(self._output_dir)
        except tf.errors.AlreadyExistsError:
            tf_logging.warning(
                "%s: another profiler session is running; skipping the trace at step %d.",
                _HOOK,
                step,
            )
            return
        self.tracing = True
        self._left = self._trace_steps
        self._first_step = step

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> int | None:
        self._left -= 1
        if self._left:
            return None
        step = run_context.global_step_after()  # Known on the host: no device read.
        assert step is not None  # ProfilerHook.begin() requires a global step.
        self._stop(step)
        return step

    def end(self, session: Any) -> None:
        if self.tracing:
            self._stop(monsession.plugins.read_global_step(session))

    def _stop(self, last_step: int) -> None:
        self.tracing = False
        try:
            tf.profiler.experimental.stop()
        except tf.errors.UnavailableError:  # Stopped by someone else; not a preemption.
            tf_logging.warning("%s: the profiler was stopped by someone else.", _HOOK)
            return
        finally:
            self._last_export_second = int(time.time())
        tf_logging.info(
            "Saved the profile of steps %d to %d into '%s'.",
            self._first_step,
            last_step,
            os.path.join(self._output_dir, "plugins", "profile"),
        )
        self._make_tensorboard_run()

    def _make_tensorboard_run(self) -> None:
        """Gives the directory an event file if it has none, once.

        TensorBoard's profile tab lists the traces of its log directory and
        of its runs, the subdirectories that hold an event file: with one,
        a directory of traces (a worker's ``<output_dir>/worker-1``) is
        listed wherever TensorBoard is pointed above it, as graph mode's
        `RunMetadata` event file does. The file holds no values.
        """
        if self._has_event_file:
            return
        self._has_event_file = True
        if not tf.io.gfile.glob(os.path.join(self._output_dir, "events.out.tfevents.*")):
            tf.summary.create_file_writer(self._output_dir).close()
