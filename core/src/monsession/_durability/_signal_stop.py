"""Stopping at a step boundary on SIGTERM and SIGINT, then handing the signal back: once
the session closed (hooks' `end()`), the process does what it would have done without
monsession. Nothing here imports TensorFlow.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
from collections.abc import Callable, Iterable
from types import FrameType
from typing import Any

from monsession._api._types import Unchecked

logger = logging.getLogger("monsession")

DEFAULT_SIGNALS: tuple[signal.Signals, ...] = (signal.SIGTERM, signal.SIGINT)

_UNCATCHABLE = frozenset(
    getattr(signal, name) for name in ("SIGKILL", "SIGSTOP") if hasattr(signal, name)
)


def _signal_names(signums: Iterable[int]) -> str:
    return ", ".join(signal.Signals(signum).name for signum in signums)


def resolve_stop_signals(
    value: Unchecked, has_end_work: Callable[[], bool], owner: str
) -> tuple[signal.Signals, ...]:
    """The signals a session stops on, in order, without repeats, from `stop_on_signals`:
    `True` (SIGTERM and SIGINT), `False` (none), `None` (SIGTERM and SIGINT when
    `has_end_work()`, else none), or an iterable of signal numbers.

    Raises:
      TypeError: If `value` is of another type.
      ValueError: If it names an unknown signal, SIGKILL or SIGSTOP.
    """
    if value is None:
        return DEFAULT_SIGNALS if has_end_work() else ()
    if isinstance(value, bool):
        return DEFAULT_SIGNALS if value else ()
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise TypeError(
            f"{owner}: stop_on_signals must be True, False, None or an iterable of signal "
            f"numbers (e.g. [signal.SIGTERM, signal.SIGUSR1]), got {value!r}."
        )
    return tuple(dict.fromkeys(_catchable_signal(item, owner) for item in value))


def _catchable_signal(item: Unchecked, owner: str) -> signal.Signals:
    """The signal `item` of `stop_on_signals` names; it must be one a process can catch."""
    try:
        if isinstance(item, bool) or not isinstance(item, int):
            raise ValueError
        signum = signal.Signals(item)
    except ValueError:
        raise ValueError(
            f"{owner}: stop_on_signals holds {item!r}, which is not a signal number "
            "(use the constants of the signal module, e.g. signal.SIGTERM)."
        ) from None
    if signum in _UNCATCHABLE:
        raise ValueError(
            f"{owner}: stop_on_signals holds {signum.name}, which no process can catch."
        )
    return signum


def _flush_stdio() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            pass  # A closed or broken stream: nothing more to save.


class SignalStop:
    """Turns some signals into a stop request while a session is open.

    `install()` replaces the handlers (main thread only; `SIG_IGN` and handlers not installed
    from Python are left alone). The first signal is recorded (`stop_requested()`) and pending;
    a second one restores the previous handlers and is delivered at once. `release()` restores
    them and returns the pending signal, which `deliver()` hands on. The handler only assigns
    attributes (no TensorFlow, no I/O, no logging: Python cannot re-enter a write it
    interrupted); the main code logs what it recorded.

    `owner` names the session class in log lines.
    """

    def __init__(self, signums: Iterable[int], owner: str) -> None:
        self._signums = tuple(signums)
        self._owner = owner
        self._previous: dict[int, Any] = {}  # What signal.getsignal() gave.
        self._handler = self._handle  # One object, to recognise it later.
        self._installed = False
        self.received: int | None = None
        self._pending: int | None = None
        self._announced = False
        self._agreement_required = False
        self._agreed: int | None = None
        # The signal the session stops on: received (and agreed, if required), or `None`.
        self.stopped_on: int | None = None

    @property
    def installed(self) -> bool:
        """Whether this object's handler is in place for some signal."""
        return self._installed

    def install(self) -> None:
        """Installs the handler for each signal that can take it."""
        if not self._signums:
            return
        if threading.current_thread() is not threading.main_thread():
            logger.info(
                "%s: created outside the main thread; %s will not stop it at a step boundary "
                "(Python handles signals in the main thread only).",
                self._owner,
                _signal_names(self._signums),
            )
            return
        for signum in self._signums:
            previous = signal.getsignal(signum)
            if previous is signal.SIG_IGN or previous is None:
                # A fact of the environment (e.g. SIGINT in a background job),
                # not of the training: below a user's INFO log.
                logger.debug(
                    "%s: %s is %s in this process; leaving it so.",
                    self._owner,
                    signal.Signals(signum).name,
                    "ignored" if previous is signal.SIG_IGN else "handled outside Python",
                )
                continue
            self._previous[signum] = previous
            signal.signal(signum, self._handler)
        self._installed = bool(self._previous)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if not self._installed:
            # Released while another session's handler was on top, which has
            # since handed the signal down to this one: pass it on.
            self._forward(signum, frame)
            return
        if self.received is None:
            self.received = self._pending = signum
            if not self._agreement_required:
                self.stopped_on = signum
            return
        self._pending = None
        self.release()
        self.deliver(signum)

    def require_agreement(self) -> None:
        """Makes `stop_requested()` wait for `agree()` (at a step boundary): the workers of a
        job stop together."""
        self._agreement_required = True
        self.stopped_on = self._agreed

    def agree(self, signum: int) -> None:
        """Records that the workers agreed to stop on `signum`; a worker that did not receive
        it hands it on too when it closes, so every worker exits the same way."""
        if self._agreed is not None:
            return
        self._agreed = signum
        if self._agreement_required:
            self.stopped_on = signum
        if self.received is None and self._pending is None:
            self._pending = signum

    def stop_requested(self) -> bool:
        """Whether a signal arrived (and was agreed, if required); the first call logs it."""
        signum = self.stopped_on
        if signum is None:
            return False
        if not self._announced:
            self._announced = True
            name = signal.Signals(signum).name
            where = "received" if self.received is not None else "received by another worker"
            logger.warning(
                "%s: %s %s; stopping after the current step. Closing the session runs "
                "the hooks' end() (e.g. saving a checkpoint), then hands %s on as if "
                "monsession were not there. Send it again to hand it on at once.",
                self._owner,
                name,
                where,
                name,
            )
        return True

    def release(self) -> int | None:
        """Restores the previous handlers (not one installed after ours); returns the pending
        signal, if any."""
        if self._installed:
            self._installed = False
            for signum, previous in self._previous.items():
                try:
                    if signal.getsignal(signum) is self._handler:
                        signal.signal(signum, previous)
                except ValueError:  # Not the main thread: cannot restore here.
                    logger.warning(
                        "%s: closed outside the main thread; the %s handler stays installed "
                        "and passes signals on.",
                        self._owner,
                        signal.Signals(signum).name,
                    )
        pending, self._pending = self._pending, None
        return pending

    def deliver(self, signum: int) -> None:
        """Delivers `signum` to the handler installed before ours (after `release()`): a
        default disposition ends the process (stdio flushed first); a Python handler runs
        here and what it raises propagates."""
        _flush_stdio()
        signal.raise_signal(signum)

    def _forward(self, signum: int, frame: FrameType | None) -> None:
        previous = self._previous.get(signum, signal.SIG_DFL)
        if callable(previous):
            previous(signum, frame)
            return
        signal.signal(signum, previous)
        _flush_stdio()
        signal.raise_signal(signum)
