"""The plugin: entry point, monsession.hooks names, MonitoredTrainingSession defaults."""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
import time

import pytest
import tensorflow as tf
from summary_testing import eager_program, event_files, file_events, tag_steps

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
        "refs = p.monsession_hook_classes()\n"
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


SUMMARY = SummarySaverHook


def _hook_types(session):
    return [type(hook) for hook in session._hooks]


def _ours(session):
    return [t for t in _hook_types(session) if t in (StepCounterHook, SummarySaverHook)]


@pytest.mark.parametrize(
    ("kwargs", "expected"),
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
    ],
)
def test_default_hooks_graph(tmp_path, kwargs, expected):
    with tf.Graph().as_default():
        monsession.get_or_create_global_step()
        tf.compat.v1.summary.scalar("x", tf.constant(1.0))
        with monsession.MonitoredTrainingSession(
            checkpoint_dir=str(tmp_path), save_checkpoint_secs=None, **kwargs
        ) as session:
            assert _ours(session) == expected


def test_no_summary_dir_no_default_hooks():
    with tf.Graph().as_default():
        monsession.get_or_create_global_step()
        with monsession.MonitoredTrainingSession() as session:
            assert _ours(session) == []


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
        assert _ours(session) == [StepCounterHook, SummarySaverHook]
        for _ in range(10):
            session.run(program.step)
    steps = tag_steps(tmp_path)
    assert steps["loss"] == [1, 4, 7, 10]
    assert steps["global_step/sec"] == [5, 9]
    assert program.traces == [1]
