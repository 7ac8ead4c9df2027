"""Hook output through TensorFlow's logger, as `tf.compat.v1.train`'s hooks log.

Hooks log to TensorFlow's logger (``"tensorflow"``) in both modes, the session and plugin
machinery to ``"monsession"``: so
``tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.INFO)`` alone shows the hooks' lines.

```python
from monsession import tf_logging

tf_logging.info("%s: %g", "global_step/sec", 12.5)
tf_logging.log_first_n(tf_logging.WARN, "The step did not move: %s.", 5, 7)
```

Each function is TensorFlow's own, looked up at each access: call
``tf_logging.info(...)`` (not ``from ... import info``) so that a later patch
of TensorFlow's logging is seen. Importing this module imports no TensorFlow.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

__all__ = [
    "DEBUG",
    "ERROR",
    "INFO",
    "WARN",
    "debug",
    "error",
    "info",
    "log",
    "log_every_n",
    "log_first_n",
    "warning",
]

DEBUG = logging.DEBUG
"""The DEBUG level, as `tf.compat.v1.logging.DEBUG`."""
INFO = logging.INFO
"""The INFO level, as `tf.compat.v1.logging.INFO`."""
WARN = logging.WARN
"""The WARN level, as `tf.compat.v1.logging.WARN`."""
ERROR = logging.ERROR
"""The ERROR level, as `tf.compat.v1.logging.ERROR`."""

_FORWARDED = frozenset({"debug", "info", "warning", "error", "log", "log_every_n", "log_first_n"})

if TYPE_CHECKING:

    def debug(msg: str, *args: object) -> None:
        """Logs `msg % args` at DEBUG (`tf_logging.debug`)."""

    def info(msg: str, *args: object) -> None:
        """Logs `msg % args` at INFO (`tf_logging.info`)."""

    def warning(msg: str, *args: object) -> None:
        """Logs `msg % args` at WARNING (`tf_logging.warning`)."""

    def error(msg: str, *args: object) -> None:
        """Logs `msg % args` at ERROR (`tf_logging.error`)."""

    def log(level: int, msg: str, *args: object) -> None:
        """Logs `msg % args` at `level`, a `logging` level (`tf_logging.log`)."""

    def log_every_n(level: int, msg: str, n: int, *args: object) -> None:
        """Logs `msg % args` at `level` once every `n` calls (TensorFlow's count)."""

    def log_first_n(level: int, msg: str, n: int, *args: object) -> None:
        """Logs `msg % args` at `level` for the first `n` calls (TensorFlow's count)."""


def __getattr__(name: str) -> Any:
    """TensorFlow's logging function `name`, as it is now (patches included).

    Raises:
      AttributeError: If `name` is not one of this module's functions.
    """
    if name not in _FORWARDED:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from monsession._tf_compat import tf_logging

    return getattr(tf_logging(), name)


def __dir__() -> list[str]:
    return sorted({*globals(), *_FORWARDED})
