"""`ProfilerHook`: captures execution traces every N steps or seconds.

Graph mode traces one step with `RunOptions.FULL_TRACE` and writes
``timeline-<step>.json`` (Chrome trace format) and the step's `RunMetadata`
for TensorBoard, as TensorFlow does. Eager mode has no `RunOptions`; it runs
the TF2 profiler (`tf.profiler.experimental.start/stop`) around a window of
steps and writes what TensorBoard's profile tab reads:
``<output_dir>/plugins/profile/<run>/<host>.xplane.pb``. How each mode
traces lives in `_tracers`; this hook only decides when, and where each
worker of a cluster writes (`monsession.plugins.worker_output_dir`).
"""

from __future__ import annotations

from typing import Any

import monsession
from monsession import (
    NextAction,
    SessionRunArgs,
    SessionRunContext,
    SessionRunValues,
    TimedHook,
)
from monsession.plugins import as_run_context, in_eager_mode
from monsession_hooks_debug._tracers import ProfilerTracer, TimelineTracer, Tracer

_HOOK = "ProfilerHook"


class ProfilerHook(TimedHook):
    """Captures CPU/GPU profiling information every N steps or seconds.

    Graph mode: produces files called ``timeline-<step>.json`` in Chrome trace
    format (open them in ``chrome://tracing`` or Perfetto), and adds the traced
    step's `RunMetadata` to the event file of `output_dir` as ``step_<step>``
    for TensorBoard's graph tab.

    Eager mode: captures a TF2 profiler trace of `trace_steps` steps into
    `output_dir`, viewable in TensorBoard's profile tab. `show_dataflow` and
    `show_memory` apply to graph-mode timelines only.

    In a multi-worker job (a `tf.distribute` strategy, or a cluster in
    ``TF_CONFIG``), the chief writes into `output_dir` with TensorFlow's
    names, and every other task into ``<output_dir>/<task type>-<task id>``
    (e.g. ``worker-1``): workers sharing `output_dir` never overwrite each
    other's traces (the TF2 profiler names its files after the host and the
    second), and TensorBoard lists each worker's profile as a run of its own.

    As in TensorFlow, the first step is never traced: the timer starts there.
    On steps it does not trace the hook asks for nothing. Its timer is saved
    with each checkpoint (`monsession.StatefulHook`): after a restart the
    traces go on at the steps they were due at, not a period after the
    first step of the new process (whose first step is still not traced).

    Args:
      save_steps: Trace every N steps. Exactly one of `save_steps` and
        `save_secs` must be set.
      save_secs: Trace every N seconds.
      output_dir: The directory for the traces; the current directory by default.
      show_dataflow: Add flow events linking producers and consumers of tensors.
      show_memory: Add snapshot events showing the sizes and lifetimes of tensors.
      trace_steps: Eager mode: how many consecutive steps each profiler trace
        covers (not in TensorFlow).

    Raises:
      ValueError: If both or neither of `save_steps` and `save_secs` are set,
        the given one or `trace_steps` is not positive, or `output_dir` is a
        file.
      TypeError: If `save_steps` or `trace_steps` is not an int or
        `save_secs` not a number (a `bool` or a string never is), or
        `show_dataflow` or `show_memory` is not a bool.
      PermissionError: If `output_dir` cannot be created or written to.
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
        monsession.plugins.check_schedule(_HOOK, "save_steps", save_steps, "save_secs", save_secs)
        super().__init__(every_secs=save_secs, every_steps=save_steps)
        monsession.plugins.check_interval(_HOOK, "trace_steps", trace_steps, "steps")
        monsession.plugins.check_flag(_HOOK, "show_dataflow", show_dataflow)
        monsession.plugins.check_flag(_HOOK, "show_memory", show_memory)
        if output_dir:
            monsession.plugins.check_directory(_HOOK, "output_dir", output_dir)
        self._output_dir = output_dir
        self._show_dataflow = show_dataflow
        self._show_memory = show_memory
        self._trace_steps = trace_steps
        self._tracer: Tracer | None = None
        self._started = False

    def begin(self) -> None:
        monsession.plugins.require_global_step(_HOOK)
        self._started = False
        self._timer.reset()  # A restored state is loaded after begin().
        # Workers other than the chief of a cluster write into their own
        # subdirectory: their traces would otherwise be named as the chief's.
        output_dir = monsession.plugins.worker_output_dir(self._output_dir)
        # The one mode choice: how to trace differs by nature.
        self._tracer = (
            ProfilerTracer(output_dir, self._trace_steps)
            if in_eager_mode()
            else TimelineTracer(output_dir, self._show_dataflow, self._show_memory)
        )

    def before_run(self, run_context: SessionRunContext) -> SessionRunArgs | None:
        run_context = as_run_context(run_context)
        tracer = self._tracer
        if tracer is None:
            raise RuntimeError(
                f"{_HOOK}: begin() must be called before the first run (the monitored "
                "session calls it)."
            )
        step = run_context.global_step
        if not self._started or tracer.tracing or step is None or not tracer.ready():
            return None
        if not self._timer.should_trigger_for_step(step + 1):
            return None
        request = tracer.start(step + 1)
        if not tracer.tracing:  # The tracer is busy: skip this trigger.
            self._timer.update_last_triggered_step(step + 1)
        return request

    def next_action(self, global_step: int) -> NextAction:
        """The run at which the next trace starts, or every run while tracing."""
        tracer = self._tracer
        if not self._started or tracer is None or tracer.tracing:
            return NextAction(steps=1)
        return super().next_action(global_step)

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        run_context = as_run_context(run_context)
        tracer = self._tracer
        assert tracer is not None
        if not self._started:
            # As TensorFlow: the first step starts the timer and is not traced.
            self._started = True
            step = run_context.global_step
            if step is not None and self._timer.last_triggered_step() is None:
                self._timer.update_last_triggered_step(step)
            return
        if tracer.tracing:
            saved_at = tracer.after_run(run_context, run_values)
            if saved_at is not None:
                self._timer.update_last_triggered_step(saved_at)

    def end(self, session: Any) -> None:
        if self._tracer is not None:
            self._tracer.end(session)
