"""KerasCallbacksHook across a restart: the epoch in progress is hook state.

Needs the checkpoint family (the hook's state is saved beside the checkpoints
`CheckpointSaverHook` writes), so it runs in the `all` env.
"""

from __future__ import annotations

import tensorflow as tf
from keras_hooks_testing import make_model, trace_callback

import monsession
from monsession_hooks_keras import KerasCallbacksHook


def test_a_run_resumed_in_the_middle_of_an_epoch_goes_on_in_that_epoch(tmp_path):
    traces = []
    for last_step in (4, 9):  # Stopped in epoch 1 (steps 4-6), then resumed there.
        monsession.get_global_step() or monsession.get_or_create_global_step()
        trace = []
        traces.append(trace)
        hook = KerasCallbacksHook([trace_callback(trace)], make_model(), logs=())
        data = monsession.Epochs(tf.data.Dataset.range(3), num_epochs=3)
        state = tf.train.Checkpoint(data=data, step=monsession.get_global_step())

        @tf.function
        def step(x):
            monsession.get_global_step().assign_add(1)
            return {"loss": tf.cast(x, tf.float32)}

        with monsession.MonitoredTrainingSession(
            checkpoint_dir=str(tmp_path),
            save_checkpoint_steps=100,
            scaffold=monsession.Scaffold(saver=state),
            hooks=[hook, monsession.StopAtStepHook(last_step=last_step)],
        ) as session:
            list(data.run(session, step))
    epochs = [[t for t in trace if t.startswith("epoch")] for trace in traces]
    assert epochs[0] == ["epoch_begin 0", "epoch_end 0 []", "epoch_begin 1", "epoch_end 1 []"]
    assert epochs[1] == ["epoch_begin 1", "epoch_end 1 []", "epoch_begin 2", "epoch_end 2 []"]
