"""Waiting for the checkpoint writes that monsession's eager saves run in the background.

The kill tests that mean a kill *between* checkpoints wait for them first:
the last save is then complete, as after a synchronous save. A kill inside
a background write is tested on its own (hooks-checkpoint's
`test_checkpoint_kill.py`: the previous checkpoint is restored, whole).
"""

from __future__ import annotations

import threading
import time

_WRITER_THREAD = "monsession checkpoint writer"


def wait_for_checkpoint_writes(timeout_secs: float = 120.0) -> None:
    """Returns once no background checkpoint write of this process is running."""
    deadline = time.monotonic() + timeout_secs
    for thread in threading.enumerate():
        if thread.name.startswith(_WRITER_THREAD):
            thread.join(max(0.0, deadline - time.monotonic()))
            if thread.is_alive():
                raise TimeoutError(f"{thread.name} still writing after {timeout_secs} s")
