"""What an error's message says: the line that names its cause, and a failed file write.

`error_cause` gives the line of a message that names what went wrong, for
one-line error messages (core's and the families').

`file_error_behind` tells a failed file write apart from the end of the
input data. TensorFlow maps the errno of a failed file operation to a
status code, and three of them to OUT_OF_RANGE: EFBIG ("File too large",
e.g. a file-size limit or FAT32), EOVERFLOW and ERANGE. Raised inside a step
(e.g. by an in-step `tf.summary` write), such an error arrives as
`OutOfRangeError`, which a session takes for the end of the data. Its
message carries the errno's text after the file's path, which is how it is
recognized here. Nothing here imports TensorFlow.
"""

from __future__ import annotations

import errno
import os

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
