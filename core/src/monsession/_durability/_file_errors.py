"""Tells a failed file write apart from the end of the input data.

TensorFlow maps the errno of a failed file operation to a status code, and
three of them to OUT_OF_RANGE: EFBIG ("File too large", e.g. a file-size
limit or FAT32), EOVERFLOW and ERANGE. Raised inside a step (e.g. by an
in-step `tf.summary` write), such an error arrives as `OutOfRangeError`,
which a session takes for the end of the data. Its message carries the
errno's text after the file's path, which is how it is recognized here.
"""

from __future__ import annotations

import errno
import os

_OUT_OF_RANGE_ERRNOS = (errno.EFBIG, errno.EOVERFLOW, errno.ERANGE)


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
