"""With the checkpoint family (runs in the `all` env): the listener logs each checkpoint."""

from __future__ import annotations

import os

import tensorflow as tf
from mlflow_testing import Program, client_for, history, new_store, runs

import monsession
from monsession_hooks_checkpoint import CheckpointSaverHook
from monsession_hooks_mlflow import MlflowHook


def test_the_checkpoint_listener_logs_each_checkpoint_step_and_path(tmp_path):
    uri = new_store(tmp_path)
    program = Program()
    ckpt = str(tmp_path / "ckpt")
    hook = MlflowHook("loss", every_n_steps=4, tracking_uri=uri)
    saver = CheckpointSaverHook(
        ckpt,
        save_steps=5,
        scaffold=monsession.Scaffold(saver=program.checkpoint),
        listeners=[hook.checkpoint_listener(ckpt)],
    )
    with monsession.MonitoredTrainingSession(
        checkpoint_dir=ckpt,
        scaffold=monsession.Scaffold(saver=program.checkpoint),
        save_checkpoint_secs=None,
        save_summaries_steps=None,
        log_step_count_steps=None,
        chief_only_hooks=[hook, saver],
        hooks=[monsession.StopAtStepHook(last_step=20)],
        steps_per_execution="auto",
    ) as sess:
        while not sess.should_stop():
            sess.run(program.step)
    (run,) = runs(uri)
    assert run.info.status == "FINISHED"
    # Step 0 at the session's start, as TensorFlow's saver; 20 at its end(),
    # after the MLflow hook's: the run ends once the saver's listener ended.
    assert history(uri, run.info.run_id, "checkpoint") == [
        (s, float(s)) for s in (0, 5, 10, 15, 20)
    ]
    assert run.data.tags["monsession.checkpoint"] == tf.train.latest_checkpoint(ckpt)
    assert os.path.basename(run.data.tags["monsession.checkpoint"]) == "model.ckpt-20"
    assert [s for s, _ in history(uri, run.info.run_id, "loss")] == [1, 5, 9, 13, 17]
    assert client_for(uri).get_run(hook.run_id).info.run_id == run.info.run_id
