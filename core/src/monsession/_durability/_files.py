"""Files beside training: who writes into a checkpoint directory, the shared event writer,
and what an error says about a file. TensorFlow is imported only by `event_file_writer`.

One chief per checkpoint directory: the lock file ``.monsession.lock``, taken by the
checkpoint family (never core). Writes in the background are waited for by every restore
(`wait_for_writes`), so it never falls back past a save already begun.

`file_error_behind` tells a failed file write from the end of the data: TensorFlow maps
EFBIG, EOVERFLOW and ERANGE to OUT_OF_RANGE, so such a write inside a step arrives as the
`OutOfRangeError` that ends a session cleanly; the errno's text gives it away.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import json
import logging
import os
import socket
import threading
import time
import uuid
import weakref
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import tensorflow as tf

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
    """This process's lock of checkpoint `directory` (created if missing); `acquire` raises
    `DirectoryLockedError` if a live process (or one on another host) holds it."""

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
            with contextlib.suppress(FileNotFoundError):
                os.remove(self.path)
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
        return pid == os.getpid() or not _pid_alive(pid)  # Ours: a session never closed.

    def release(self) -> None:
        """Removes the lock file if it is still ours."""
        if not self._held:
            return
        self._held = False
        holder = _read(self.path)
        if holder and holder.get("token") == self._content["token"]:
            with contextlib.suppress(FileNotFoundError):
                os.remove(self.path)


class DirectoryLockHandle:
    """One taker's share of this process's lock of a checkpoint directory (from
    `monsession.plugins.lock_checkpoint_dir`): the lock file stays until every handle of
    the directory in this process is released.

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
        """Gives this handle's share back (once); the last one removes the lock file."""
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

    A writer of checkpoints calls it before its first write and releases the handle when it
    stops writing (clean end, failure or close). Taking it again in the same process shares the
    lock. A lock left by a process that no longer runs on this host is taken over with a
    WARNING. The directory is created if missing.

    ```python
    handle = monsession.plugins.lock_checkpoint_dir(checkpoint_dir)
    try:
        ...  # Write checkpoints.
    finally:
        if handle is not None:
            handle.release()
    ```

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


# --- what an error says about a file; the event writer ---

_OUT_OF_RANGE_ERRNOS = (errno.EFBIG, errno.EOVERFLOW, errno.ERANGE)
_GRAPH_HEADER = "execution error:"  # TensorFlow's "Graph execution error:".
_NODE_LINE = "Node: "


def file_error_behind(error: BaseException) -> OSError | None:
    """The failed file operation behind a step's `OutOfRangeError`: an `OSError` with the
    errno and the message line naming the file (to raise from `error`), or `None` (e.g. the
    end of a dataset)."""
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


def error_cause(error: BaseException) -> str:
    """The line of `error`'s message that names its cause, for one-line error messages.

    Most errors say it on their first line. TensorFlow's graph-mode errors begin with ``Graph
    execution error:`` and the stack of the failing op; the op's own message (e.g. ``...; File
    too large``) follows the ``Node: '<name>'`` line, and that line is returned.

    ```python
    except tf.errors.OpError as error:
        cause = monsession.plugins.error_cause(error)
        raise MyError(f"MyHook: writing {path} failed: {cause}") from error
    ```

    Returns one line, stripped; the type name of `error` when its message is empty.
    """
    lines = [line.strip() for line in str(error).splitlines()]
    lines = [line for line in lines if line]
    if not lines:
        return type(error).__name__
    if not lines[0].endswith(_GRAPH_HEADER):
        return lines[0]
    for index, line in enumerate(lines[:-1]):
        if line.startswith(_NODE_LINE):
            return lines[index + 1]
    # No "Node:" line: the first line that is neither a header, a stack
    # frame nor the node marker.
    for line in lines[1:]:
        if not line.startswith(("Detected at node", "File ", "[[", "Original stack")):
            return line
    return lines[0]


def event_file_writer(logdir: str | os.PathLike[str]) -> tf.compat.v1.summary.FileWriter:
    """Returns this process's `tf.compat.v1.summary.FileWriter` for `logdir` (graph mode).

    One writer, and one event file, per directory per process, shared with TensorFlow's own
    hooks through `tf.compat.v1.summary.FileWriterCache`. A writer created here names its event
    file ``events.out.tfevents.<secs>.<host>.<pid>``, so two processes writing into one
    directory never share a file (TensorFlow's name has no process id): hook families call this
    instead of `FileWriterCache.get`. It records the default graph when created. When
    TensorFlow's cache module's `FileWriter` is replaced (TensorFlow's hook tests do), the
    replacement makes it, with the arguments TensorFlow's cache gives.
    """
    from monsession import _tf_compat

    key = os.fspath(logdir)
    return _tf_compat.file_writer_cache_get_or_add(key, lambda: _new_writer(key))


def _new_writer(logdir: str) -> tf.compat.v1.summary.FileWriter:
    """A writer of the class TensorFlow's cache uses now; ours names its file with the pid."""
    import tensorflow as tf

    from monsession import _tf_compat

    writer_class = _tf_compat.file_writer_class()
    graph = tf.compat.v1.get_default_graph()
    if writer_class is not tf.compat.v1.summary.FileWriter:
        # Replaced (TensorFlow's hook tests install a fake writer): built as the cache builds it.
        return writer_class(logdir, graph=graph)
    return writer_class(logdir, graph=graph, filename_suffix=f".{os.getpid()}")
