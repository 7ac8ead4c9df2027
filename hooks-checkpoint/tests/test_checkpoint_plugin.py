"""The plugin: entry point, hook classes, default hook of MonitoredTrainingSession."""

from __future__ import annotations

import importlib.metadata
import logging

import pytest
import tensorflow as tf
from checkpoint_testing import ONLY_CHECKPOINTS, checkpoint_steps, fresh_eager

import monsession
import monsession.hooks
from monsession.plugins import ORDER_CHECKPOINT_SAVER, TrainingSettings
from monsession_hooks_checkpoint import CheckpointSaverHook, CheckpointSaverListener, _plugin


def test_entry_point_is_installed():
    (entry_point,) = importlib.metadata.entry_points(group="monsession", name="checkpoint")
    assert entry_point.value == "monsession_hooks_checkpoint._plugin"
    assert entry_point.dist.name == "monsession-hooks-checkpoint"
    assert entry_point.load() is _plugin


def test_monsession_hooks_resolves_the_classes():
    assert monsession.hooks.CheckpointSaverHook is CheckpointSaverHook
    assert monsession.hooks.CheckpointSaverListener is CheckpointSaverListener
    assert {"CheckpointSaverHook", "CheckpointSaverListener"} <= set(dir(monsession.hooks))


def test_training_arguments():
    assert _plugin.monsession_training_arguments() == [
        "save_checkpoint_secs",
        "save_checkpoint_steps",
    ]


def _settings(**overrides):
    values = dict(
        master="",
        is_chief=True,
        checkpoint_dir="/tmp/ckpt",
        summary_dir="/tmp/ckpt",
        scaffold=monsession.Scaffold(),
        save_checkpoint_secs=600,
        save_checkpoint_steps=None,
        save_summaries_steps=100,
        save_summaries_secs=None,
        log_step_count_steps=100,
        save_graph_def=True,
        config=None,
        max_wait_secs=7200,
        eager=False,
    )
    values.update(overrides)
    return TrainingSettings(**values)


@pytest.mark.parametrize(
    "overrides, schedule",
    [
        ({}, (600, None)),
        ({"save_checkpoint_secs": None, "save_checkpoint_steps": 5}, (None, 5)),
        ({"save_checkpoint_secs": 0, "save_checkpoint_steps": 5}, (None, 5)),
        ({"save_checkpoint_secs": 0}, None),
        ({"save_checkpoint_secs": None}, None),
        ({"checkpoint_dir": None}, None),
    ],
)
def test_default_hook_follows_tensorflows_rule(overrides, schedule):
    contributed = _plugin.monsession_default_hooks(_settings(**overrides))
    if schedule is None:
        assert contributed is None
        return
    (default,) = contributed
    assert default.order == ORDER_CHECKPOINT_SAVER
    hook = default.hook
    assert isinstance(hook, CheckpointSaverHook)
    assert (hook._save_secs, hook._save_steps) == schedule


def test_graph_mode_monitored_training_session_gets_the_hook(tmp_path):
    with tf.Graph().as_default():
        gstep = monsession.get_or_create_global_step()
        do_step = tf.compat.v1.assign_add(gstep, 1)
        with monsession.MonitoredTrainingSession(
            checkpoint_dir=str(tmp_path),
            save_checkpoint_steps=2,
            save_graph_def=False,
            **ONLY_CHECKPOINTS,
        ) as session:
            hooks = [h for h in session._hooks if isinstance(h, CheckpointSaverHook)]
            assert len(hooks) == 1 and not hooks[0]._save_graph_def
            for _ in range(3):
                session.run(do_step)
    assert checkpoint_steps(str(tmp_path)) == [0, 2, 3]


def test_eager_monitored_training_session_gets_the_hook(tmp_path):
    with fresh_eager():
        gstep = monsession.get_or_create_global_step()

        @tf.function
        def step():
            gstep.assign_add(1)
            return {}

        scaffold = monsession.Scaffold(saver=tf.train.Checkpoint(step=gstep))
        with monsession.MonitoredTrainingSession(
            checkpoint_dir=str(tmp_path),
            scaffold=scaffold,
            save_checkpoint_steps=2,
            **ONLY_CHECKPOINTS,
        ) as session:
            assert any(isinstance(h, CheckpointSaverHook) for h in session._hooks)
            for _ in range(3):
                session.run(step)
    assert checkpoint_steps(str(tmp_path)) == [0, 2, 3]


def test_eager_without_state_skips_the_default_and_refuses_an_explicit_schedule(tmp_path, caplog):
    with fresh_eager():
        monsession.get_or_create_global_step()
        with caplog.at_level(logging.WARNING, logger="monsession"):
            with monsession.MonitoredTrainingSession(
                checkpoint_dir=str(tmp_path), **ONLY_CHECKPOINTS
            ) as session:
                assert not any(isinstance(h, CheckpointSaverHook) for h in session._hooks)
        assert "Not saving checkpoints" in caplog.text
        # A bad explicit argument is the user's error: it reaches them as it is.
        with pytest.raises(ValueError, match=r"Scaffold\(saver=tf.train.Checkpoint"):
            monsession.MonitoredTrainingSession(
                checkpoint_dir=str(tmp_path), save_checkpoint_steps=10, **ONLY_CHECKPOINTS
            )


def test_plugin_module_does_not_import_tensorflow():
    import subprocess
    import sys

    code = (
        "import sys, monsession_hooks_checkpoint._plugin, monsession_hooks_checkpoint;"
        "monsession_hooks_checkpoint.CheckpointSaverListener;"
        "print('tensorflow' in sys.modules)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "False"
