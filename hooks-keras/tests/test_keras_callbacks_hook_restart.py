"""KerasCallbacksHook across a restart and a recovery: where training is, is hook state.

Needs the checkpoint family (the hook's state is saved beside the checkpoints
`CheckpointSaverHook` writes), so it runs in the `all` env. A new session
with a new hook and new callbacks is what a new process has.
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf
from keras_hooks_testing import make_model, scalars, trace_callback

import monsession
from monsession_hooks_keras import KerasCallbacksHook

SAVE_FREQ = 5


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
    # Epoch 1 goes on: it does not begin again.
    assert epochs[1] == ["epoch_end 1 []", "epoch_begin 2", "epoch_end 2 []"]
    # Its batches are numbered from its first step (3), not from the restart (4).
    assert next(t for t in traces[1] if t.startswith("batch_begin")) == "batch_begin 1"


class _Line:
    """An uncompiled one-weight model trained with its own SGD; batch s of the global step."""

    def __init__(self) -> None:
        self.global_step = monsession.get_or_create_global_step()
        self.model = keras.Sequential(
            [keras.Input((1,)), keras.layers.Dense(1, use_bias=False, kernel_initializer="ones")]
        )
        self.optimizer = keras.optimizers.SGD(learning_rate=0.01)
        model, optimizer, global_step = self.model, self.optimizer, self.global_step

        @tf.function
        def step():
            x = tf.reshape(tf.cast(global_step % 3 + 1, tf.float32), (1, 1))
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(model(x) - 2.0 * x))
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply(grads, model.trainable_variables)
            global_step.assign_add(1)
            return {"loss": loss}

        self.step = step

    def hook(self, callbacks: list, **arguments) -> KerasCallbacksHook:
        return KerasCallbacksHook(callbacks, self.model, optimizer=self.optimizer, **arguments)

    def scaffold(self) -> monsession.Scaffold:
        state = tf.train.Checkpoint(model=self.model, step=self.global_step)
        return monsession.Scaffold(saver=state)


def _counting_callbacks(directory):
    return [
        keras.callbacks.ModelCheckpoint(
            str(directory / "keras" / "b{batch:02d}.weights.h5"),
            save_weights_only=True,
            save_freq=SAVE_FREQ,
        ),
        keras.callbacks.TensorBoard(str(directory / "logs"), update_freq=1, write_graph=False),
    ]


def _saved(directory):
    """The ModelCheckpoint files and their kernels, and TensorBoard's latest loss per step."""
    kernels = {}
    for path in sorted((directory / "keras").iterdir()):
        model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1, use_bias=False)])
        model.optimizer = keras.optimizers.SGD()
        model.optimizer.build(model.trainable_variables)
        model.load_weights(str(path))
        kernels[path.name] = round(float(model.layers[0].kernel.numpy().reshape(())), 5)
    steps = sorted({step for _, step, tag, _ in scalars(directory / "logs") if tag == "batch_loss"})
    return kernels, steps


def _uninterrupted(directory, last_step):
    line = _Line()
    with monsession.MonitoredSession(
        hooks=[
            line.hook(_counting_callbacks(directory)),
            monsession.StopAtStepHook(last_step=last_step),
        ]
    ) as session:
        while not session.should_stop():
            session.run(line.step)
    return _saved(directory)


def test_after_a_restart_the_callbacks_save_and_write_at_the_steps_of_one_run(tmp_path):
    for last_step in (7, 20):  # Stopped at 7 (a checkpoint at 7), then a new "process".
        tf.compat.v1.reset_default_graph()
        line = _Line()
        with monsession.MonitoredTrainingSession(
            checkpoint_dir=str(tmp_path / "ckpt"),
            save_checkpoint_steps=SAVE_FREQ,
            save_summaries_steps=None,  # TensorBoard owns the default writer (see README).
            scaffold=line.scaffold(),
            hooks=[
                line.hook(_counting_callbacks(tmp_path)),
                monsession.StopAtStepHook(last_step=last_step),
            ],
        ) as session:
            while not session.should_stop():
                session.run(line.step)
    kernels, steps = _saved(tmp_path)

    tf.compat.v1.reset_default_graph()
    assert (kernels, steps) == _uninterrupted(tmp_path / "reference", 20)
    assert list(kernels) == ["b05.weights.h5", "b10.weights.h5", "b15.weights.h5", "b20.weights.h5"]
    assert steps == list(range(1, 21))


class _AbortOnce(monsession.SessionRunHook):
    """Raises a real AbortedError after step `at`, once: the session recovers."""

    def __init__(self, at: int) -> None:
        self._at, self.fired = at, False

    def after_run(self, run_context, run_values):
        step = monsession.plugins.as_run_context(run_context).global_step_after()
        if step == self._at and not self.fired:
            self.fired = True
            raise tf.errors.AbortedError(None, None, "test: preempted")


def test_after_a_recovery_the_callbacks_save_and_write_at_the_steps_of_one_run(tmp_path):
    from monsession_hooks_checkpoint import CheckpointSaverHook

    line = _Line()
    scaffold = line.scaffold()
    starts = []
    hooks = [
        line.hook(
            [
                *_counting_callbacks(tmp_path),
                keras.callbacks.LambdaCallback(on_train_begin=lambda logs: starts.append(1)),
            ]
        ),
        # Written when the step returns, so the recovery restores the checkpoint of step 5.
        CheckpointSaverHook(
            str(tmp_path / "ckpt"), save_steps=SAVE_FREQ, scaffold=scaffold, async_save=False
        ),
        abort := _AbortOnce(at=8),
        monsession.StopAtStepHook(last_step=12),
    ]
    with monsession.MonitoredTrainingSession(
        checkpoint_dir=str(tmp_path / "ckpt"),
        save_checkpoint_secs=None,  # The hook above saves.
        save_summaries_steps=None,
        scaffold=scaffold,
        hooks=hooks,
    ) as session:
        while not session.should_stop():
            session.run(line.step)
    assert abort.fired and starts == [1]  # Recovered in the same training.
    kernels, steps = _saved(tmp_path)

    tf.compat.v1.reset_default_graph()
    assert (kernels, steps) == _uninterrupted(tmp_path / "reference", 12)
    assert list(kernels) == ["b05.weights.h5", "b10.weights.h5"]


def test_history_and_early_stopping_keep_their_epochs_across_a_restart(tmp_path):
    def callbacks():
        return [keras.callbacks.History(), keras.callbacks.EarlyStopping("loss", patience=9)]

    def train(last_step, directory, chosen):
        tf.compat.v1.reset_default_graph()
        line = _Line()
        data = monsession.Epochs(tf.data.Dataset.range(3), num_epochs=3)
        state = tf.train.Checkpoint(model=line.model, step=line.global_step, data=data)
        with monsession.MonitoredTrainingSession(
            checkpoint_dir=str(directory),
            save_checkpoint_steps=100,
            scaffold=monsession.Scaffold(saver=state),
            hooks=[line.hook(chosen), monsession.StopAtStepHook(last_step=last_step)],
        ) as session:
            list(data.run(session, lambda x: line.step()))

    train(5, tmp_path / "run", callbacks())  # Stopped in epoch 1.
    resumed = callbacks()
    train(9, tmp_path / "run", resumed)
    reference = callbacks()
    train(9, tmp_path / "reference", reference)

    history, stopping = resumed
    assert history.epoch == reference[0].epoch == [0, 1, 2]
    np.testing.assert_allclose(history.history["loss"], reference[0].history["loss"])
    assert (stopping.best, stopping.best_epoch, stopping.wait) == (
        reference[1].best,
        reference[1].best_epoch,
        reference[1].wait,
    )


def test_a_state_saved_with_other_callbacks_is_not_loaded(tmp_path):
    line = _Line()
    saved = line.hook([keras.callbacks.History()]).state_dict()
    other = line.hook([keras.callbacks.TerminateOnNaN()])
    try:
        other.load_state_dict(saved)
    except ValueError as error:
        assert "['History']" in str(error) and "['TerminateOnNaN']" in str(error)
    else:
        raise AssertionError("expected a ValueError")
