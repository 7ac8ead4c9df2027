"""Who writes into a checkpoint directory: one chief, and writes in the background.

One training chief per directory: the lock file ``.monsession.lock`` names its
holder (pid, host, token). Core takes no lock; the checkpoint family takes it
through `lock_checkpoint_dir` and gives it back in `end()` or `on_failure()`.
Within a process the lock is shared by handles; a lock of a dead process on
this host is taken over with a WARNING; remote directories are not locked.

A hook writing checkpoints in a thread registers its writer here
(`register_writer`); every restore first waits for the directory's writers
(`wait_for_writes`), so it never falls back past a save already begun.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import socket
import threading
import time
import uuid
import weakref
from typing import Any, Protocol

logger = logging.getLogger("monsession")

LOCK_FILE = ".monsession.lock"


class DirectoryLockedError(RuntimeError):
    """Another live training session holds the checkpoint directory."""


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # Alive, owned by another user.
    return True


def _read(path: str) -> dict[str, Any] | None:
    """The lock's content; `None` if it vanished; ``{}`` if it cannot be parsed."""
    try:
        with open(path, encoding="utf-8") as lock_file:
            content = json.load(lock_file)
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {}
    return content if isinstance(content, dict) else {}


def _describe(holder: dict[str, Any]) -> str:
    started = holder.get("started")
    since = (
        f", since {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(started))}"
        if isinstance(started, (int, float))
        else ""
    )
    return f"process {holder.get('pid')} on host {holder.get('host')!r}{since}"


class DirectoryLock:
    """The lock of one checkpoint directory, held by this process.

    Args:
      directory: The checkpoint directory (created if missing).

    Raises (from `acquire`):
      DirectoryLockedError: If a live process (or one on another host) holds it.
    """

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.path = os.path.join(directory, LOCK_FILE)
        self._content = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "token": uuid.uuid4().hex,
            "started": time.time(),
        }
        self._held = False

    def acquire(self) -> None:
        """Creates the lock file, taking over a stale one."""
        os.makedirs(self.directory, exist_ok=True)
        for _ in range(3):
            if self._create():
                self._held = True
                return
            holder = _read(self.path)
            if holder is None:
                continue  # Released meanwhile: try again.
            if not self._stale(holder):
                raise DirectoryLockedError(
                    f"checkpoint_dir {self.directory!r} is in use by another training session: "
                    f"{_describe(holder)} holds {self.path}. Two chiefs saving into one "
                    "directory overwrite each other's checkpoints. Stop that process or train "
                    "into another checkpoint_dir; if it is gone (e.g. on another host), delete "
                    "the lock file."
                )
            logger.warning(
                "Taking over the lock %s of %s, which no longer runs.", self.path, _describe(holder)
            )
            try:
                os.remove(self.path)
            except FileNotFoundError:
                pass
        raise DirectoryLockedError(
            f"Could not take the lock {self.path} of checkpoint_dir {self.directory!r}: other "
            "processes keep taking it."
        )

    def _create(self) -> bool:
        try:
            descriptor = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            return False
        with os.fdopen(descriptor, "w", encoding="utf-8") as lock_file:
            json.dump(self._content, lock_file)
        return True

    def _stale(self, holder: dict[str, Any]) -> bool:
        pid = holder.get("pid")
        if not isinstance(pid, int) or not holder:
            return True  # Unreadable: written by no live session of ours.
        if holder.get("host") != self._content["host"]:
            return False  # Cannot tell whether a process on another host runs.
        if pid == os.getpid():
            # A session of this process that was never closed.
            return True
        return not _pid_alive(pid)

    def release(self) -> None:
        """Removes the lock file if it is still ours."""
        if not self._held:
            return
        self._held = False
        holder = _read(self.path)
        if holder and holder.get("token") == self._content["token"]:
            try:
                os.remove(self.path)
            except FileNotFoundError:
                pass


class DirectoryLockHandle:
    """One taker's share of this process's lock of a checkpoint directory.

    Returned by `monsession.plugins.lock_checkpoint_dir`. The lock file stays until
    every handle of the directory in this process is released.

    Attributes:
      directory: The locked directory.
      path: The lock file.
    """

    def __init__(self, lock: DirectoryLock) -> None:
        self._lock: DirectoryLock | None = lock
        self.directory = lock.directory
        self.path = lock.path

    @property
    def held(self) -> bool:
        """Whether this handle still holds its share (`release` not called yet)."""
        return self._lock is not None

    def release(self) -> None:
        """Gives this handle's share back; the last one removes the lock file.

        Calling it again does nothing.
        """
        lock, self._lock = self._lock, None
        if lock is None:
            return
        with _HELD_GUARD:
            key = _key(lock.directory)
            entry = _HELD.get(key)
            if entry is None or entry[0] is not lock:
                return
            entry[1] -= 1
            if entry[1] > 0:
                return
            del _HELD[key]
        lock.release()

    def __repr__(self) -> str:
        return f"DirectoryLockHandle({self.directory!r}, held={self.held})"


# This process's locks: the directory's real path -> [lock, number of handles].
_HELD: dict[str, list[Any]] = {}
_HELD_GUARD = threading.Lock()


def _key(directory: str | os.PathLike[str]) -> str:
    return os.path.realpath(os.fspath(directory))


def _release_all_at_exit() -> None:
    with _HELD_GUARD:
        locks = [entry[0] for entry in _HELD.values()]
        _HELD.clear()
    for lock in locks:
        lock.release()


atexit.register(_release_all_at_exit)


def lock_checkpoint_dir(checkpoint_dir: str | os.PathLike[str]) -> DirectoryLockHandle | None:
    """Takes this process's lock of a local checkpoint directory, for one chief.

    A writer of checkpoints calls it before its first write and releases the
    handle when it stops writing (clean end, failure or close). Taking it
    again in the same process (e.g. two hooks writing into one directory)
    shares the lock: no error, no second file. A lock
    left by a process that no longer runs on this host is taken over with a
    WARNING. The directory is created if missing.

    ```python
    handle = monsession.plugins.lock_checkpoint_dir(checkpoint_dir)
    try:
        ...  # Write checkpoints.
    finally:
        if handle is not None:
            handle.release()
    ```

    Args:
      checkpoint_dir: The directory to lock.

    Returns:
      A `DirectoryLockHandle`, or `None` for a remote directory (``gs://``,
      ...) or one that cannot be created or written to (the writer's own
      checks report that).

    Raises:
      DirectoryLockedError: If a live process (or one on another host) holds it.
    """
    directory = os.fspath(checkpoint_dir)
    if "://" in directory:
        logger.info("Remote checkpoint_dir %s is not locked against a second chief.", directory)
        return None
    with _HELD_GUARD:
        entry = _HELD.get(_key(directory))
        if entry is not None:
            entry[1] += 1
            return DirectoryLockHandle(entry[0])
        lock = DirectoryLock(directory)
        try:
            lock.acquire()
        except OSError as error:
            # Not a directory we can write to: the checkpoint hook reports it.
            logger.debug("Could not lock %s: %s", directory, error)
            return None
        _HELD[_key(directory)] = [lock, 1]
        return DirectoryLockHandle(lock)


# --- checkpoint writes still running in the background ---


class Writer(Protocol):
    """What a background writer offers: waiting for its write, without raising."""

    def wait(self) -> None:
        """Returns once the write begun last has ended (completed or failed)."""


_WRITERS_GUARD = threading.Lock()
_WRITERS: dict[str, weakref.WeakSet[Writer]] = {}


def register_writer(directory: str | os.PathLike[str], writer: Writer) -> None:
    """Makes restores from `directory` wait for `writer` (held weakly)."""
    with _WRITERS_GUARD:
        _WRITERS.setdefault(_key(directory), weakref.WeakSet()).add(writer)


def unregister_writer(directory: str | os.PathLike[str], writer: Writer) -> None:
    """Undoes `register_writer` (nothing if it was not registered)."""
    with _WRITERS_GUARD:
        writers = _WRITERS.get(_key(directory))
        if writers is not None:
            writers.discard(writer)


def wait_for_writes(directory: str | os.PathLike[str]) -> None:
    """Waits until every background write into `directory` begun so far has ended."""
    with _WRITERS_GUARD:
        writers = list(_WRITERS.get(_key(directory), ()))
    for writer in writers:
        writer.wait()
