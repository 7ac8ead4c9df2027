"""Interoperability with TensorFlow, both directions, graph mode."""

from __future__ import annotations

import numpy as np
import tensorflow as tf
from checkpoint_testing import ONLY_CHECKPOINTS, checkpoint_steps, counter_program

import monsession


def _train(module, logdir, steps, **kwargs):
    """Trains the counter program `steps` steps; returns (start step, final weight)."""
    with tf.Graph().as_default():
        global_step, train_op, weight = counter_program()
        with module.MonitoredTrainingSession(
            checkpoint_dir=logdir, save_checkpoint_steps=3, **ONLY_CHECKPOINTS, **kwargs
        ) as session:
            start = session.run(global_step)
            for _ in range(steps):
                session.run(train_op)
            return int(start), float(session.run(weight))


def test_monsession_checkpoint_is_read_and_restored_by_tensorflow(tmp_path):
    logdir = str(tmp_path)
    start, weight = _train(monsession, logdir, 4)
    assert (start, weight) == (0, 14.0)
    latest = tf.train.latest_checkpoint(logdir)
    assert latest == f"{logdir}/model.ckpt-4"
    reader = tf.train.load_checkpoint(latest)
    assert reader.get_tensor("global_step") == 4
    assert reader.get_tensor("w") == np.float32(14.0)
    start, weight = _train(tf.compat.v1.train, logdir, 2)
    assert (start, weight) == (4, 16.0)  # Training resumed at the saved step.
    assert tf.train.load_checkpoint(logdir).get_tensor("global_step") == 6


def test_tensorflow_checkpoint_is_restored_by_monsession(tmp_path):
    logdir = str(tmp_path)
    assert _train(tf.compat.v1.train, logdir, 5) == (0, 15.0)
    assert _train(monsession, logdir, 2) == (5, 17.0)
    # TF saved 0, 3, 5; monsession does not rewrite 5, then saves its end step 7.
    assert checkpoint_steps(logdir) == [0, 3, 5, 7]
    assert tf.train.load_checkpoint(logdir).get_tensor("w") == np.float32(17.0)
    # And back again.
    assert _train(tf.compat.v1.train, logdir, 1) == (7, 18.0)
