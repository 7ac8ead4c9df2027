"""The checkpoint family is the one owner of the lock of `checkpoint_dir`.

`CheckpointSaverHook` takes it (for `MonitoredTrainingSession` as the family
builds the hook, before any hook's `begin()`) and gives it back when the
session closes, cleanly or failing; core takes none. Checked in this process,
while it still runs (the lock also goes when a process exits, which would hide
a lock that was never released), against a second process that holds it.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import subprocess
import sys

import pytest
import tensorflow as tf
from checkpoint_testing import ONLY_CHECKPOINTS, counter_program, fresh_eager, fresh_graph

import monsession
from monsession_hooks_checkpoint import CheckpointSaverHook, CheckpointSaverListener

LOCK = ".monsession.lock"


class InBlockError(Exception):
    pass


class BeginRecorder(monsession.SessionRunHook):
    def __init__(self):
        self.begun = False

    def begin(self):
        self.begun = True


class FailingHook(monsession.SessionRunHook):
    def __init__(self, method):
        self.method = method

    def begin(self):
        if self.method == "begin":
            raise InBlockError("begin")

    def after_create_session(self, session, coord):
        if self.method == "after_create_session":
            raise InBlockError("after_create_session")


def _holder_of(path):
    return json.loads((path / LOCK).read_text())["pid"]


def _session(kind, directory, hooks=(), **kwargs):
    """A chief's session saving every 2 steps (graph mode: the default graph's program)."""
    if kind == "mts":
        return monsession.MonitoredTrainingSession(
            checkpoint_dir=str(directory),
            save_checkpoint_steps=2,
            hooks=list(hooks),
            **ONLY_CHECKPOINTS,
            **kwargs,
        )
    saver = CheckpointSaverHook(str(directory), save_steps=2, **kwargs)
    return monsession.MonitoredSession(hooks=[saver, *hooks])


@pytest.mark.parametrize("kind", ["mts", "ms"])
@pytest.mark.parametrize("fail", [False, True], ids=["clean", "failing"])
def test_lock_held_while_open_and_released_when_the_session_closes(tmp_path, kind, fail):
    with fresh_graph():
        _, train_op, _ = counter_program()
        with pytest.raises(InBlockError) if fail else contextlib.nullcontext():
            with _session(kind, tmp_path) as session:
                assert _holder_of(tmp_path) == os.getpid()
                session.run(train_op)
                if fail:
                    raise InBlockError("in the with block")
    assert not (tmp_path / LOCK).exists()


def test_eager_training_session_releases_the_lock_when_it_closes(tmp_path):
    with fresh_eager():
        step = monsession.get_or_create_global_step()
        scaffold = monsession.Scaffold(saver=tf.train.Checkpoint(step=step))
        with _session("mts", tmp_path, scaffold=scaffold) as session:
            assert _holder_of(tmp_path) == os.getpid()
            session.run(tf.function(lambda: step.assign_add(1)))
    assert not (tmp_path / LOCK).exists()


@pytest.mark.parametrize("method", ["begin", "after_create_session"])
def test_a_session_that_fails_to_start_gives_the_lock_back(tmp_path, method):
    """Its hooks never see `end()`: the saver's share goes with the dropped hook.

    `begin`: a chief-only hook fails before the saver's `begin()` (the family
    locked as it built the saver). `after_create_session`: after it.
    """
    with fresh_graph():
        counter_program()
        with pytest.raises(InBlockError):
            _session("mts", tmp_path, chief_only_hooks=[FailingHook(method)])
    gc.collect()
    assert not (tmp_path / LOCK).exists()


def test_nothing_saved_nothing_locked(tmp_path):
    """Eager mode without state to save: the family adds no saver, so nobody locks.

    (Core used to lock whenever the checkpoint family was installed.)
    """
    with fresh_eager():
        monsession.get_or_create_global_step()
        with monsession.MonitoredTrainingSession(
            checkpoint_dir=str(tmp_path), **ONLY_CHECKPOINTS
        ) as session:
            assert not any(isinstance(hook, CheckpointSaverHook) for hook in session._hooks)
            assert not (tmp_path / LOCK).exists()


def test_a_failed_begin_gives_the_lock_back(tmp_path):
    class FailingListener(CheckpointSaverListener):
        def begin(self):
            raise InBlockError("listener")

    with fresh_graph():
        counter_program()
        saver = CheckpointSaverHook(str(tmp_path), save_steps=2, listeners=[FailingListener()])
        with pytest.raises(InBlockError):
            monsession.MonitoredSession(hooks=[saver])
    assert not (tmp_path / LOCK).exists()


@pytest.fixture
def other_process(tmp_path):
    """A live process holding the lock of `tmp_path` until the test ends."""
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, monsession; monsession.plugins.lock_checkpoint_dir(sys.argv[1]); "
            "print('HELD', flush=True); sys.stdin.readline()",
            str(tmp_path),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "HELD", holder.stderr.read()
        yield holder
    finally:
        holder.stdin.close()
        holder.wait(timeout=60)


@pytest.mark.parametrize("kind", ["mts", "ms"])
def test_second_chief_fails_before_any_hook_begins(tmp_path, other_process, kind):
    """For `MonitoredTrainingSession`, before even the chief-only hooks' `begin()`.

    With a plain `MonitoredSession` the hooks begin in the user's order, so
    the saver comes first here.
    """
    recorder = BeginRecorder()
    before = sorted(os.listdir(tmp_path))
    with fresh_graph():
        counter_program()
        with pytest.raises(monsession.plugins.DirectoryLockedError) as raised:
            if kind == "mts":
                _session(kind, tmp_path, chief_only_hooks=[recorder])
            else:
                _session(kind, tmp_path, hooks=[recorder])
    assert f"process {other_process.pid} on host" in str(raised.value)
    assert not recorder.begun
    assert sorted(os.listdir(tmp_path)) == before == [LOCK]
    assert _holder_of(tmp_path) == other_process.pid
