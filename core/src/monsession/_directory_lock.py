"""One training chief per checkpoint directory: a lock file naming its holder.

`MonitoredTrainingSession` takes the lock of its `checkpoint_dir` when a
chief that saves checkpoints starts, and gives it back when the session
closes. The lock is the file ``.monsession.lock`` holding the pid, the host
and a token of its holder. A lock whose process no longer runs on this host
is stale and taken over with a WARNING; a lock of a process on another host
cannot be checked and is an error like a live one. Remote directories
(``gs://``, ...) are not locked.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
import uuid
from typing import Any

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


def lock_directory(directory: str) -> DirectoryLock | None:
    """Takes the lock of a local `directory`; `None` for a remote one.

    Raises:
      DirectoryLockedError: If a live process holds the directory.
    """
    if "://" in directory:
        logger.info("Remote checkpoint_dir %s is not locked against a second chief.", directory)
        return None
    lock = DirectoryLock(directory)
    try:
        lock.acquire()
    except OSError as error:
        # Not a directory we can write to: the checkpoint hook reports it.
        logger.debug("Could not lock %s: %s", directory, error)
        return None
    return lock
