"""Hooks fetching per-replica values of `strategy.run` under a real
`MirroredStrategy` over 2 logical CPUs: one value by core's documented rule
(floats averaged over the replicas, equal values given once, else a clear
error), so `LoggingTensorHook` logs one number and `NanTensorHook` catches a
NaN on one replica."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from distributed_testing import two_logical_cpus

import monsession
from monsession.hooks import LoggingTensorHook, NanLossDuringTrainingError, NanTensorHook


def _program(nan_from_step: int | None = None) -> tuple:
    """A step returning {"loss": per replica, "replica": per replica}: replica r
    has loss r + 1 (so the mean is 1.5), and replica 1 a NaN from `nan_from_step`."""
    import tensorflow as tf

    strategy = tf.distribute.MirroredStrategy(two_logical_cpus())
    tf.compat.v1.reset_default_graph()  # A fresh global step, in this strategy.
    with strategy.scope():
        global_step = monsession.get_or_create_global_step()

    def replica_fn():
        replica = tf.distribute.get_replica_context().replica_id_in_sync_group
        loss = tf.cast(replica, tf.float32) + 1.0
        if nan_from_step is not None:
            late = tf.logical_and(replica == 1, global_step >= nan_from_step)
            loss = tf.where(late, tf.constant(np.nan, tf.float32), loss)
        return {"loss": loss, "replica": replica, "ones": tf.ones((), tf.int32)}

    @tf.function
    def step():
        per_replica = strategy.run(replica_fn)
        global_step.assign_add(1)
        return per_replica

    return strategy, step


class Seen(monsession.SessionRunHook):
    def __init__(self, fetches):
        self.fetches = fetches
        self.values = []

    def before_run(self, run_context):
        return monsession.SessionRunArgs(self.fetches)

    def after_run(self, run_context, run_values):
        self.values.append(run_values.results)


def test_hooks_get_the_mean_of_floating_values_and_equal_values_once(caplog) -> None:
    import tensorflow as tf

    strategy, step = _program()
    seen = Seen({"loss": "loss", "ones": "ones"})
    logged = LoggingTensorHook(["loss"], every_n_iter=1)
    with (
        caplog.at_level(logging.INFO, logger="tensorflow"),
        strategy.scope(),
        monsession.MonitoredSession(
            hooks=[seen, logged, monsession.StopAtStepHook(last_step=2)]
        ) as sess,
    ):
        while not sess.should_stop():
            outputs = sess.run(step)
    # The caller gets what the step returned: one value per replica.
    assert isinstance(outputs["loss"], tf.distribute.DistributedValues)
    assert seen.values == [{"loss": 1.5, "ones": 1}] * 2
    assert isinstance(seen.values[0]["loss"], np.float32)
    lines = [record.getMessage() for record in caplog.records if "loss = " in record.getMessage()]
    assert lines and all(line.startswith("loss = 1.5") for line in lines), lines


def test_differing_integer_values_raise_a_clear_error() -> None:
    strategy, step = _program()
    with strategy.scope(), monsession.MonitoredSession(hooks=[Seen("replica")]) as sess:
        with pytest.raises(ValueError, match=r"Seen fetches 'replica'.*Reduce it in the step"):
            sess.run(step)


def test_nan_tensor_hook_catches_a_nan_on_one_replica() -> None:
    strategy, step = _program(nan_from_step=3)
    with strategy.scope(), monsession.MonitoredSession(hooks=[NanTensorHook("loss")]) as sess:
        with pytest.raises(NanLossDuringTrainingError) as raised:
            for _ in range(10):
                sess.run(step)
    assert raised.value.step == 4  # The run that started at step 3 ends at step 4.


class Kept(monsession.SessionRunHook):
    """Keeps entries of the fused steps (`NextAction.keep`): one value per step each."""

    def __init__(self, *names):
        self.names = names
        self.kept = {name: [] for name in names}

    def next_action(self, global_step):
        return monsession.NextAction(keep=self.names)

    def before_run(self, run_context):
        if run_context.silent_steps:
            for name in self.names:
                self.kept[name].extend(run_context.silent_outputs[name].numpy().tolist())


def test_fused_steps_keep_per_replica_outputs_by_the_same_rule() -> None:
    """steps_per_execution="auto" over strategy.run: the loop keeps one value per
    step of a per-replica output, as a fetch of it gets (mean; equal values once);
    NanTensorHook.watch checking every 4 steps names the NaN of one replica."""
    strategy, step = _program()
    kept = Kept("loss", "ones")
    hooks = [kept, monsession.StopAtStepHook(last_step=10)]
    with (
        strategy.scope(),
        monsession.MonitoredSession(hooks=hooks, steps_per_execution="auto") as sess,
    ):
        while not sess.should_stop():
            sess.run(step)
    assert kept.kept["loss"] and kept.kept["loss"] == [1.5] * len(kept.kept["loss"])
    assert kept.kept["ones"] == [1] * len(kept.kept["loss"])

    strategy, step = _program(nan_from_step=6)
    nan = NanTensorHook("loss", check_every_n_steps=4)
    with (
        strategy.scope(),
        monsession.MonitoredSession(hooks=[nan], steps_per_execution="auto") as sess,
    ):
        with pytest.raises(NanLossDuringTrainingError) as raised:
            for _ in range(20):
                sess.run(nan.watch(step))
    assert raised.value.step == 7  # The step that started at 6.


def test_fused_steps_refuse_differing_per_replica_integers() -> None:
    import tensorflow as tf

    strategy, step = _program()
    hooks = [Kept("replica"), monsession.StopAtStepHook(last_step=10)]
    with (
        strategy.scope(),
        monsession.MonitoredSession(hooks=hooks, steps_per_execution="auto") as sess,
    ):
        with pytest.raises(tf.errors.InvalidArgumentError) as raised:
            while not sess.should_stop():
                sess.run(step)
    message = str(raised.value).replace("\\", "")  # TensorFlow escapes the quotes.
    assert "A hook keeps the step's 'replica' output" in message
    assert "Reduce it in the step" in message
