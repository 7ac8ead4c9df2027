"""Helpers for testing hooks, for hook-package authors.

    import monsession.testing

    with tf.compat.v1.Session() as sess:
        hooked = monsession.testing.hooked_session(sess, [MyHook()])
        hooked.run(train_op)

    with monsession.testing.count_host_reads() as reads:
        sess.run(step)
    assert reads.count == 0  # No hook needed a value on this step.

    record = monsession.testing.closure_record(coordinator).snapshot()
    assert record.ran.get(1)  # ParameterServerStrategy: worker 1 ran closures.

The same harness TensorFlow's own hook tests use (a hooked session without
the monitored session's creation, recovery and close), made public so that
families need no private API of core.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator
from typing import IO, TYPE_CHECKING

from monsession._api._hook_api import SessionRunHook
from monsession._attributes import lazy_attributes

__all__ = [
    "ClosureRecord",
    "HostReads",
    "SignalRun",
    "closure_record",
    "count_host_reads",
    "global_step_read_tensor",
    "hooked_session",
    "run_signal_phases",
    "signal_for",
]

if TYPE_CHECKING:
    import tensorflow as tf

    from monsession._backends._eager import ClosureRecord, EagerSession, closure_record
    from monsession._session._hooked_session import _HookedSession


__getattr__, __dir__ = lazy_attributes(
    __name__, dict.fromkeys(("ClosureRecord", "closure_record"), "monsession._backends._eager")
)


def hooked_session(
    session: tf.compat.v1.Session | EagerSession, hooks: Iterable[SessionRunHook]
) -> _HookedSession:
    """Wraps `session` so that every `run()` calls the hooks around it.

    Each `run()` calls `before_run()`, one merged step and `after_run()` of
    `hooks`, as inside a `MonitoredSession`, with the step service. Call
    `begin()`, `after_create_session()` and `end()` yourself.

    Args:
      session: A `tf.compat.v1.Session` (graph mode) or a
        `monsession.EagerSession` (eager mode).
      hooks: The hooks, called in order.

    Returns:
      An object with `run(fetches, feed_dict=None, options=None,
      run_metadata=None)` and `should_stop()`.
    """
    from monsession._session._hooked_session import _HookedSession

    return _HookedSession(session, list(hooks))


def global_step_read_tensor(graph: tf.Graph | None = None) -> tf.Tensor | None:
    """TensorFlow's shared read tensor of the global step (graph mode), created if needed.

    What TensorFlow's hooks, and the step service once a hook asks, fetch with
    a step. TensorFlow runs the read and the step's increment in no fixed
    order; side-by-side tests order the increment after the read:

        read = monsession.testing.global_step_read_tensor()
        with tf.control_dependencies([read]):
            train_op = optimizer.minimize(loss, global_step=global_step)

    Args:
      graph: The graph; the default graph if `None`.

    Returns:
      The read tensor, or `None` when the graph has no global step.
    """
    from monsession._tf_compat import global_step_read_tensor as read_tensor

    return read_tensor(graph)


@dataclasses.dataclass
class HostReads:
    """How many eager tensors were copied to the host in a `count_host_reads` block."""

    count: int = 0


_counting_lock = threading.Lock()


@contextlib.contextmanager
def count_host_reads() -> Iterator[HostReads]:
    """Counts the device-to-host copies of eager tensors made in the block.

    Every Python-level read of an eager tensor or variable (`numpy()`, `int()`, formatting...)
    counts, whoever makes it. On a GPU each one makes Python wait for the device: a hook with
    nothing to do on a step should cause none. Blocks do not nest.

    Yields:
      A `HostReads` whose `count` grows as reads happen.
    """
    from monsession._tf_compat import host_copies_counted

    reads = HostReads()

    def count() -> None:
        reads.count += 1

    with _counting_lock, host_copies_counted(count):
        yield reads


@dataclasses.dataclass
class SignalRun:
    """What a child printed, how it ended, and how long each phase took to stop."""

    returncode: int
    lines: list[str]
    stderr: str
    stop_secs: dict[str, float]  # From the signal to DONE (or to the exit, last phase).

    def tagged(self, tag: str, phase: str) -> list[str]:
        """The words after ``<tag> <phase>`` of every such line."""
        return [
            " ".join(line.split()[2:]) for line in self.lines if line.split()[:2] == [tag, phase]
        ]

    def steps(self, tag: str, phase: str) -> list[int]:
        """The numbers after ``<tag> <phase>`` of every such line."""
        return [int(words) for words in self.tagged(tag, phase)]

    def last_step(self, phase: str) -> int:
        """How many steps the phase ran."""
        return self.steps("RAN", phase)[-1]

    def index(self, tag: str, phase: str) -> int:
        """The index in `lines` of the first ``<tag> <phase>`` line."""
        return next(i for i, line in enumerate(self.lines) if line.split()[:2] == [tag, phase])


def signal_for(phase: str) -> int:
    """The signal that ends `phase`: SIGINT for ``<n>-sigint...`` phases, else SIGTERM."""
    return signal.SIGINT if phase.split("-", 1)[1].startswith("sigint") else signal.SIGTERM


def run_signal_phases(child: str, phases: list[str], *args: str, timeout: float = 300) -> SignalRun:
    """Runs a training script in a subprocess and stops each of its phases with a real signal.

    For testing what a hook does on preemption (SIGTERM) or Ctrl-C (SIGINT).
    The child, `python child *args *phases`, runs the phases in order and
    prints ``READY <phase>`` when a phase wants its signal (SIGINT for a phase
    named ``<n>-sigint...``, else SIGTERM), ``DONE <phase>`` when it stopped,
    and anything else the test reads back (e.g. ``RAN <phase> <step>``).

    Args:
      child: The path of the script.
      phases: The phase names, passed to the child as arguments.
      *args: Arguments before the phases.
      timeout: Seconds after which the child is killed.

    Returns:
      A `SignalRun` with the child's lines, stderr, exit status and, per
      phase, the seconds from the signal to ``DONE`` (or to the exit).
    """
    with tempfile.TemporaryFile("w+") as stderr:
        process = subprocess.Popen(
            [sys.executable, child, *args, *phases],
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"},
        )
        stdout = process.stdout
        assert stdout is not None
        watchdog = threading.Timer(timeout, process.kill)
        watchdog.start()
        try:
            lines, stop_secs = _signal_each_phase(process, stdout, phases[-1])
        finally:
            watchdog.cancel()
            if process.poll() is None:
                process.kill()
                process.wait()
            stdout.close()
        stderr.seek(0)
        run = SignalRun(process.returncode, lines, stderr.read(), stop_secs)
    for phase, secs in stop_secs.items():
        name = signal.Signals(signal_for(phase)).name
        print(f"{phase}: {name} to the end of the phase: {secs:.2f} s")
    return run


def _signal_each_phase(
    process: subprocess.Popen[str], stdout: IO[str], last_phase: str
) -> tuple[list[str], dict[str, float]]:
    """Reads the child's lines until it exits, signalling each phase that is ``READY``;
    returns them, and per phase the seconds from its signal to ``DONE`` (or the exit)."""
    lines: list[str] = []
    sent: dict[str, float] = {}
    stop_secs: dict[str, float] = {}
    for line in iter(stdout.readline, ""):
        now = time.monotonic()
        lines.append(line.strip())
        tag, *rest = line.split() or [""]
        if tag == "READY":
            process.send_signal(signal_for(rest[0]))
            sent[rest[0]] = now
        elif tag == "DONE" and rest[0] in sent:
            stop_secs[rest[0]] = now - sent[rest[0]]
    process.wait()
    if last_phase in sent and last_phase not in stop_secs:
        stop_secs[last_phase] = time.monotonic() - sent[last_phase]
    return lines, stop_secs
