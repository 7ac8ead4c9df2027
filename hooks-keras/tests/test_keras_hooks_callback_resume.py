"""`HooksCallback` after a restart: the hooks' saved state is loaded at train begin."""

from __future__ import annotations

import logging
import os

import numpy as np
import tensorflow as tf
from keras_hooks_testing import BATCH, fresh_state, make_model, scalars

from monsession.hooks import (
    CheckpointSaverHook,
    EarlyStoppingHook,
    StepCounterHook,
    SummarySaverHook,
)
from monsession_hooks_keras import HooksCallback

STEPS_PER_EPOCH = 10
XS = (np.arange(120, dtype=np.float32).reshape(40, 3) / 100.0).astype(np.float32)
YS = (XS.sum(axis=1, keepdims=True) * 0.5).astype(np.float32)


def _fit(root, *, first_epoch, last_epoch, restore):
    """Fits epochs [first_epoch, last_epoch) of 10 steps with fresh hooks; returns them."""
    fresh_state()  # As a new process: new graph, new Keras names, new hooks.
    model = make_model()
    if restore:
        model.optimizer.build(model.trainable_variables)
        step = tf.Variable(0, dtype=tf.int64)
        checkpoint = tf.train.Checkpoint(model=model, optimizer=model.optimizer, step=step)
        checkpoint.restore(tf.train.latest_checkpoint(str(root / "ckpt"))).assert_consumed()
    iterations = model.optimizer.iterations
    early = EarlyStoppingHook(
        lambda: abs(float(iterations.numpy()) - 5.0), patience=10, every_n_steps=5
    )
    hooks = [
        CheckpointSaverHook(str(root / "ckpt"), save_steps=5),
        SummarySaverHook(save_steps=4, output_dir=str(root / "summaries")),
        StepCounterHook(every_n_steps=4, output_dir=str(root / "rate")),
        early,
    ]
    model.fit(
        XS,
        YS,
        batch_size=BATCH,
        epochs=last_epoch,
        initial_epoch=first_epoch,
        shuffle=False,
        verbose=0,
        callbacks=[HooksCallback(hooks)],
    )
    assert int(iterations.numpy()) == last_epoch * STEPS_PER_EPOCH
    return early


def _seen(root):
    summaries = [(step, tag, value) for _, step, tag, value in scalars(root / "summaries")]
    rates = sorted(step for _, step, _, _ in scalars(root / "rate"))
    return summaries, rates


def test_a_restored_fit_continues_every_schedule_as_an_uninterrupted_one(tmp_path, caplog):
    whole = _fit(tmp_path / "whole", first_epoch=0, last_epoch=3, restore=False)
    _fit(tmp_path / "parts", first_epoch=0, last_epoch=2, restore=False)
    assert os.path.exists(tmp_path / "parts" / "ckpt" / "model.ckpt-20.hooks.json")
    with caplog.at_level(logging.INFO, logger="monsession"):
        resumed = _fit(tmp_path / "parts", first_epoch=2, last_epoch=3, restore=True)
    assert "EarlyStoppingHook[0]" in caplog.text and "state restored from" in caplog.text
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    summaries, rates = _seen(tmp_path / "parts")
    expected_summaries, expected_rates = _seen(tmp_path / "whole")
    # Recorded at the step before the batch (the default step of `tf.summary`).
    assert [step for step, _, _ in expected_summaries] == list(range(0, 30, 4))
    assert summaries == expected_summaries  # Steps and values.
    assert rates == expected_rates == [5, 9, 13, 17, 21, 25, 29]
    assert (resumed.best_step, resumed.best) == (whole.best_step, whole.best) == (5, 0.0)


def test_a_restart_without_hook_state_warns_and_starts_fresh(tmp_path, caplog):
    _fit(tmp_path, first_epoch=0, last_epoch=2, restore=False)
    os.remove(tmp_path / "ckpt" / "model.ckpt-20.hooks.json")
    with caplog.at_level(logging.INFO, logger="monsession"):
        resumed = _fit(tmp_path, first_epoch=2, last_epoch=3, restore=True)
    assert "No hook state beside checkpoint" in caplog.text
    assert resumed.best_step == 25  # Fresh: the first evaluation after the restart.


def test_a_later_fit_with_the_same_callback_keeps_the_hooks_live_state(tmp_path, caplog):
    model = make_model()
    callback = HooksCallback([CheckpointSaverHook(str(tmp_path), save_steps=5)])
    model.fit(XS, YS, batch_size=BATCH, epochs=1, shuffle=False, verbose=0, callbacks=[callback])
    with caplog.at_level(logging.INFO, logger="monsession"):
        model.fit(XS, YS, batch_size=BATCH, epochs=1, verbose=0, callbacks=[callback])
    assert "state restored" not in caplog.text
    assert int(model.optimizer.iterations.numpy()) == 2 * STEPS_PER_EPOCH
