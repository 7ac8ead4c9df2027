"""Files beside training: the shared event writer, and what an error says about a file.

`file_error_behind` tells a failed file write from the end of the data:
TensorFlow maps EFBIG, EOVERFLOW and ERANGE to OUT_OF_RANGE, so such a write
inside a step arrives as the `OutOfRangeError` that ends a session cleanly;
the errno's text in its message gives it away. TensorFlow is imported only
by `event_file_writer`.
"""

from __future__ import annotations

import errno
import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import tensorflow as tf

_OUT_OF_RANGE_ERRNOS = (errno.EFBIG, errno.EOVERFLOW, errno.ERANGE)
_GRAPH_HEADER = "execution error:"  # TensorFlow's "Graph execution error:".
_NODE_LINE = "Node: "


def file_error_behind(error: BaseException) -> OSError | None:
    """The failed file operation behind an `OutOfRangeError`, if there is one.

    Args:
      error: An `OutOfRangeError` raised by a step.

    Returns:
      An `OSError` with the errno and the message line naming the file (for
      the caller to raise from `error`), or `None` if `error` does not come
      from a file operation (e.g. the end of a dataset).
    """
    text = str(error)
    for code in _OUT_OF_RANGE_ERRNOS:
        reason = os.strerror(code)
        lines = [line.strip() for line in text.splitlines() if reason in line]
        if lines:
            return OSError(
                code,
                f"The step failed on a file: {lines[0]}. TensorFlow reports this as "
                "OutOfRangeError, but it is not the end of the input data: training stops "
                "with this error.",
            )
    return None


def error_cause(error: BaseException) -> str:
    """The line of `error`'s message that names its cause, for one-line error messages.

    Most errors say it on their first line. TensorFlow's graph-mode errors
    begin with ``Graph execution error:`` and the stack of the failing op;
    the op's own message (e.g. ``...; File too large``) follows the
    ``Node: '<name>'`` line, and that line is returned.

    ```python
    except tf.errors.OpError as error:
        cause = monsession.plugins.error_cause(error)
        raise MyError(f"MyHook: writing {path} failed: {cause}") from error
    ```

    Args:
      error: Any exception.

    Returns:
      One line, stripped; the type name of `error` when its message is empty.
    """
    lines = [line.strip() for line in str(error).splitlines()]
    lines = [line for line in lines if line]
    if not lines:
        return type(error).__name__
    if not lines[0].endswith(_GRAPH_HEADER):
        return lines[0]
    for index, line in enumerate(lines[:-1]):
        if line.startswith(_NODE_LINE):
            return lines[index + 1]
    # No "Node:" line: the first line that is neither a header, a stack
    # frame nor the node marker.
    for line in lines[1:]:
        if not line.startswith(("Detected at node", "File ", "[[", "Original stack")):
            return line
    return lines[0]


def event_file_writer(logdir: str | os.PathLike[str]) -> tf.compat.v1.summary.FileWriter:
    """Returns this process's `tf.compat.v1.summary.FileWriter` for `logdir` (graph mode).

    One writer, and one event file, per directory per process, shared with
    TensorFlow's own hooks through `tf.compat.v1.summary.FileWriterCache`
    (which returns the same writer from then on). A writer created here
    names its event file ``events.out.tfevents.<secs>.<host>.<pid>``, so two
    processes writing into one directory never share a file (TensorFlow's
    own name has no process id). Hook families call this instead of
    `FileWriterCache.get` for the same reason.

    Args:
      logdir: The directory of the event file.

    Returns:
      The cached writer (it records the default graph when created). When
      the `FileWriter` of TensorFlow's writer-cache module is replaced (as
      TensorFlow's hook tests do with a fake writer), the writer is made by
      the replacement, with the arguments TensorFlow's cache gives it.
    """
    from monsession import _tf_compat

    key = os.fspath(logdir)
    return _tf_compat.file_writer_cache_get_or_add(key, lambda: _new_writer(key))


def _new_writer(logdir: str) -> tf.compat.v1.summary.FileWriter:
    """A writer of the class TensorFlow's cache uses now; ours names its file with the pid."""
    import tensorflow as tf

    from monsession import _tf_compat

    writer_class = _tf_compat.file_writer_class()
    graph = tf.compat.v1.get_default_graph()
    if writer_class is not tf.compat.v1.summary.FileWriter:
        # Replaced (TensorFlow's hook tests install a fake writer): built as the cache builds it.
        return writer_class(logdir, graph=graph)
    return writer_class(logdir, graph=graph, filename_suffix=f".{os.getpid()}")
