"""MlflowHook on a real SQLite store: what is logged when, in eager and graph mode."""

from __future__ import annotations

import json
import logging
import socket

import pytest
import tensorflow as tf
from mlflow_testing import Program, client_for, history, new_store, runs

import monsession
from monsession_hooks_mlflow import MlflowHook


def _train(hooks, last_step, program, steps_per_execution=1):
    hooks = [*hooks, monsession.StopAtStepHook(last_step=last_step)]
    with monsession.MonitoredSession(hooks=hooks, steps_per_execution=steps_per_execution) as sess:
        while not sess.should_stop():
            sess.run(program.step)


class _CountingHook(MlflowHook):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.calls = 0

    def before_run(self, run_context):
        self.calls += 1
        return super().before_run(run_context)


def test_eager_fused_steps_log_params_tags_metrics_and_finish(tmp_path):
    uri = new_store(tmp_path)
    program = Program()
    hook = _CountingHook(
        {"loss": "loss", "weight": "w"},
        every_n_steps=5,
        tracking_uri=uri,
        experiment_name="exp",
        run_name="first",
        tags={"team": "a"},
        params={"lr": 0.5, "layers": 2, "optimizer": "sgd"},
    )
    _train([hook], 20, program, steps_per_execution="auto")
    (run,) = runs(uri)
    assert run.info.run_id == hook.run_id
    assert run.info.status == "FINISHED"
    assert run.info.run_name == "first"
    assert client_for(uri).get_experiment(run.info.experiment_id).name == "exp"
    assert run.data.params == {"lr": "0.5", "layers": "2", "optimizer": "sgd"}
    assert run.data.tags["team"] == "a"
    assert history(uri, run.info.run_id, "loss") == [(1, 1.0), (6, 6.0), (11, 11.0), (16, 16.0)]
    assert [s for s, _ in history(uri, run.info.run_id, "weight")] == [1, 6, 11, 16]
    assert [s for s, _ in history(uri, run.info.run_id, "global_step/sec")] == [6, 11, 16]
    # The steps between logging points ran fused, without calling the hook:
    # called at its steps 1, 6, 11, 16 only (not at 20, where StopAtStepHook alone acts).
    assert hook.calls == 4


def test_graph_mode_logs_tensors_by_name(tmp_path):
    uri = new_store(tmp_path)
    with tf.Graph().as_default():
        global_step = monsession.get_or_create_global_step()
        w = tf.compat.v1.get_variable("w", initializer=0.0)
        loss = tf.identity(w * 2.0, name="loss")
        with tf.control_dependencies([loss]):
            train_op = tf.group(w.assign_add(1.0), global_step.assign_add(1))
        hook = MlflowHook("loss", every_n_steps=3, tracking_uri=uri)
        hooks = [hook, monsession.StopAtStepHook(last_step=9)]
        with monsession.MonitoredSession(hooks=hooks) as sess:
            while not sess.should_stop():
                sess.run(train_op)
    (run,) = runs(uri)
    assert run.info.status == "FINISHED"
    # Fetched with the step that reached 1, 4, 7: w before that step's increment.
    assert history(uri, run.info.run_id, "loss") == [(1, 0.0), (4, 6.0), (7, 12.0)]


def test_an_error_ends_the_run_failed_with_what_a_checkpoint_covers(tmp_path):
    uri = new_store(tmp_path)
    program = Program()
    hook = MlflowHook("loss", every_n_steps=1, tracking_uri=uri)
    with pytest.raises(RuntimeError, match="boom"):
        with monsession.MonitoredSession(hooks=[hook]) as sess:
            for _ in range(3):
                sess.run(program.step)
            raise RuntimeError("boom")
    (run,) = runs(uri)
    assert run.info.status == "FAILED"
    # No checkpoint covers steps 1-3: a restart would log them again.
    assert history(uri, run.info.run_id, "loss") == []


def test_send_at_once_without_exactly_once(tmp_path):
    uri = new_store(tmp_path)
    program = Program()
    hook = MlflowHook("loss", every_n_steps=1, tracking_uri=uri, exactly_once=False)
    with pytest.raises(RuntimeError, match="boom"):
        with monsession.MonitoredSession(hooks=[hook]) as sess:
            for _ in range(3):
                sess.run(program.step)
            raise RuntimeError("boom")
    (run,) = runs(uri)
    assert run.info.status == "FAILED"
    assert [s for s, _ in history(uri, run.info.run_id, "loss")] == [1, 2, 3]


def _unused_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_dead_store_warns_once_and_training_finishes(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "5")
    uri = f"http://127.0.0.1:{_unused_port()}"
    program = Program()
    hook = MlflowHook("loss", every_n_steps=1, tracking_uri=uri)
    with caplog.at_level(logging.WARNING, logger="tensorflow"):
        _train([hook], 30, program)
    assert int(program.global_step.numpy()) == 30
    warnings = [r.getMessage() for r in caplog.records if "MlflowHook" in r.getMessage()]
    assert len(warnings) == 1, warnings
    assert warnings[0].startswith(f"MlflowHook: MLflow store {uri} failed: ")
    assert "Training goes on" in warnings[0]
    assert hook.run_id is None


def test_resumes_the_run_mlflow_run_id_names(tmp_path, monkeypatch):
    uri = new_store(tmp_path)
    run_id = client_for(uri).create_run("0").info.run_id
    monkeypatch.setenv("MLFLOW_RUN_ID", run_id)
    program = Program()
    hook = MlflowHook("loss", every_n_steps=2, tracking_uri=uri, params={"never": 1})
    _train([hook], 4, program)
    (run,) = runs(uri)
    assert run.info.run_id == run_id == hook.run_id
    assert run.info.status == "FINISHED"
    assert run.data.params == {}  # Parameters go with a run the hook creates.
    assert [s for s, _ in history(uri, run_id, "loss")] == [1, 3]


def test_mirrored_strategy_logs_one_run(tmp_path):
    uri = new_store(tmp_path)
    tf.compat.v1.reset_default_graph()
    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    with strategy.scope():
        program = Program(reset=False)

    @tf.function
    def step():
        per_replica = strategy.run(program.step)
        return {"loss": strategy.reduce("SUM", per_replica["loss"], axis=None)}

    hook = MlflowHook("loss", every_n_steps=2, tracking_uri=uri)
    with strategy.scope():
        hooks = [hook, monsession.StopAtStepHook(last_step=4)]
        with monsession.MonitoredSession(hooks=hooks) as sess:
            while not sess.should_stop():
                sess.run(step)
    (run,) = runs(uri)
    assert history(uri, run.info.run_id, "loss") == [(1, 1.0), (3, 3.0)]


def test_a_worker_that_is_not_the_chief_starts_no_run_and_fetches_nothing(tmp_path, monkeypatch):
    """Under a multi-worker cluster only the chief writes the run (`monsession.is_chief()`)."""
    uri = new_store(tmp_path)
    cluster = {"worker": ["localhost:1", "localhost:2"]}
    monkeypatch.setenv(
        "TF_CONFIG", json.dumps({"cluster": cluster, "task": {"type": "worker", "index": 1}})
    )
    program = Program()
    hook = _CountingHook("loss", every_n_steps=1, tracking_uri=uri)
    _train([hook], 5, program, steps_per_execution="auto")
    assert runs(uri) == []
    assert hook.run_id is None
    assert hook.calls <= 1  # Never due: its next_action asks for no step.
