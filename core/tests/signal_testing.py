"""Runs signal_child.py-style children: phases of training, each ended by a real signal."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time


@dataclasses.dataclass
class Run:
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
        return [int(words) for words in self.tagged(tag, phase)]

    def last_step(self, phase: str) -> int:
        """How many steps the phase ran."""
        return self.steps("RAN", phase)[-1]

    def index(self, tag: str, phase: str) -> int:
        return next(i for i, line in enumerate(self.lines) if line.split()[:2] == [tag, phase])


def signal_for(phase: str) -> int:
    return signal.SIGINT if phase.split("-", 1)[1].startswith("sigint") else signal.SIGTERM


def run_phases(child: str, phases: list[str], *args: str, timeout: float = 300) -> Run:
    """Runs `child` through `phases`, sending each its signal once it printed READY."""
    with tempfile.TemporaryFile("w+") as stderr:
        process = subprocess.Popen(
            [sys.executable, child, *args, *phases],
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"},
        )
        watchdog = threading.Timer(timeout, process.kill)
        watchdog.start()
        lines: list[str] = []
        sent: dict[str, float] = {}
        stop_secs: dict[str, float] = {}
        try:
            for line in iter(process.stdout.readline, ""):
                now = time.monotonic()
                lines.append(line.strip())
                tag, *rest = line.split() or [""]
                if tag == "READY":
                    process.send_signal(signal_for(rest[0]))
                    sent[rest[0]] = now
                elif tag == "DONE" and rest[0] in sent:
                    stop_secs[rest[0]] = now - sent[rest[0]]
            process.wait()
            if phases[-1] in sent and phases[-1] not in stop_secs:
                stop_secs[phases[-1]] = time.monotonic() - sent[phases[-1]]
        finally:
            watchdog.cancel()
            if process.poll() is None:
                process.kill()
                process.wait()
            process.stdout.close()
        stderr.seek(0)
        run = Run(process.returncode, lines, stderr.read(), stop_secs)
    for phase, secs in stop_secs.items():
        name = signal.Signals(signal_for(phase)).name
        print(f"{phase}: {name} to the end of the phase: {secs:.2f} s")
    return run
