"""Keras's `TensorBoard` callback beside `SummarySaverHook` in one session.

Both make their writer TensorFlow's default `tf.summary` writer with nested
contexts: the hook's opens when the session is created, the callback's
over it when training begins (and again at every batch, with
`update_freq` in batches); the session ends the hook first (hooks end in
list order, `MonitoredTrainingSession`'s own hooks before the user's).
Events are read back with TensorBoard's reader.
"""

from __future__ import annotations

import keras
import tensorflow as tf
from keras_hooks_testing import BATCHES, event_files, make_model, scalars, train_step
from tensorboard.backend.event_processing import event_file_loader

import monsession
from monsession.hooks import SummarySaverHook
from monsession_hooks_keras import KerasCallbacksHook

_START = tf.compat.v1.SessionLog.START


def _session_starts(logdir):
    return [
        int(event.step)
        for path in event_files(logdir)
        for event in event_file_loader.LegacyEventFileLoader(path).Load()
        if event.HasField("session_log") and event.session_log.status == _START
    ]


def test_tensorboard_per_batch_and_default_summary_saver_both_write(tmp_path):
    """`save_summaries_steps` at its default: the session ends without error, both write."""
    model = make_model()
    global_step = monsession.get_or_create_global_step()

    @tf.function
    def step(x, y):
        loss = train_step(model, x, y)
        global_step.assign_add(1)
        return {"loss": loss}

    tensorboard = keras.callbacks.TensorBoard(
        str(tmp_path / "tb"), write_graph=False, update_freq=1
    )
    hook = KerasCallbacksHook([tensorboard], model)
    with monsession.MonitoredTrainingSession(
        hooks=[hook], checkpoint_dir=str(tmp_path / "ckpt")
    ) as session:
        for x, y in BATCHES:
            session.run(step, feed_dict={"x": x, "y": y})

    written = scalars(tmp_path / "tb")
    batches = [(run, s) for run, s, tag, _ in written if tag == "batch_loss"]
    assert batches == [("train", s) for s in range(1, len(BATCHES) + 1)]
    assert [(run, s) for run, s, tag, _ in written if tag == "epoch_loss"] == [("train", 0)]
    # The default SummarySaverHook's SessionLog.START, at the step the first step
    # reached (the StepCounterHook writes none, as TensorFlow's).
    assert _session_starts(tmp_path / "ckpt") == [1]

    # The summary state is back to none once the thread's next recording opens.
    @tf.function
    def next_step():
        global_step.assign_add(1)
        tf.summary.scalar("next", 1.0)

    with monsession.MonitoredSession(
        hooks=[SummarySaverHook(save_steps=1, output_dir=str(tmp_path / "next"))]
    ) as session:
        session.run(next_step)
    assert [tag for _, _, tag, _ in scalars(tmp_path / "next")] == ["next"]
    assert tf.summary.experimental.get_step() is None
    assert not tf.summary.should_record_summaries()
