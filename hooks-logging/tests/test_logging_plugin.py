"""The plugin: installed, registers both classes lazily, adds no default hook."""

from __future__ import annotations

import importlib.metadata
import subprocess

import pytest
import tensorflow as tf
from logging_hooks_testing import LOGGER, MODES, PYTHON, capture_info, program_in

import monsession
import monsession.hooks
from monsession import plugins
from monsession_hooks_logging import LoggingTensorHook, ProgressBarHook, _plugin


def test_entry_point_is_installed():
    (entry_point,) = importlib.metadata.entry_points(group="monsession", name="logging")
    assert entry_point.value == "monsession_hooks_logging._plugin"
    assert entry_point.dist.name == "monsession-hooks-logging"
    assert entry_point.load() is _plugin


def test_monsession_hooks_resolves_our_classes():
    assert monsession.hooks.LoggingTensorHook is LoggingTensorHook
    assert monsession.hooks.ProgressBarHook is ProgressBarHook
    entries = plugins.hook_class_entries()
    for name in ("LoggingTensorHook", "ProgressBarHook"):
        assert entries[name].plugin == "logging"
        assert entries[name].distribution == "monsession-hooks-logging"
        assert isinstance(entries[name].ref, str), "classes are registered lazily"


def test_plugin_serves_no_training_argument_and_adds_no_default_hook():
    assert not hasattr(_plugin, "monsession_training_arguments")
    assert not hasattr(_plugin, "monsession_default_hooks")
    assert "logging" not in plugins.training_argument_owners().values()
    (info,) = [p for p in plugins.plugin_infos().plugins if p.source.name == "logging"]
    assert info.hook_classes == ("LoggingTensorHook", "ProgressBarHook")
    assert info.training_arguments == ()


def test_listing_the_plugin_does_not_import_tensorflow():
    code = (
        "import sys\n"
        "from monsession import plugins as pm\n"
        "entries = pm.hook_class_entries()\n"
        "assert entries['ProgressBarHook'].plugin == 'logging', entries\n"
        "(info,) = [p for p in pm.plugin_infos().plugins if p.source.name == 'logging']\n"
        "assert info.hook_classes == ('LoggingTensorHook', 'ProgressBarHook'), info\n"
        "assert 'tensorflow' not in sys.modules\n"
        "assert 'monsession_hooks_logging._logging_tensor_hook' not in sys.modules\n"
        "assert 'monsession_hooks_logging._progress_bar_hook' not in sys.modules\n"
    )
    subprocess.run([PYTHON, "-c", code], check=True, timeout=60)


@pytest.mark.parametrize("mode", MODES)
def test_monitored_training_session_runs_our_hook_and_no_default_of_ours(caplog, mode, tmp_path):
    capture_info(caplog)
    with program_in(mode) as program:
        scaffold = None
        if mode == "eager":
            checkpoint = tf.train.Checkpoint(w=program.weight, step=program.global_step)
            scaffold = monsession.Scaffold(saver=checkpoint)
        hook = LoggingTensorHook({"loss": program.loss}, every_n_iter=2)
        with monsession.MonitoredTrainingSession(
            checkpoint_dir=str(tmp_path),
            scaffold=scaffold,
            hooks=[hook],
        ) as session:
            for _ in range(3):
                session.run(program.step)
    # Every hook logs on TensorFlow's logger; keep this family's lines.
    lines = [
        record.getMessage()
        for record in caplog.records
        if record.name == LOGGER and "monsession_hooks_logging" in record.pathname
    ]
    assert len(lines) == 2, "our hook logged local steps 0 and 2, and nothing else of ours did"
    assert lines[0] == "loss = 16.0"
    assert lines[1].startswith("loss = 6.5536 (")


def test_default_hooks_hold_nothing_from_this_family(tmp_path):
    with tf.Graph().as_default():
        monsession.get_or_create_global_step()
        settings = _settings(tmp_path, monsession.Scaffold())
        hooks = plugins.default_hooks(settings)
    assert not [h for h in hooks if type(h).__module__.startswith("monsession_hooks_logging")]


def _settings(tmp_path, scaffold):
    return monsession.plugins.TrainingSettings(
        master="",
        is_chief=True,
        checkpoint_dir=str(tmp_path),
        summary_dir=str(tmp_path),
        scaffold=scaffold,
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
