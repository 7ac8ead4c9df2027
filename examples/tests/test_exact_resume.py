"""A run interrupted mid-epoch resumes at exactly the next batch (`monsession.Epochs`)."""

from __future__ import annotations

import pathlib

import pytest
import tensorflow as tf

import monsession

BATCHES_PER_EPOCH = 5
EPOCHS = 3


class Batches(monsession.SessionRunHook):
    """Collects the batch each step trained on."""

    def __init__(self) -> None:
        self.seen: list[list[float]] = []

    def before_run(self, run_context):
        return monsession.SessionRunArgs("batch")

    def after_run(self, run_context, run_values):
        self.seen.append(run_values.results.tolist())


def train(directory: pathlib.Path, last_step: int) -> tuple[list, list[int], float]:
    """Trains in a fresh program until `last_step`; returns batches, epochs done, weight."""
    tf.compat.v1.reset_default_graph()
    data = (
        tf.data.Dataset.range(20)
        .map(lambda i: tf.cast(i, tf.float32))
        .shuffle(20, seed=3, reshuffle_each_iteration=True)
        .batch(4)
    )
    epochs = monsession.Epochs(data, num_epochs=EPOCHS)
    w = tf.Variable(1.0)

    @tf.function
    def train_step(x):
        w.assign(0.9 * w + tf.reduce_sum(x) / 100.0)  # Depends on the order of the batches.
        return {"batch": x}

    checkpoint = tf.train.Checkpoint(w=w, data=epochs)
    batches = Batches()
    with monsession.MonitoredTrainingSession(
        checkpoint_dir=str(directory),
        scaffold=monsession.Scaffold(saver=checkpoint),
        hooks=[batches, monsession.StopAtStepHook(last_step=last_step)],
        save_checkpoint_steps=100,
        save_summaries_steps=None,
        log_step_count_steps=None,
    ) as sess:
        done = list(epochs.run(sess, train_step))
    return batches.seen, done, float(w.numpy())


def test_an_interrupted_run_resumes_at_the_exact_batch(tmp_path):
    total = BATCHES_PER_EPOCH * EPOCHS
    straight, straight_epochs, straight_w = train(tmp_path / "straight", last_step=100)
    assert len(straight) == total and straight_epochs == [0, 1, 2]
    assert straight[0] != straight[BATCHES_PER_EPOCH], "each epoch is reshuffled"

    first, first_epochs, _ = train(tmp_path / "resumed", last_step=7)  # Mid-epoch 1.
    assert first_epochs == [0]
    second, second_epochs, resumed_w = train(tmp_path / "resumed", last_step=100)
    assert second_epochs == [1, 2]
    assert first + second == straight
    assert resumed_w == pytest.approx(straight_w)
