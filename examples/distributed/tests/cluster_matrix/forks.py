"""The processes of the cluster runs, forked from one server that imported TensorFlow once.

Importing TensorFlow, Keras and the hook families takes most of a small
job's time (half a minute on a busy 2-core machine), and a cluster run
starts a dozen processes: `ForkServer` starts one server process
(`child.py --serve`) that imports everything and runs nothing, and forks
one real process per request; each starts TensorFlow's runtime afresh.
The test holds every pid: `Cluster` kills its processes by pid on exit,
whatever happened, as `distributed_testing.Processes` does.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

CHILD = Path(__file__).resolve().parent / "child.py"


class ForkServer:
    """The server process and the exit statuses it reports. Use as a context manager."""

    def __init__(self) -> None:
        self._server = subprocess.Popen(
            [sys.executable, str(CHILD), "--serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONUNBUFFERED": "1"},
            start_new_session=True,  # Its own process group: ended with its forks.
        )
        self._lock = threading.Condition()
        self._started: dict[str, int] = {}
        self._exited: dict[int, int] = {}
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def __enter__(self) -> ForkServer:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        with self._lock:
            alive = [pid for pid in self._started.values() if pid not in self._exited]
        for pid in alive:
            _kill(pid)
        assert self._server.stdin is not None
        self._server.stdin.close()
        try:
            self._server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self._server.pid, signal.SIGKILL)
            self._server.wait()

    def _read(self) -> None:
        assert self._server.stdout is not None
        for line in self._server.stdout:
            kind, *fields = line.split()
            with self._lock:
                if kind == "started":
                    self._started[fields[0]] = int(fields[1])
                    # A pid the system gave again: its last holder's status is not its.
                    self._exited.pop(int(fields[1]), None)
                elif kind == "exited":
                    self._exited[int(fields[0])] = int(fields[1])
                self._lock.notify_all()
        with self._lock:
            self._lock.notify_all()

    def start(self, plan: dict[str, Any], log: Path) -> int:
        """Forks a process running `plan` (see child.py), its output in `log`; its pid.

        The log's path names the request: unique among the processes of every run."""
        name = str(log)
        request = json.dumps({"name": name, "plan": plan, "log": name})
        assert self._server.stdin is not None
        with self._lock:
            self._server.stdin.write(request + "\n")
            self._server.stdin.flush()
            if not self._lock.wait_for(lambda: name in self._started or not self._serving(), 600):
                raise AssertionError(f"the fork server did not start {name}")
            if name not in self._started:
                raise AssertionError(f"the fork server ended (status {self._server.poll()})")
            return self._started[name]

    def _serving(self) -> bool:
        return self._server.poll() is None

    def wait(self, pid: int, timeout: float) -> int | None:
        """The exit status of `pid` (-9: SIGKILL), or None if it is still running."""
        with self._lock:
            self._lock.wait_for(lambda: pid in self._exited or not self._serving(), timeout)
            return self._exited.get(pid)


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


class Cluster:
    """The processes of one run; every one still running is killed by pid on exit."""

    def __init__(self, server: ForkServer, log_dir: Path) -> None:
        self._server, self._log_dir = server, log_dir
        self._log_dir.mkdir(parents=True, exist_ok=True)
        self._pids: dict[str, int] = {}

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        for name in list(self._pids):
            self.kill(name)

    def start(self, name: str, plan: dict[str, Any]) -> None:
        self._pids[name] = self._server.start(plan, self._log_dir / f"{name}.log")

    def pid(self, name: str) -> int:
        return self._pids[name]

    def wait(self, name: str, timeout: float) -> int:
        """Waits for the process to exit; fails with its log if it takes too long."""
        status = self._server.wait(self._pids[name], timeout)
        if status is None:
            log = (self._log_dir / f"{name}.log").read_text(errors="replace")
            raise AssertionError(
                f"{name} did not exit within {timeout} s; its log ends with:\n"
                + "\n".join(log.splitlines()[-40:])
            )
        return status

    def poll(self, name: str) -> int | None:
        """The exit status of the process, or None while it runs."""
        return self._server.wait(self._pids[name], 0)

    def kill(self, name: str) -> None:
        """SIGKILL (if still running), then wait until the server reaped it."""
        pid = self._pids.pop(name)
        if self._server.wait(pid, 0) is None:
            _kill(pid)
            self._server.wait(pid, 30)


def serve(run: Callable[[dict[str, Any]], None]) -> None:
    """The server's loop (in child.py, after its imports).

    A request per stdin line, one fork each, running `run(plan)`; prints
    `started NAME PID` and, once reaped, `exited PID STATUS`. Single-threaded,
    so that a fork copies no lock held by another thread. Ends when stdin
    closes, killing the processes still running. Stdin is read unbuffered:
    two requests that arrive together are both served at once (a buffered
    `readline` would keep the second in its buffer, unseen by `select`,
    until a third arrived).
    """
    import select

    running: set[int] = set()
    closed = False
    pending = b""
    while not closed or running:
        if not closed and select.select([sys.stdin], [], [], 0.05)[0]:
            chunk = os.read(sys.stdin.fileno(), 1 << 16)
            if not chunk:
                closed = True
                for pid in running:
                    _kill(pid)
                continue
            *lines, pending = (pending + chunk).split(b"\n")
            for line in lines:
                request = json.loads(line)
                pid = os.fork()
                if pid == 0:
                    log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
                    os.dup2(log, 1)
                    os.dup2(log, 2)
                    run(request["plan"])  # Ends the process.
                running.add(pid)
                print("started", request["name"], pid, flush=True)
        elif closed:
            time.sleep(0.05)
        while running:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            running.discard(pid)
            print("exited", pid, os.waitstatus_to_exitcode(status), flush=True)
