"""Every private TensorFlow symbol the debug family uses, in one place.

Each entry says why the public API does not do. The test
`tests/test_debug_tf_compat.py` touches every symbol, so a TensorFlow release that
removes one fails with a message naming it.

Import this module only where TensorFlow is already needed.
"""

from __future__ import annotations

from typing import Any


def chrome_trace(step_stats: Any, *, show_dataflow: bool, show_memory: bool) -> str:
    """A step's `StepStats` as a Chrome trace (JSON text).

    `tensorflow.python.client.timeline.Timeline`: TensorFlow has no public
    API that turns the `RunMetadata.step_stats` of a `FULL_TRACE` run into
    the ``timeline-<step>.json`` files `tf.compat.v1.train.ProfilerHook`
    writes (the TF2 profiler traces whole windows, not one `Session.run`).

    Args:
      step_stats: The `step_stats` of a `RunMetadata`.
      show_dataflow: Add flow events between producers and consumers of tensors.
      show_memory: Add events showing the sizes and lifetimes of tensors.

    Returns:
      The trace in Chrome trace format.
    """
    from tensorflow.python.client import timeline

    trace = timeline.Timeline(step_stats)
    text: str = trace.generate_chrome_trace_format(
        show_dataflow=show_dataflow, show_memory=show_memory
    )
    return text
