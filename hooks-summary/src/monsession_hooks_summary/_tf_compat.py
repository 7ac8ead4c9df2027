"""Every private TensorFlow symbol this family uses, in one place.

Each entry says why the public API does not do. `tests/test_summary_tf_compat.py`
calls every entry, so a TensorFlow release that removes a symbol fails with
a `TensorFlowAPIMissingError` naming it. Everything else in the family uses
public TensorFlow: `tf.compat.v1.summary.FileWriterCache`, `tf.summary`,
`tf.compat.v1.logging`, and the event protos through `tf.compat.v1`.

Import this module only where TensorFlow is already needed.
"""

from __future__ import annotations

import importlib
from typing import Any


class TensorFlowAPIMissingError(ImportError):
    """A private TensorFlow symbol this family relies on is gone."""


def _private(module: str, name: str, purpose: str) -> Any:
    """`module.name`, or a `TensorFlowAPIMissingError` that says what it was for."""
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as error:
        import tensorflow as tf

        raise TensorFlowAPIMissingError(
            f"monsession-hooks-summary needs {module}.{name} ({purpose}), which "
            f"TensorFlow {tf.__version__} does not have: {error}. Please report it, "
            "with your TensorFlow version."
        ) from error


def local_variable(initial_value: Any, name: str) -> Any:
    """A `ResourceVariable` that ignores any enclosing `tf.distribute` strategy.

    `tensorflow.python.ops.resource_variable_ops.ResourceVariable`. The eager
    summary switch must be a plain variable of the chief even when the session
    is created inside `strategy.scope()`: `tf.Variable` there makes a
    distributed variable, and under `MultiWorkerMirroredStrategy` the chief
    would wait forever for workers that never create theirs. No public API
    creates a variable outside the current strategy's scope.

    Args:
      initial_value: The variable's initial value.
      name: The variable's name.

    Returns:
      The variable (not trainable).
    """
    resource_variable = _private(
        "tensorflow.python.ops.resource_variable_ops",
        "ResourceVariable",
        "the eager summary switch, created outside a distribution strategy",
    )
    return resource_variable(initial_value, trainable=False, name=name)


def import_event(serialized_event: Any) -> Any:
    """Writes a serialized `tf.compat.v1.Event` to the default `tf.summary` writer.

    `tensorflow.python.ops.summary_ops_v2.import_event`. A `SessionLog` is a
    field of `Event`, not of `Summary`, so `tf.summary.experimental.write_raw_pb`
    cannot write it, and writing through a second `FileWriter` would make a
    second event file in the directory.

    Args:
      serialized_event: A string tensor holding one serialized `Event`.

    Returns:
      The op (graph) or `None` (eager), as `import_event` does.
    """
    write = _private(
        "tensorflow.python.ops.summary_ops_v2",
        "import_event",
        "writing SessionLog events through a tf.summary writer",
    )
    return write(serialized_event)


def is_noop_writer(writer: Any) -> bool:
    """Whether `writer` is `tf.summary.create_noop_writer()`'s.

    `tensorflow.python.ops.summary_ops_v2._NoopSummaryWriter`. Such a writer
    sets no default writer, so `import_event` has none to write to; no public
    API tells it from a writer that writes.
    """
    noop = _private(
        "tensorflow.python.ops.summary_ops_v2",
        "_NoopSummaryWriter",
        "telling tf.summary.create_noop_writer() from a writer that writes",
    )
    return isinstance(writer, noop)


def default_writer() -> Any:
    """The thread's default `tf.summary` writer, `None` when there is none.

    `tensorflow.python.ops.summary_ops_v2._summary_state.writer`. A recording
    exits its writer context only while its writer is still the default:
    TensorFlow's context exit restores the writer it replaced and flushes
    whichever is the default, so exiting under a context entered later and
    still open (Keras's `TensorBoard` callback's, whose hook ends after this
    one) leaves that context to restore and flush `None`. The public API
    only says whether there is a default writer (`has_default_writer`), not
    which.
    """
    state = _private(
        "tensorflow.python.ops.summary_ops_v2",
        "_summary_state",
        "telling whether a recording's writer is still the default one",
    )
    return state.writer
