"""Where `ProgressBarHook` shows progress: a tqdm bar, or plain log lines.

Both displays take the same calls: `start` when a session is created,
`advance` on a step whose values were not fetched (one more step, no new
values), `show` on a step whose global step and values were fetched, and
`finish` in `end()`.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import time
from collections.abc import Mapping
from typing import IO, Any

from tqdm import tqdm
from tqdm.contrib.logging import logging_redirect_tqdm

from monsession import tf_logging


def _shows_info() -> bool:
    """Whether TensorFlow's logger shows INFO records (its verbosity is INFO or lower)."""
    import tensorflow as tf

    return bool(tf.get_logger().isEnabledFor(logging.INFO))


def is_terminal(file: IO[str]) -> bool:
    """Whether `file` is an interactive terminal."""
    try:
        return bool(file.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def _console_loggers() -> list[logging.Logger]:
    """The loggers with a handler writing to `sys.stdout` or `sys.stderr`.

    The root logger, TensorFlow's (created first, so that the handler
    TensorFlow adds to it when the root logger has none is there) and
    ``"monsession"``; only those with such a handler, since each logger
    handed to `logging_redirect_tqdm` gets a handler of its own.
    """
    import tensorflow as tf

    candidates = [logging.getLogger(), tf.get_logger(), logging.getLogger("monsession")]
    return [logger for logger in candidates if any(map(_is_console, logger.handlers))]


def _is_console(handler: logging.Handler) -> bool:
    stream = getattr(handler, "stream", None)
    return isinstance(handler, logging.StreamHandler) and stream in (sys.stdout, sys.stderr)


class BarDisplay:
    """A tqdm progress bar: steps, steps/sec, ETA and the latest values.

    While the bar is shown, the console handlers of the root, ``"tensorflow"``
    and ``"monsession"`` loggers write through `tqdm.write`: the bar is
    cleared, the record written on a line of its own, and the bar redrawn
    below it, so log lines and the bar never share a terminal line.

    Args:
      file: Where the bar is drawn.
      desc: A prefix for the bar, or `None`.
    """

    def __init__(self, file: IO[str], desc: str | None) -> None:
        self._file = file
        self._desc = desc
        self._bar: Any = None
        self._redirect: contextlib.ExitStack | None = None

    def start(self, position: int, total: int | None) -> None:
        if self._bar is None:
            redirect = contextlib.ExitStack()
            redirect.enter_context(logging_redirect_tqdm(_console_loggers()))
            self._redirect = redirect
            self._bar = tqdm(
                total=total,
                initial=position,
                file=self._file,
                desc=self._desc,
                unit="step",
                dynamic_ncols=True,
            )
        else:
            self.show(position, total, None)

    def advance(self, steps: int = 1) -> None:
        self._bar.update(steps)

    def show(self, position: int, total: int | None, values: Mapping[str, str] | None) -> None:
        bar = self._bar
        if total is not None and bar.total != total:
            bar.total = total
        if values:
            bar.set_postfix(values, refresh=False)
        bar.update(position - bar.n)

    def finish(self, position: int, total: int | None) -> None:
        self.show(position, total, None)
        self._bar.close()
        self._bar = None
        if self._redirect is not None:
            self._redirect.close()
            self._redirect = None


class LineDisplay:
    """Plain lines, for output that is not a terminal.

    On TensorFlow's logger (INFO), as every hook logs, when that logger
    shows INFO records; otherwise on `file`, where the bar would have
    been: at TensorFlow's default verbosity (WARNING) a line logged at
    INFO would show nothing at all.

    A line is logged on the first step whose values were fetched, then on
    such steps at most once every `every_secs` seconds, and once more by
    `finish`:
    ``"step 20/50 (40%), 9.8 steps/sec, ETA 00:03, loss = 0.25"``. Rates
    (and so the ETA) are measured from the end of the first step of a
    session, so that tracing and warm-up do not count: the first line has
    none.

    Args:
      every_secs: Seconds between lines (0: a line on every fetch).
      desc: A prefix for the lines, or `None`.
      file: Where lines go when TensorFlow's logger hides INFO records.
    """

    def __init__(self, every_secs: float, desc: str | None, file: IO[str]) -> None:
        self._every_secs = every_secs
        self._file = file
        self._prefix = f"{desc}: " if desc else ""
        self._values: Mapping[str, str] = {}
        self._line_time: float | None = None
        self._line_position = 0
        self._position = 0
        self._lines = 0

    def start(self, position: int, total: int | None) -> None:
        self._line_time = None  # Set when the first step is over.
        self._position = position

    def _first_step_over(self, position: int) -> None:
        """Starts measuring the rate after the session's first step."""
        self._position = position
        if self._line_time is None:
            self._line_time = time.time()
            self._line_position = position

    def advance(self, steps: int = 1) -> None:
        """Counts the steps; lines are written only when values were fetched."""
        self._first_step_over(self._position + steps)

    def show(self, position: int, total: int | None, values: Mapping[str, str] | None) -> None:
        if values is not None:
            self._values = values
        self._first_step_over(position)
        assert self._line_time is not None
        if total is not None and position >= total:
            return  # The last step: `finish` writes its line, with these values.
        if self._lines == 0 or time.time() - self._line_time >= self._every_secs:
            self._write(position, total)

    def finish(self, position: int, total: int | None) -> None:
        self._write(position, total)

    def _write(self, position: int, total: int | None) -> None:
        now = time.time()
        if self._line_time is None:  # No step ran in this session.
            self._line_time, self._line_position = now, position
        elapsed = now - self._line_time
        steps = position - self._line_position
        rate = steps / elapsed if elapsed > 0 and steps > 0 else None
        parts = [f"step {position}"]
        if total:
            parts[0] += f"/{total} ({100.0 * position / total:.0f}%)"
        if rate is not None:
            parts.append(f"{rate:.4g} steps/sec")
            if total and rate > 0 and position < total:
                parts.append(f"ETA {tqdm.format_interval((total - position) / rate)}")
        parts.extend(f"{tag} = {value}" for tag, value in self._values.items())
        if _shows_info():
            tf_logging.info("%s%s", self._prefix, ", ".join(parts))
        else:
            print(f"{self._prefix}{', '.join(parts)}", file=self._file, flush=True)
        self._line_time = now
        self._line_position = position
        self._lines += 1
