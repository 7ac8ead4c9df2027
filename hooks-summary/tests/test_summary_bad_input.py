"""Bad schedules and directories fail at construction, naming the hook and the argument."""

from __future__ import annotations

import math
import re

import pytest
import tensorflow as tf

import monsession
from monsession_hooks_summary import StepCounterHook, SummarySaverHook

# Each hook with its steps and seconds arguments and what it needs besides.
HOOKS = [
    pytest.param(SummarySaverHook, "save_steps", "save_secs", {"summary_op": "op"}, id="saver"),
    pytest.param(StepCounterHook, "every_n_steps", "every_n_secs", {}, id="counter"),
]

BAD_VALUES = [
    ("steps", 0, ValueError, "a positive int number of steps"),
    ("steps", -2, ValueError, "a positive int number of steps"),
    ("steps", "100", TypeError, "a positive int number of steps"),
    ("steps", True, TypeError, "a positive int number of steps"),
    ("steps", 1.5, TypeError, "a positive int number of steps"),
    ("secs", 0, ValueError, "a positive number of seconds"),
    ("secs", -1.0, ValueError, "a positive number of seconds"),
    ("secs", "30", TypeError, "a positive number of seconds"),
    ("secs", False, TypeError, "a positive number of seconds"),
    ("secs", math.nan, ValueError, "a positive number of seconds"),
]


@pytest.mark.parametrize(("hook", "steps_name", "secs_name", "extra"), HOOKS)
@pytest.mark.parametrize(("unit", "value", "error", "expected"), BAD_VALUES)
def test_bad_schedule_value(
    tmp_path, hook, steps_name, secs_name, extra, unit, value, error, expected
):
    name = steps_name if unit == "steps" else secs_name
    other = {secs_name: None} if unit == "steps" else {steps_name: None}
    pattern = (
        f"^{hook.__name__}: invalid {name}={re.escape(repr(value))}( of type \\w+)?; "
        f"expected {expected}\\."
    )
    with pytest.raises(error, match=pattern):
        hook(**{name: value}, **other, output_dir=str(tmp_path), **extra)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("hook", "steps_name", "secs_name", "extra"), HOOKS)
def test_both_or_neither(tmp_path, hook, steps_name, secs_name, extra):
    with pytest.raises(
        ValueError, match=f"^{hook.__name__}: exactly one of {steps_name} and {secs_name} must"
    ):
        hook(**{steps_name: None, secs_name: None}, output_dir=str(tmp_path), **extra)
    with pytest.raises(ValueError, match="must be given, not both"):
        hook(**{steps_name: 1, secs_name: 1}, output_dir=str(tmp_path), **extra)


@pytest.mark.parametrize(("hook", "steps_name", "secs_name", "extra"), HOOKS)
def test_output_dir_that_is_a_file_or_unwritable(tmp_path, hook, steps_name, secs_name, extra):
    path = tmp_path / "a-file"
    path.write_text("keep me")
    with pytest.raises(
        ValueError, match=f"^{hook.__name__}: output_dir {re.escape(repr(str(path)))} is a file"
    ):
        hook(**{steps_name: 1}, output_dir=str(path), **extra)
    with pytest.raises(
        PermissionError, match=f"^{hook.__name__}: cannot write to output_dir '/proc/self'"
    ):
        hook(**{steps_name: 1}, output_dir="/proc/self", **extra)
    assert path.read_text() == "keep me"


@pytest.mark.parametrize(
    ("kwargs", "error", "pattern"),
    [
        (
            {"save_summaries_steps": -1},
            ValueError,
            "invalid save_summaries_steps=-1; expected None or 0",
        ),
        (
            {"save_summaries_secs": "5"},
            TypeError,
            "invalid save_summaries_secs='5' of type str; expected None or 0",
        ),
        (
            {"log_step_count_steps": True},
            TypeError,
            "invalid log_step_count_steps=True of type bool; expected None or 0",
        ),
        (
            {"save_summaries_steps": 10, "save_summaries_secs": 5},
            ValueError,
            "give only one of save_summaries_steps and save_summaries_secs",
        ),
    ],
)
def test_training_session_schedules(tmp_path, kwargs, error, pattern):
    with tf.Graph().as_default():
        monsession.get_or_create_global_step()
        with pytest.raises(error, match="^MonitoredTrainingSession: " + pattern):
            monsession.MonitoredTrainingSession(
                checkpoint_dir=str(tmp_path), save_checkpoint_secs=None, **kwargs
            )
    assert list(tmp_path.iterdir()) == []


def test_training_session_unwritable_summary_dir_fails_before_any_step(tmp_path):
    with tf.Graph().as_default():
        monsession.get_or_create_global_step()
        with pytest.raises(
            PermissionError, match=r"^StepCounterHook: cannot write to output_dir '/proc/self'"
        ):
            monsession.MonitoredTrainingSession(
                checkpoint_dir=str(tmp_path), summary_dir="/proc/self", save_checkpoint_secs=None
            )


def test_training_session_zero_turns_summaries_off_as_in_tensorflow(tmp_path):
    with tf.Graph().as_default():
        train = tf.compat.v1.assign_add(monsession.get_or_create_global_step(), 1)
        with monsession.MonitoredTrainingSession(
            checkpoint_dir=str(tmp_path),
            save_checkpoint_secs=None,
            save_summaries_steps=0,
            log_step_count_steps=0,
        ) as sess:
            sess.run(train)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("writer", ["logs", 3, tf.summary.SummaryWriter])
@pytest.mark.parametrize(("hook", "steps_name", "secs_name", "extra"), HOOKS)
def test_summary_writer_of_the_wrong_type(hook, steps_name, secs_name, extra, writer):
    with tf.Graph().as_default():
        with pytest.raises(
            TypeError,
            match=f"^{hook.__name__}: summary_writer must be a tf.compat.v1.summary.FileWriter "
            r"\(graph mode\) or a tf.summary.SummaryWriter \(eager mode\), or None; got ",
        ):
            hook(**{steps_name: 1}, summary_writer=writer, **extra)


@pytest.mark.parametrize(
    ("kwargs", "pattern"),
    [
        ({"scaffold": "scaffold"}, r"scaffold must be a monsession\.Scaffold \(or None\)"),
        ({"summary_op": 3}, r"summary_op must be a string Tensor .*; it holds 3 of type int"),
        ({"summary_op": [None]}, r"summary_op must be .*; it holds None of type NoneType"),
    ],
)
def test_summary_source_of_the_wrong_type(tmp_path, kwargs, pattern):
    with tf.Graph().as_default():
        with pytest.raises(TypeError, match="^SummarySaverHook: " + pattern):
            SummarySaverHook(save_steps=1, output_dir=str(tmp_path), **kwargs)
