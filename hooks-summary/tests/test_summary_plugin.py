"""The plugin: entry point, monsession.hooks names, MonitoredTrainingSession defaults."""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
import time

import pytest
import tensorflow as tf
from summary_testing import (
    eager_program,
    event_files,
    file_events,
    increment_after_read,
    tag_steps,
)

import monsession
import monsession_hooks_summary
from monsession_hooks_summary import StepCounterHook, SummarySaverHook, SummaryWriterCache


def test_entry_point_is_installed():
    (entry_point,) = importlib.metadata.entry_points(group="monsession", name="summary")
    assert entry_point.value == "monsession_hooks_summary._plugin"
    assert entry_point.dist is not None
    assert entry_point.dist.name == "monsession-hooks-summary"


def test_monsession_hooks_resolves_our_classes():
    from monsession import hooks

    assert hooks.SummarySaverHook is SummarySaverHook
    assert hooks.StepCounterHook is StepCounterHook
    assert hooks.SummaryWriterCache is SummaryWriterCache
    assert monsession_hooks_summary.SummarySaverHook is SummarySaverHook


def test_plugin_listing_does_not_import_tensorflow():
    code = (
        "import sys, monsession_hooks_summary, monsession_hooks_summary._plugin as p\n"
        "refs = p.monsession_hook_classes() + p.monsession_other_classes()\n"
        "assert 'tensorflow' not in sys.modules, 'tensorflow imported'\n"
        "print(len(refs), sorted(p.monsession_training_arguments()))\n"
    )
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [
        "3",
        "['log_step_count_steps',",
        "'save_summaries_secs',",
        "'save_summaries_steps']",
    ]


def _settings(**overrides):
    """`MonitoredTrainingSession`'s resolved arguments, TensorFlow's defaults otherwise."""
    values = {
        "master": "",
        "is_chief": True,
        "checkpoint_dir": "ckpt",
        "summary_dir": "ckpt",
        "scaffold": monsession.Scaffold(),
        "save_checkpoint_secs": None,
        "save_checkpoint_steps": None,
        "save_summaries_steps": 100,
        "save_summaries_secs": None,
        "log_step_count_steps": 100,
        "save_graph_def": True,
        "config": None,
        "max_wait_secs": 7200.0,
        "eager": False,
    }
    values.update(overrides)
    return monsession.plugins.TrainingSettings(**values)


def _ours(hooks):
    return [type(h) for h in hooks if isinstance(h, (StepCounterHook, SummarySaverHook))]


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({}, [StepCounterHook, SummarySaverHook]),
        ({"log_step_count_steps": 0}, [SummarySaverHook]),
        ({"log_step_count_steps": None}, [SummarySaverHook]),
        ({"save_summaries_steps": None}, [StepCounterHook]),
        ({"save_summaries_steps": 0, "save_summaries_secs": 0}, [StepCounterHook]),
        (
            {"save_summaries_steps": 0, "save_summaries_secs": 5},
            [StepCounterHook, SummarySaverHook],
        ),
        ({"summary_dir": None}, []),
    ],
)
def test_default_hooks_in_tensorflows_order(overrides, expected):
    with tf.Graph().as_default():
        hooks = monsession.plugins.default_hooks(_settings(**overrides))
    assert _ours(hooks) == expected


@pytest.mark.parametrize(
    ("kwargs", "tags"),
    [
        ({}, {"x", "global_step/sec"}),
        ({"log_step_count_steps": 0}, {"x"}),
        ({"save_summaries_steps": None}, {"global_step/sec"}),
        ({"save_summaries_steps": 0, "save_summaries_secs": 5}, {"x", "global_step/sec"}),
    ],
)
def test_default_hooks_graph_write_what_they_should(tmp_path, kwargs, tags):
    with tf.Graph().as_default():
        step = monsession.get_or_create_global_step()
        tf.compat.v1.summary.scalar("x", tf.constant(1.0))
        train_op = increment_after_read(step)
        with monsession.MonitoredTrainingSession(
            checkpoint_dir=str(tmp_path), save_checkpoint_secs=None, **kwargs
        ) as session:
            for _ in range(101):  # The step counter's first rate is at step 101.
                session.run(train_op)
    assert set(tag_steps(tmp_path)) == tags


def test_summary_dir_overrides_checkpoint_dir(tmp_path):
    with tf.Graph().as_default():
        step = monsession.get_or_create_global_step()
        tf.compat.v1.summary.scalar("x", tf.cast(step, tf.float32))
        train_op = step.assign_add(1)
        with monsession.MonitoredTrainingSession(
            checkpoint_dir=str(tmp_path / "ckpt"),
            summary_dir=str(tmp_path / "summaries"),
            save_checkpoint_secs=None,
        ) as session:
            session.run(train_op)
    assert event_files(tmp_path / "summaries")
    assert not event_files(tmp_path / "ckpt")


def _latest_summary_tags(logdir):
    """TensorFlow's own check: the tags of the newest events file in `logdir`."""
    newest = max(event_files(logdir), key=os.path.getmtime)
    return {
        value.tag
        for event in file_events(newest)
        if event.HasField("summary")
        for value in event.summary.value
    }


@pytest.mark.parametrize(
    "timer",
    [{"save_summaries_steps": 100}, {"save_summaries_steps": None, "save_summaries_secs": 0.1}],
)
def test_mts_graph_writes_summaries_and_step_rate(tmp_path, timer):
    """TensorFlow's MonitoredTrainingSession test_summaries_steps / _secs expectations."""
    with tf.Graph().as_default():
        global_step = monsession.get_or_create_global_step()
        new_global_step = tf.compat.v1.assign_add(global_step, 1)
        tf.compat.v1.summary.scalar("my_summary_tag", new_global_step * 2)
        with monsession.MonitoredTrainingSession(
            is_chief=True, checkpoint_dir=str(tmp_path), log_step_count_steps=10, **timer
        ) as session:
            session.run(new_global_step)
            if "save_summaries_secs" in timer:
                time.sleep(0.2)
            for _ in range(101):
                session.run(new_global_step)
    tags = _latest_summary_tags(tmp_path)
    assert {"my_summary_tag", "global_step/sec"} <= tags


def test_mts_eager_records_the_steps_summaries_and_rate(tmp_path):
    program = eager_program()
    with monsession.MonitoredTrainingSession(
        checkpoint_dir=str(tmp_path),
        scaffold=program.scaffold(),
        save_summaries_steps=3,
        log_step_count_steps=4,
        save_checkpoint_secs=None,
    ) as session:
        for _ in range(10):
            session.run(program.step)
    steps = tag_steps(tmp_path)
    assert steps["loss"] == [1, 4, 7, 10]
    assert steps["global_step/sec"] == [5, 9]
    assert program.traces == [1]
