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
