"""`error_cause`: the line of an error's message that says what went wrong."""

from __future__ import annotations

_GRAPH_HEADER = "execution error:"  # TensorFlow's "Graph execution error:".
_NODE_LINE = "Node: "


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
