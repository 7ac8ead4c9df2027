"""The one-chief lock of a checkpoint directory, as plugin authors use it."""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys

import pytest

import monsession

LOCK = ".monsession.lock"


def test_handles_of_one_process_share_the_lock(tmp_path):
    first = monsession.plugins.lock_checkpoint_dir(tmp_path / "train")
    assert isinstance(first, monsession.plugins.DirectoryLockHandle)
    holder = json.loads((tmp_path / "train" / LOCK).read_text())
    assert holder["pid"] == os.getpid()
    second = monsession.plugins.lock_checkpoint_dir(str(tmp_path / "train" / ".." / "train"))
    assert second is not None and second.held
    assert json.loads((tmp_path / "train" / LOCK).read_text()) == holder  # Not re-created.
    first.release()
    first.release()  # A second release of one handle gives nothing back twice.
    assert not first.held
    assert (tmp_path / "train" / LOCK).exists()
    second.release()
    assert not (tmp_path / "train" / LOCK).exists()


def test_a_live_process_holds_it(tmp_path):
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE
    )
    try:
        (tmp_path / LOCK).write_text(json.dumps({"pid": holder.pid, "host": socket.gethostname()}))
        with pytest.raises(
            monsession.plugins.DirectoryLockedError,
            match=rf"checkpoint_dir '{tmp_path}' is in use by another training session: "
            rf"process {holder.pid} on host",
        ):
            monsession.plugins.lock_checkpoint_dir(tmp_path)
    finally:
        holder.communicate(b"")
    assert json.loads((tmp_path / LOCK).read_text())["pid"] == holder.pid  # Left alone.


def test_a_dead_process_lock_is_taken_over_with_a_warning(tmp_path, caplog):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (tmp_path / LOCK).write_text(json.dumps({"pid": dead.pid, "host": socket.gethostname()}))
    with caplog.at_level(logging.WARNING, logger="monsession"):
        handle = monsession.plugins.lock_checkpoint_dir(tmp_path)
    assert f"Taking over the lock {tmp_path / LOCK} of process {dead.pid}" in caplog.text
    assert json.loads((tmp_path / LOCK).read_text())["pid"] == os.getpid()
    handle.release()
    assert not (tmp_path / LOCK).exists()


def test_remote_directories_are_not_locked():
    assert monsession.plugins.lock_checkpoint_dir("gs://bucket/train") is None


def test_the_lock_goes_when_the_process_exits(tmp_path):
    """A session whose creation failed never releases its handle: exiting does."""
    child = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, monsession; h = monsession.plugins.lock_checkpoint_dir(sys.argv[1]); "
            "print(h.path, flush=True)",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert child.returncode == 0, child.stderr
    assert child.stdout.strip() == str(tmp_path / LOCK)
    assert not (tmp_path / LOCK).exists()
