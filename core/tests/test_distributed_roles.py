"""Roles without a cluster: eager workers restore the chief's checkpoint; the chief rule."""

from __future__ import annotations

import json

import pytest
import tensorflow as tf

import monsession
from monsession._session._session_creators import WorkerSessionCreator


@pytest.fixture
def eager_state():
    tf.compat.v1.reset_default_graph()
    yield
    tf.compat.v1.reset_default_graph()


def test_eager_worker_restores_the_chiefs_latest_checkpoint(eager_state, tmp_path):
    global_step = monsession.get_or_create_global_step()
    weight = tf.Variable(1.0)
    checkpoint = tf.train.Checkpoint(weight=weight, step=global_step)
    weight.assign(7.0)
    global_step.assign(12)
    tf.train.CheckpointManager(checkpoint, str(tmp_path), max_to_keep=None).save(12)
    weight.assign(0.0)
    global_step.assign(0)
    with monsession.MonitoredTrainingSession(
        is_chief=False, checkpoint_dir=str(tmp_path), scaffold=monsession.Scaffold(saver=checkpoint)
    ) as sess:
        assert sess.run(global_step).numpy() == 12
        assert weight.numpy() == 7.0
    assert sorted(path.name for path in tmp_path.iterdir()) == [
        "checkpoint",
        "ckpt-12.data-00000-of-00001",
        "ckpt-12.index",
    ], "a worker writes nothing"


def test_eager_worker_without_checkpoint_runs_init_fn(eager_state, tmp_path):
    weight = tf.Variable(1.0)
    scaffold = monsession.Scaffold(
        saver=tf.train.Checkpoint(weight=weight),
        init_fn=lambda scaffold, session: weight.assign(5.0),
    )
    with monsession.MonitoredTrainingSession(
        is_chief=False, checkpoint_dir=str(tmp_path), scaffold=scaffold
    ):
        assert weight.numpy() == 5.0


def test_graph_workers_poll_the_chief_every_second():
    assert WorkerSessionCreator._poll_secs == 1


@pytest.mark.parametrize(
    ("task_type", "index", "expected"),
    [("chief", 0, True), ("worker", 0, False), ("worker", 1, False), ("ps", 0, False)],
)
def test_is_chief_reads_tf_config(monkeypatch, task_type, index, expected):
    cluster = {"chief": ["127.0.0.1:1"], "worker": ["127.0.0.1:2", "127.0.0.1:3"]}
    config = {"cluster": cluster, "task": {"type": task_type, "index": index}}
    monkeypatch.setenv("TF_CONFIG", json.dumps(config))
    assert monsession.is_chief() is expected


def test_is_chief_without_a_chief_task_is_worker_0(monkeypatch):
    config = {"cluster": {"worker": ["127.0.0.1:2", "127.0.0.1:3"]}}
    for index, expected in ((0, True), (1, False)):
        config["task"] = {"type": "worker", "index": index}
        monkeypatch.setenv("TF_CONFIG", json.dumps(config))
        assert monsession.is_chief() is expected
    monkeypatch.delenv("TF_CONFIG")
    assert monsession.is_chief() is True


def test_worker_output_dir_is_the_directory_on_the_chief_a_subdirectory_elsewhere(
    monkeypatch, tmp_path
):
    directory = str(tmp_path / "profile")
    monkeypatch.delenv("TF_CONFIG", raising=False)
    assert monsession.plugins.worker_output_dir(directory) == directory  # No cluster.
    config = {"cluster": {"worker": ["127.0.0.1:2", "127.0.0.1:3"]}}
    for task, expected in ((0, directory), (1, str(tmp_path / "profile" / "worker-1"))):
        config["task"] = {"type": "worker", "index": task}
        monkeypatch.setenv("TF_CONFIG", json.dumps(config))
        assert monsession.plugins.worker_output_dir(directory) == expected
    config = {"cluster": {"chief": ["127.0.0.1:1"], "worker": ["127.0.0.1:2"]}}
    for task_type, expected in (("chief", directory), ("worker", f"{directory}/worker-0")):
        config["task"] = {"type": task_type, "index": 0}
        monkeypatch.setenv("TF_CONFIG", json.dumps(config))
        assert monsession.plugins.worker_output_dir(directory) == expected
    # The current directory, as the hooks' default output_dir "".
    assert monsession.plugins.worker_output_dir("") == "worker-0"
