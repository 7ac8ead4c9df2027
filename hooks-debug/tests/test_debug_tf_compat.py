"""Every private TensorFlow symbol of `_tf_compat`, touched once.

A TensorFlow release that removes or changes one fails here with a message
naming the symbol, before any hook test does.
"""

from __future__ import annotations

import json

import tensorflow as tf

from monsession_hooks_debug import _tf_compat


def test_chrome_trace_uses_tensorflow_python_client_timeline():
    with tf.Graph().as_default(), tf.compat.v1.Session() as sess:
        value = tf.compat.v1.placeholder(tf.float32, name="value")
        total = tf.add(value, 2.0, name="total")
        options = tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
        metadata = tf.compat.v1.RunMetadata()
        sess.run(total, {value: 1.0}, options=options, run_metadata=metadata)
    try:
        text = _tf_compat.chrome_trace(metadata.step_stats, show_dataflow=True, show_memory=True)
    except (ImportError, AttributeError, TypeError) as error:
        raise AssertionError(
            "tensorflow.python.client.timeline.Timeline(step_stats)"
            ".generate_chrome_trace_format(show_dataflow=, show_memory=) is gone or changed "
            f"in TensorFlow {tf.__version__}: {error!r}. Update "
            "monsession_hooks_debug._tf_compat.chrome_trace."
        ) from error
    events = json.loads(text)["traceEvents"]
    ops = {event["args"]["name"]: event["args"]["op"] for event in events if event.get("ph") == "X"}
    assert ops.get("total") == "AddV2", (
        "tensorflow.python.client.timeline no longer names ops in its Chrome trace"
    )
