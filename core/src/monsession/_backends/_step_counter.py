"""The step service's host copy of the global step, shared by both backends.

A `StepCounter` holds the global step before the current run and after the
last one. Each training run that calls a step adds one on the host, so no
run needs a device read to know its step. A run that is not a training
step (`forget_step`) leaves the step unknown until it is read again. When a
value read from the device shows that runs do not add one each, the
counter logs it once and is *drifted*: from then on the backend reads the
device whenever a hook needs the step. What a backend reads, and when, is
its own policy (see `_graph_backend` and `_eager_backend`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

logger = logging.getLogger("monsession")


class StepCounter:
    """The global step on the host: counted per training run, read when unknown.

    Args:
      read: Reads the global step from the device now; `None` when there
        is no global step (the step is then never known).
      value: The step read as the session starts, or `None` (unknown).
    """

    def __init__(self, read: Callable[[], int] | None, value: int | None = None) -> None:
        self._read = read
        self._before = value
        self._after = value
        self._stale = False
        self._uncounted = False
        self._drifted = False

    @property
    def before(self) -> int | None:
        """The step before the current run, or `None` (unknown)."""
        return self._before

    @property
    def after(self) -> int | None:
        """The step after the last run, what the next run starts from; `None`: unknown."""
        return self._after

    @property
    def stale(self) -> bool:
        """Whether the last run left the step unknown (`forget_step`) and no read followed."""
        return self._stale

    @property
    def uncounted(self) -> bool:
        """Whether the current run is not a training step."""
        return self._uncounted

    @property
    def drifted(self) -> bool:
        """Whether runs were seen not to add one each."""
        return self._drifted

    def start_run(self, read_if_stale: bool = True) -> None:
        """A run begins: the step before it is the step after the last one.

        Args:
          read_if_stale: Whether to read the device now when the last run
            left the step unknown; otherwise it stays unknown until read.
        """
        if self._stale:
            self._stale = False
            if read_if_stale:
                self.refresh()
        self._before = self._after
        self._uncounted = False

    def forget_step(self) -> None:
        """The current run is not a training step: it does not add one."""
        self._uncounted = True

    def end_run(self, counted_step: bool) -> None:
        """The current run is over; `counted_step`: it called a step that adds one."""
        if self._uncounted:
            self._after, self._stale = None, self._read is not None
        elif counted_step and self._after is not None:
            self._after += 1

    def refresh(self) -> int:
        """Reads the device: the step after the last run."""
        assert self._read is not None
        self._after = int(self._read())
        self._stale = False
        return self._after

    def read_before(self) -> int:
        """Reads the device before a run starts (or the session): the step before it."""
        self._before = self.refresh()
        return self._before

    def learn_before(self, value: int) -> None:
        """The step before the current run, learned once asked (it was unknown)."""
        self._before = value

    def adopt(self, value: int | None) -> None:
        """The device showed `value` after the last run: it replaces the host count.

        `None`: only a read can tell (the runs do not add one each).
        """
        self._after, self._stale = value, False

    def advance(self, steps: int) -> None:
        """`steps` steps were scheduled (run later, on workers): counted now."""
        assert self._after is not None, "advance() needs a known step."
        self._after += steps

    def known_after(self) -> int | None:
        """The step after the last run, read first if the last run left it unknown."""
        if self._stale:
            self.refresh()
        return self._after

    def drift(self, message: str, *args: object) -> None:
        """Runs do not add one each: logs `message` once, and reads from now on."""
        if not self._drifted:
            logger.warning(message, *args)
        self._drifted = True
