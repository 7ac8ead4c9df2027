"""The signal layer of a monitored session: stop at a step boundary, hand the signal on.

`SignalLayer` owns what a stop signal does to a session: the handlers
(`_durability._signal_stop.SignalStop`), the agreement of the workers of a
multi-worker job after each step, closing the session once the signal
stopped it, and handing the signal on after the session closed. Under
collective ops the same agreement also settles how many silent steps the
next run fuses (`_fusion`): one all-reduce per run, whatever the
session does.
"""

from __future__ import annotations

import logging
import signal
from collections.abc import Callable, Iterable

from monsession._durability._signal_stop import SignalStop, resolve_stop_signals
from monsession._fusion._fusion import Fusion, StepVotes

logger = logging.getLogger("monsession")


class StoppedOnSignalError(RuntimeError):
    """`run()` after the session closed on a signal whose previous handler returned."""


class SignalLayer:
    """Stops a session at a step boundary on a signal, and hands the signal on once closed.

    Args:
      stop_on_signals: The session's `stop_on_signals` argument.
      has_end_work: Whether some hook has work to do in `end()` (decides `None`).
      owner: The session class, for messages.
    """

    def __init__(
        self,
        stop_on_signals: bool | Iterable[int] | None,
        has_end_work: Callable[[], bool],
        owner: str,
    ) -> None:
        self._owner = owner
        self._stop = SignalStop(resolve_stop_signals(stop_on_signals, has_end_work, owner), owner)
        self._agreement: StepVotes | None = None  # Of the session's strategy.
        self._fusion: Fusion | None = None  # The session's, told the silent steps agreed.
        self.closed_on_signal = False

    def install(self) -> None:
        """Installs the handlers: from now on a signal stops the session at a step boundary."""
        self._stop.install()

    def agree_with_workers(self, agreement: StepVotes, fusion: Fusion | None = None) -> None:
        """Stops on a signal only once the workers agree, through `agreement` after each step.

        Args:
          agreement: The agreement of the session's strategy (`StepAgreement`).
          fusion: The session's `Fusion`, or `None`: it fuses the silent steps
            agreed in the same all-reduce.
        """
        # Every worker takes part, even one whose handlers could not be
        # installed (it never votes): the all-reduce needs all of them.
        self._stop.require_agreement()
        self._agreement = agreement
        self._fusion = fusion
        if fusion is not None:
            fusion.agree_with_workers()

    def stop_requested(self) -> bool:
        """Whether a signal stopped the session (agreed by the workers, if required)."""
        return self._stop.stop_requested()

    def before_step(self, method: str, close: Callable[[], None]) -> None:
        """Before a step: once a signal stopped the session, runs none.

        Closes the session with `close` and hands the signal on; if the
        previous handler returns, raises.

        Raises:
          StoppedOnSignalError: If the signal's previous handler returned.
        """
        if not self._stop.stop_requested():
            return
        signum = self._stop.stopped_on
        assert signum is not None
        name = signal.Signals(signum).name
        self.closed_on_signal = True
        self.close(close)
        raise StoppedOnSignalError(
            f"{self._owner}.{method}() called after the session stopped on {name}: "
            "it is closed. Check should_stop() before each step."
        )

    def after_step(self) -> None:
        """After a step, under a multi-worker strategy: did some worker receive a signal?

        And how many silent steps may the next run fuse (the fewest any worker allows)?
        """
        if self._agreement is None or self._stop.stopped_on is not None:
            return
        planned = 0 if self._fusion is None else self._fusion.next_silent_steps()
        agreed, silent_steps = self._agreement.agree(self._stop.received, planned)
        if self._fusion is not None:
            self._fusion.agreed(silent_steps)
        if agreed is not None:
            self._stop.agree(agreed)

    def close(self, close: Callable[[], None], failed: bool = False) -> None:
        """Closes the session with `close`, then hands a pending signal on.

        The signal is not handed on when closing raised, or `failed` (the
        session's own error propagates instead).
        """
        try:
            close()
        except BaseException:
            if self._stop.release() is not None:
                logger.warning(
                    "%s: closing failed; the error propagates instead of the stop signal.",
                    self._owner,
                )
            raise
        self._stop.stop_requested()  # Logs a signal that arrived while closing.
        pending = self._stop.release()
        if pending is None:
            return
        name = signal.Signals(pending).name
        if failed:
            logger.warning(
                "%s: a %s arrived, but the session failed; the error propagates instead.",
                self._owner,
                name,
            )
            return
        logger.info("%s: closed; handing %s on.", self._owner, name)
        try:
            self._stop.deliver(pending)
        except BaseException as raised:
            raised.__suppress_context__ = True  # Whatever was being handled is not its cause.
            raise
