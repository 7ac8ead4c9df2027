"""Helpers for the multi-process tests: free loopback ports, child processes that
are always killed, hard time limits, and reading what the jobs left behind."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

EXAMPLE_DIR = Path(__file__).resolve().parent.parent
TRAIN_CLUSTER = EXAMPLE_DIR / "train_cluster.py"
TRAIN_MULTIWORKER = EXAMPLE_DIR / "train_multiworker.py"
LOOPBACK = "127.0.0.1"

# The waits of the multi-process tests, in seconds: generous for a loaded 2-core
# machine (each wait returns as soon as its condition holds). A test's hard limit
# is `within(...)` the waits it makes, so it never cuts a wait short.
START_SECS = 90  # processes start (import TensorFlow, join the job) and reach a first mark
TRAIN_SECS = 100  # a job trains to its target and exits
SIGNAL_EXIT_SECS = 30  # a signalled process stops after its step, saves and exits
PEER_EXIT_SECS = 30  # a process exits once the one it follows (the chief, the job's end) did
SURVIVOR_EXIT_SECS = 45  # the survivor of a dead peer fails and exits
LISTEN_SECS = 120  # every server of a cluster accepts connections
IN_PROCESS_SECS = 60  # the in-process jobs of one test (no wait of their own)
HARD_MARGIN_SECS = 30  # what runs between the waits: starting processes, reading files

# Ports are picked below the kernel's ephemeral range, which bind(0) and outgoing
# connections draw from, so nothing takes one by chance; a lock file per port
# (held until this process exits) keeps the tests of other processes off it. A
# port is thus reserved from the pick until the end of the test session: while a
# server starts and binds it, and when a server restarts on it.
_LOWEST_PORT = 20000
_PORT_LOCKS = os.path.join(tempfile.gettempdir(), "monsession-test-ports")
_held_ports: dict[int, int] = {}  # port: the descriptor holding its lock


def _ephemeral_low() -> int:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as ranges:
            return int(ranges.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default.


def _reserve(port: int) -> bool:
    """Takes the lock of `port` if no process holds it and nothing is bound to it."""
    os.makedirs(_PORT_LOCKS, exist_ok=True)
    descriptor = os.open(os.path.join(_PORT_LOCKS, str(port)), os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.bind((LOOPBACK, port))
    except OSError:
        os.close(descriptor)  # Releases the lock, if it was taken.
        return False
    _held_ports[port] = descriptor
    return True


def reserved_elsewhere(port: int) -> bool:
    """Whether another process holds the reservation of `port` (for the helpers' tests)."""
    descriptor = os.open(os.path.join(_PORT_LOCKS, str(port)), os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(descriptor)
    return False


def free_ports(count: int) -> list[int]:
    """`count` distinct free TCP ports on 127.0.0.1, reserved for this process.

    Each is free when picked, outside the kernel's ephemeral range and locked
    against the other test processes until this one exits: no other process
    takes it before the server meant for it binds it, nor while a server
    restarts on it (see `_PORT_LOCKS`).

    Raises:
      RuntimeError: If no `count` free ports are found.
    """
    picker = random.Random()  # Seeded from the OS: processes try different ports.
    candidates = range(_LOWEST_PORT, _ephemeral_low())
    ports: list[int] = []
    for port in picker.sample(candidates, min(len(candidates), 50 * count)):
        if port not in _held_ports and _reserve(port):
            ports.append(port)
            if len(ports) == count:
                return ports
    raise RuntimeError(f"found only {len(ports)} of {count} free ports in {candidates}")


def addresses(ports: list[int]) -> list[str]:
    return [f"{LOOPBACK}:{port}" for port in ports]


def accepts_connections(address: str) -> bool:
    """Whether a server listens at `address` (``host:port``) now."""
    host, port = address.rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=1):
            return True
    except OSError:
        return False


def tf_config(workers: list[str], index: int) -> str:
    """A ``TF_CONFIG`` for `MultiWorkerMirroredStrategy`: workers only, worker 0 is chief."""
    return json.dumps({"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}})


def within(*waits: float) -> contextlib.AbstractContextManager[None]:
    """`hard_timeout` of the sum of `waits` (the timeouts of the waits a test makes, one
    after the other) plus `HARD_MARGIN_SECS`."""
    return hard_timeout(sum(waits) + HARD_MARGIN_SECS)


@contextlib.contextmanager
def hard_timeout(seconds: float) -> Iterator[None]:
    """Raises `TimeoutError` in the main thread once `seconds` have passed."""

    def expire(signum: int, frame: Any) -> None:
        raise TimeoutError(f"the test did not finish within {seconds} seconds")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


class Processes:
    """Child processes of one test; every one still running is killed on exit.

    Each child's output goes to ``<log_dir>/<name>.log``, shown when a wait
    fails. Use as a context manager.
    """

    def __init__(self, log_dir: Path) -> None:
        self._log_dir = log_dir
        self._log_dir.mkdir(parents=True, exist_ok=True)
        self._children: dict[str, subprocess.Popen[bytes]] = {}

    def __enter__(self) -> Processes:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        for name in list(self._children):
            self.kill(name)

    def start(self, name: str, script: Path, args: list[str], env: dict[str, str]) -> None:
        child_env = {
            **os.environ,
            "TF_CPP_MIN_LOG_LEVEL": "2",
            "PYTHONUNBUFFERED": "1",
            **env,
        }
        with open(self.log(name), "ab") as log:
            self._children[name] = subprocess.Popen(
                [sys.executable, str(script), *args],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=child_env,
                cwd=str(EXAMPLE_DIR),
            )

    def log(self, name: str) -> Path:
        return self._log_dir / f"{name}.log"

    def pid(self, name: str) -> int:
        return self._children[name].pid

    def alive(self, name: str) -> bool:
        return self._children[name].poll() is None

    def wait(self, name: str, timeout: float) -> int:
        """Waits for the child to exit; fails with its log if it takes too long."""
        try:
            return self._children[name].wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"{name} did not exit within {timeout} s; its log ends with:\n{self.tail(name)}"
            ) from None

    def wait_ok(self, name: str, timeout: float) -> None:
        code = self.wait(name, timeout)
        assert code == 0, f"{name} exited with {code}; its log ends with:\n{self.tail(name)}"

    def wait_all_ok(self, names: list[str], timeout: float) -> None:
        """`wait_ok` for each child, all within one `timeout` (they run together)."""
        deadline = time.monotonic() + timeout
        for name in names:
            self.wait_ok(name, max(0.0, deadline - time.monotonic()))

    def kill(self, name: str) -> None:
        """SIGKILL, then reap (no zombie left behind)."""
        child = self._children.pop(name)
        if child.poll() is None:
            child.kill()
        child.wait()

    def tail(self, name: str, lines: int = 40) -> str:
        text = self.log(name).read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])


def wait_for(condition: Callable[[], Any], timeout: float, what: str) -> Any:
    """Polls `condition` until it returns something true; fails after `timeout`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def read_report(path: Path) -> dict[str, Any]:
    with open(path) as file:
        report: dict[str, Any] = json.load(file)
    return report


_LATEST = re.compile(r'^model_checkpoint_path: "(?P<path>[^"]*)"', re.MULTILINE)


def latest_checkpoint_step(directory: Path) -> int | None:
    """The step of the latest checkpoint in `directory`'s state file, without TensorFlow."""
    try:
        text = (directory / "checkpoint").read_text()
    except FileNotFoundError:
        return None
    match = _LATEST.search(text)
    return int(match.group("path").rsplit("-", 1)[1]) if match else None


def files_under(directory: Path) -> list[str]:
    """Every file and directory under `directory`, as sorted relative paths."""
    return sorted(str(path.relative_to(directory)) for path in directory.rglob("*"))


def event_files(directory: Path) -> list[Path]:
    return sorted(directory.rglob("events.out.tfevents.*"))


def summary_tags(event_file: Path) -> dict[str, list[int]]:
    """The steps of each tag in an event file, read with TensorBoard's reader."""
    from tensorboard.backend.event_processing import event_accumulator

    accumulator = event_accumulator.EventAccumulator(
        str(event_file), size_guidance={event_accumulator.TENSORS: 0, event_accumulator.SCALARS: 0}
    )
    accumulator.Reload()
    tags: dict[str, list[int]] = {}
    for tag in accumulator.Tags()["tensors"]:
        tags[tag] = [event.step for event in accumulator.Tensors(tag)]
    for tag in accumulator.Tags()["scalars"]:
        tags[tag] = [event.step for event in accumulator.Scalars(tag)]
    return tags


def worker_temp_dirs(tmpdir: Path) -> list[str]:
    """The worker checkpoint directories monsession left in a temporary directory."""
    return sorted(path.name for path in tmpdir.glob("monsession-worker-checkpoint-*"))


def two_logical_cpus() -> list[str]:
    """The names of 2 logical CPU devices of this process (configured on first use)."""
    import tensorflow as tf

    (cpu,) = tf.config.list_physical_devices("CPU")
    try:
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * 2
        )
    except RuntimeError:  # Devices already initialized in this process.
        pass
    devices = [device.name for device in tf.config.list_logical_devices("CPU")]
    assert len(devices) == 2, f"need 2 logical CPUs, this process has {devices}"
    return devices
