"""Bad schedules and directories fail at construction, before any step or file."""

from __future__ import annotations

import math
import re

import pytest
import tensorflow as tf
from checkpoint_testing import fresh_eager, fresh_graph

import monsession
from monsession_hooks_checkpoint import CheckpointSaverHook

# (argument, value, error, expected): each checked against the hook's message.
BAD_SCHEDULES = [
    ("save_steps", 0, ValueError, "a positive int number of steps"),
    ("save_steps", -1, ValueError, "a positive int number of steps"),
    ("save_steps", "10", TypeError, "a positive int number of steps"),
    ("save_steps", True, TypeError, "a positive int number of steps"),
    ("save_steps", 2.5, TypeError, "a positive int number of steps"),
    ("save_secs", 0, ValueError, "a positive number of seconds"),
    ("save_secs", -0.5, ValueError, "a positive number of seconds"),
    ("save_secs", "600", TypeError, "a positive number of seconds"),
    ("save_secs", False, TypeError, "a positive number of seconds"),
    ("save_secs", math.nan, ValueError, "a positive number of seconds"),
]


@pytest.mark.parametrize(("argument", "value", "error", "expected"), BAD_SCHEDULES)
def test_bad_schedule_names_the_hook_and_argument(tmp_path, argument, value, error, expected):
    pattern = (
        f"^CheckpointSaverHook: invalid {argument}={re.escape(repr(value))}( of type \\w+)?; "
        f"expected {expected}\\."
    )
    with pytest.raises(error, match=pattern):
        CheckpointSaverHook(str(tmp_path / "ckpt"), **{argument: value})
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("kwargs", "pattern"),
    [
        ({}, "exactly one of save_steps and save_secs must be given; got save_steps=None"),
        (
            {"save_steps": 1, "save_secs": 1},
            "exactly one of save_steps and save_secs must be given, not both",
        ),
    ],
)
def test_both_or_neither(tmp_path, kwargs, pattern):
    with pytest.raises(ValueError, match="^CheckpointSaverHook: " + pattern):
        CheckpointSaverHook(str(tmp_path), **kwargs)


@pytest.mark.parametrize("mode", ["graph", "eager"])
def test_file_as_checkpoint_dir_fails_at_construction(tmp_path, mode):
    path = tmp_path / "a-file"
    path.write_text("keep me")
    context = fresh_graph() if mode == "graph" else fresh_eager()
    with context:
        saver = None if mode == "graph" else tf.train.Checkpoint(x=tf.Variable(1.0))
        with pytest.raises(
            ValueError, match=f"^CheckpointSaverHook: checkpoint_dir {re.escape(repr(str(path)))}"
        ):
            CheckpointSaverHook(str(path), save_steps=1, saver=saver)
    assert path.read_text() == "keep me"


def test_unwritable_checkpoint_dir_fails_at_construction():
    # /proc/self is a directory where nobody, not even root, can create files.
    with pytest.raises(
        PermissionError,
        match=r"^CheckpointSaverHook: cannot create checkpoint_dir '/proc/self/ckpt': "
        r"cannot write to '/proc/self'",
    ):
        CheckpointSaverHook("/proc/self/ckpt", save_secs=60)


@pytest.mark.parametrize("mode", ["graph", "eager"])
def test_training_session_with_unwritable_checkpoint_dir_fails_before_any_step(mode):
    context = fresh_graph() if mode == "graph" else fresh_eager()
    with context:
        step = monsession.get_or_create_global_step()
        scaffold = (
            None if mode == "graph" else monsession.Scaffold(saver=tf.train.Checkpoint(step=step))
        )
        with pytest.raises(
            PermissionError,
            match=r"^CheckpointSaverHook: cannot write to checkpoint_dir '/proc/self'",
        ):
            monsession.MonitoredTrainingSession(
                checkpoint_dir="/proc/self",
                scaffold=scaffold,
                save_checkpoint_steps=10,
                save_summaries_steps=None,
                log_step_count_steps=None,
            )


@pytest.mark.parametrize(
    ("kwargs", "error", "pattern"),
    [
        (
            {"save_checkpoint_steps": -5},
            ValueError,
            "invalid save_checkpoint_steps=-5; expected None or 0",
        ),
        (
            {"save_checkpoint_secs": "600"},
            TypeError,
            "invalid save_checkpoint_secs='600' of type str; expected None or 0",
        ),
        (
            {"save_checkpoint_steps": 10, "save_checkpoint_secs": 60},
            ValueError,
            "give only one of save_checkpoint_steps and save_checkpoint_secs",
        ),
    ],
)
def test_training_session_schedule_with_the_family_installed(tmp_path, kwargs, error, pattern):
    with fresh_graph():
        monsession.get_or_create_global_step()
        with pytest.raises(error, match="^MonitoredTrainingSession: " + pattern):
            monsession.MonitoredTrainingSession(checkpoint_dir=str(tmp_path), **kwargs)
    assert list(tmp_path.iterdir()) == []


def test_training_session_zero_turns_checkpoints_off_as_in_tensorflow(tmp_path):
    with fresh_graph():
        train = tf.compat.v1.assign_add(monsession.get_or_create_global_step(), 1)
        with monsession.MonitoredTrainingSession(
            checkpoint_dir=str(tmp_path),
            save_checkpoint_secs=0,
            save_summaries_steps=None,
            log_step_count_steps=None,
        ) as sess:
            sess.run(train)
    assert tf.train.latest_checkpoint(str(tmp_path)) is None


@pytest.mark.parametrize(
    ("kwargs", "error", "pattern"),
    [
        ({"checkpoint_basename": None}, TypeError, r"checkpoint_basename must be a non-empty"),
        ({"checkpoint_basename": ""}, ValueError, r"checkpoint_basename must be a non-empty"),
        ({"scaffold": "scaffold"}, TypeError, r"scaffold must be a monsession\.Scaffold"),
        ({"scaffold": monsession.Scaffold}, TypeError, r"scaffold must be a monsession\.Scaffold"),
        ({"save_graph_def": "False"}, TypeError, r"save_graph_def must be a bool, got 'False'"),
        ({"async_save": "no"}, TypeError, r"async_save must be a bool, got 'no'"),
    ],
)
def test_other_arguments_of_the_wrong_type(tmp_path, kwargs, error, pattern):
    with fresh_graph():
        with pytest.raises(error, match="^CheckpointSaverHook: " + pattern):
            CheckpointSaverHook(str(tmp_path), save_steps=1, **kwargs)
    assert list(tmp_path.iterdir()) == []


def test_tensorflow_scaffold_and_numpy_flags_are_accepted(tmp_path):
    with fresh_graph():
        monsession.get_or_create_global_step()
        scaffold = tf.compat.v1.train.Scaffold()
        hook = CheckpointSaverHook(str(tmp_path), save_steps=1, scaffold=scaffold, save_graph_def=0)
        with monsession.SingularMonitoredSession(hooks=[hook], scaffold=scaffold):
            pass
    assert tf.train.latest_checkpoint(str(tmp_path)).endswith("model.ckpt-0")
