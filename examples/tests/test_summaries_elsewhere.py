"""Summaries in another directory than the checkpoints: each directory gets TensorFlow's events.

A public ResNet program passes `save_summaries_steps=0` and its own
`SummarySaverHook(output_dir=<other dir>)` as a chief-only hook. The
checkpoint directory then holds the step counter's rates and the
checkpoint saver's events, and no `SessionLog.START` (TensorFlow writes
none there); the summary directory holds one START per process, at its
first step. Compared side by side with `tf.compat.v1.train`, fresh and on
resume, and in eager mode with what the docs promise.
"""

from __future__ import annotations

import glob
import os
import subprocess
import sys

import tensorflow as tf
from tensorboard.backend.event_processing import event_file_loader

_CHILD = os.path.join(os.path.dirname(__file__), "summaries_elsewhere_child.py")
_START = tf.compat.v1.SessionLog.START


def _train(root: str, last_step: int) -> None:
    subprocess.run(
        [sys.executable, _CHILD, root, str(last_step)], check=True, timeout=300, cwd=root
    )


def _events(directory: str) -> tuple[set[str], list[int]]:
    """The kinds of event in `directory` (summaries by tag, session logs by status), and the
    steps of its `SessionLog.START`s."""
    kinds: set[str] = set()
    starts: list[int] = []
    for path in sorted(glob.glob(os.path.join(directory, "events.*"))):
        for event in event_file_loader.LegacyEventFileLoader(path).Load():
            kind = event.WhichOneof("what")
            if kind == "summary":
                kinds.update(f"summary {value.tag}" for value in event.summary.value)
            elif kind == "session_log":
                kinds.add(f"session_log {event.session_log.status}")
                if event.session_log.status == _START:
                    starts.append(event.step)
            else:
                kinds.add(kind)
    return kinds, starts


def test_each_directory_gets_the_events_tensorflow_writes_there(tmp_path):
    seen = {}
    for phase, last_step in (("fresh", 5), ("resume", 9)):
        _train(str(tmp_path), last_step)
        seen[phase] = {
            (run, folder): _events(str(tmp_path / run / folder))
            for run in ("tf", "ms-graph", "ms-eager")
            for folder in ("ckpt", "summaries")
        }
    for phase, runs in seen.items():
        for folder in ("ckpt", "summaries"):
            assert runs[("ms-graph", folder)] == runs[("tf", folder)], (phase, folder)
        assert "summary global_step/sec" in runs[("tf", "ckpt")][0], phase
        assert runs[("tf", "ckpt")][1] == runs[("ms-eager", "ckpt")][1] == [], phase
    # One START per process in the summary directory, at its first step.
    for run in ("tf", "ms-graph", "ms-eager"):
        assert seen["resume"][(run, "summaries")][1] == [1, 6], run
