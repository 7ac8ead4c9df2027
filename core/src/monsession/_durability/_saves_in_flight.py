"""Checkpoint writes still running in the background, which every restore waits for.

A hook that writes checkpoint files in a thread registers the writer of each
directory here (`register_writer`). Before anything in the process picks the
checkpoint to restore from a directory (`restore_newest`: session creation,
recovery, workers), `wait_for_writes` lets every registered writer of that
directory finish, so a restore never falls back past a save that was begun
before it. A failed write keeps its error for its hook, which raises it.
"""

from __future__ import annotations

import os
import threading
import weakref
from typing import Protocol


class Writer(Protocol):
    """What a background writer offers: waiting for its write, without raising."""

    def wait(self) -> None:
        """Returns once the write begun last has ended (completed or failed)."""


_lock = threading.Lock()
_writers: dict[str, weakref.WeakSet[Writer]] = {}


def _key(directory: str | os.PathLike[str]) -> str:
    return os.path.realpath(os.fspath(directory))


def register_writer(directory: str | os.PathLike[str], writer: Writer) -> None:
    """Makes restores from `directory` wait for `writer` (held weakly)."""
    with _lock:
        _writers.setdefault(_key(directory), weakref.WeakSet()).add(writer)


def unregister_writer(directory: str | os.PathLike[str], writer: Writer) -> None:
    """Undoes `register_writer` (nothing if it was not registered)."""
    with _lock:
        writers = _writers.get(_key(directory))
        if writers is not None:
            writers.discard(writer)


def wait_for_writes(directory: str | os.PathLike[str]) -> None:
    """Waits until every background write into `directory` begun so far has ended."""
    with _lock:
        writers = list(_writers.get(_key(directory), ()))
    for writer in writers:
        writer.wait()
