"""The plugin: entry point, `monsession.hooks`, argument errors, the default hook."""

from __future__ import annotations

import importlib.metadata

import pytest
from mlflow_testing import Program, client_for, history, new_store, runs

import monsession
import monsession_hooks_mlflow
from monsession_hooks_mlflow import MlflowHook


def test_entry_point_is_installed():
    (entry_point,) = importlib.metadata.entry_points(group="monsession", name="mlflow")
    assert entry_point.value == "monsession_hooks_mlflow._plugin"
    assert entry_point.dist is not None
    assert entry_point.dist.name == "monsession-hooks-mlflow"


def test_monsession_hooks_resolves_the_hook():
    from monsession import hooks

    assert hooks.MlflowHook is MlflowHook is monsession_hooks_mlflow.MlflowHook
    entry = monsession.plugins.hook_class_entries()["MlflowHook"]
    assert entry.distribution == "monsession-hooks-mlflow"
    assert monsession.plugins.KNOWN_HOOK_FAMILIES["MlflowHook"] == "monsession-hooks-mlflow"


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"every_n_steps": 0}, ValueError, "every_n_steps"),
        ({"every_n_steps": None}, ValueError, "every_n_steps"),
        ({"metrics": 3}, TypeError, "metrics must be a name, a list of names or a mapping"),
        ({"metrics": ["loss", 3]}, TypeError, "got 3 in the list"),
        ({"metrics": ["global_step/sec"]}, ValueError, "must not name 'global_step/sec'"),
        ({"tracking_uri": ""}, TypeError, "tracking_uri must be a non-empty string"),
        ({"run_id": 5}, TypeError, "run_id must be a non-empty string"),
        ({"tags": {"a": 1}}, TypeError, r"tags\['a'\] must be one of strings, got 1"),
        ({"params": {"a": [1]}}, TypeError, r"params\['a'\] must be one of strings, numbers"),
        ({"params": ["a"]}, TypeError, "params must be a mapping of names"),
        ({"exactly_once": "no"}, TypeError, "exactly_once"),
        ({"flush_timeout_secs": -1}, ValueError, "flush_timeout_secs"),
    ],
)
def test_bad_arguments_fail_at_construction_naming_hook_and_argument(kwargs, error, message):
    with pytest.raises(error, match=message) as raised:
        MlflowHook(**kwargs)
    assert str(raised.value).startswith("MlflowHook")


def test_mlflow_run_id_makes_monitored_training_session_log_the_step_rate(tmp_path, monkeypatch):
    uri = new_store(tmp_path)
    run_id = client_for(uri).create_run("0").info.run_id
    monkeypatch.setenv("MLFLOW_RUN_ID", run_id)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    program = Program()
    with monsession.MonitoredTrainingSession(
        save_checkpoint_secs=None,
        save_summaries_steps=None,
        log_step_count_steps=3,
        hooks=[monsession.StopAtStepHook(last_step=7)],
    ) as sess:
        while not sess.should_stop():
            sess.run(program.step)
    (run,) = runs(uri)
    assert run.info.status == "FINISHED"
    assert [s for s, _ in history(uri, run_id, "global_step/sec")] == [4, 7]


def test_without_mlflow_run_id_no_default_hook(tmp_path, monkeypatch):
    uri = new_store(tmp_path)
    monkeypatch.delenv("MLFLOW_RUN_ID", raising=False)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    program = Program()
    with monsession.MonitoredTrainingSession(
        save_checkpoint_secs=None,
        save_summaries_steps=None,
        log_step_count_steps=3,
        hooks=[monsession.StopAtStepHook(last_step=4)],
    ) as sess:
        while not sess.should_stop():
            sess.run(program.step)
    assert runs(uri) == []
