"""A bad checkpoint_dir fails when the hook is constructed, naming the directory."""

from __future__ import annotations

import os

import pytest
import tensorflow as tf
from checkpoint_testing import fresh_eager

import monsession
from monsession_hooks_checkpoint import CheckpointSaverHook


def _graph_session(checkpoint_dir):
    with tf.Graph().as_default():
        train_op = tf.compat.v1.assign_add(monsession.get_or_create_global_step(), 1)
        hook = CheckpointSaverHook(checkpoint_dir, save_steps=1)
        with monsession.MonitoredSession(hooks=[hook]) as sess:
            sess.run(train_op)


def _eager_session(checkpoint_dir):
    with fresh_eager():
        checkpoint = tf.train.Checkpoint(step=monsession.get_or_create_global_step())
        hook = CheckpointSaverHook(checkpoint_dir, save_steps=1, saver=checkpoint)
        with monsession.MonitoredSession(hooks=[hook]):
            pass


@pytest.mark.parametrize("run", [_graph_session, _eager_session], ids=["graph", "eager"])
def test_file_path_fails_at_session_creation(tmp_path, run):
    path = tmp_path / "not-a-dir"
    path.write_text("x")
    with pytest.raises(ValueError, match=r"checkpoint_dir '.*not-a-dir' is a file"):
        run(str(path))
    with pytest.raises(ValueError, match=r"checkpoint_dir '.*not-a-dir/sub' lies under the file"):
        run(str(path / "sub"))


@pytest.mark.parametrize("run", [_graph_session, _eager_session], ids=["graph", "eager"])
def test_unwritable_directory_fails_at_session_creation(run):
    # /proc/self is a directory where nobody, not even root, can create files.
    with pytest.raises(PermissionError, match=r"cannot write to checkpoint_dir '/proc/self'"):
        run("/proc/self")
    with pytest.raises(PermissionError, match=r"cannot create checkpoint_dir '/proc/self/ckpt'"):
        run("/proc/self/ckpt")


def test_missing_directory_is_created(tmp_path):
    target = tmp_path / "a" / "b"
    _graph_session(str(target))
    assert tf.train.latest_checkpoint(str(target)) == os.path.join(str(target), "model.ckpt-1")


def test_pathlike_directory_is_accepted(tmp_path):
    _graph_session(tmp_path)
    assert tf.train.latest_checkpoint(str(tmp_path)).endswith("model.ckpt-1")
    with pytest.raises(TypeError, match="checkpoint_dir must be a directory path"):
        CheckpointSaverHook(None, save_steps=1)
