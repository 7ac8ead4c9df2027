"""The standard hooks with fused steps: the same effects as with single steps.

`steps_per_execution=1` and `"auto"` on the same program, hooks and
schedules give the same checkpoint steps, summary steps and values, logged
lines and stop step; NanTensorHook's kept-loss check names the same step.
"""

from __future__ import annotations

import logging
import pathlib
import re

import pytest
import tensorflow as tf
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

import monsession
from monsession.hooks import LoggingTensorHook, NanTensorHook

LAST_STEP = 37
STEP_KEY = "step/.ATTRIBUTES/VARIABLE_VALUE"


@pytest.fixture(autouse=True)
def fresh_global_step():
    tf.compat.v1.reset_default_graph()  # Eager mode's global step lives there.
    yield
    tf.compat.v1.reset_default_graph()


def make_step(nan_at: int | None = None):
    """A tiny regression step that reads its batch from a dataset and writes a summary."""
    global_step = monsession.get_or_create_global_step()
    weights = tf.Variable(tf.ones([3, 1]))
    data = tf.data.Dataset.range(1000).map(lambda i: tf.fill([4, 3], tf.cast(i % 7, tf.float32)))
    iterator = iter(data)

    @tf.function
    def step():
        x = next(iterator)
        loss = tf.reduce_mean(tf.square(x @ weights - 1.0)) / 100.0
        if nan_at is not None:
            loss = tf.where(global_step + 1 == nan_at, tf.constant(float("nan")), loss)
        weights.assign_sub(0.001 * tf.ones_like(weights) * loss)
        with tf.control_dependencies([x]):
            reached = global_step.assign_add(1)
        tf.summary.scalar("loss", loss, step=reached)
        return {"loss": loss}

    checkpoint = tf.train.Checkpoint(step=global_step, weights=weights)
    return step, checkpoint


def scalars(directory: pathlib.Path, tag: str) -> list[tuple[int, float]]:
    values = []
    for events in sorted(directory.glob("events.out.tfevents.*")):
        accumulator = EventAccumulator(str(events), size_guidance={"tensors": 0, "scalars": 0})
        accumulator.Reload()
        tags = accumulator.Tags()
        if tag in tags["tensors"]:
            values += [
                (e.step, float(tf.make_ndarray(e.tensor_proto))) for e in accumulator.Tensors(tag)
            ]
        if tag in tags["scalars"]:
            values += [(e.step, e.value) for e in accumulator.Scalars(tag)]
    return sorted(values)


def train(directory: pathlib.Path, steps_per_execution, caplog) -> dict:
    tf.compat.v1.reset_default_graph()
    step, checkpoint = make_step()
    hooks = [
        LoggingTensorHook({"loss": "loss"}, every_n_iter=5),
        monsession.StopAtStepHook(last_step=LAST_STEP),
    ]
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="tensorflow"):
        with monsession.MonitoredTrainingSession(
            checkpoint_dir=str(directory),
            scaffold=monsession.Scaffold(saver=checkpoint),
            hooks=hooks,
            save_checkpoint_steps=10,
            save_summaries_steps=5,
            log_step_count_steps=5,
            steps_per_execution=steps_per_execution,
        ) as sess:
            calls = 0
            while not sess.should_stop():
                sess.run(step)
                calls += 1
    logged = [
        re.sub(r" \(\d+\.\d+ sec\)", "", r.getMessage())
        for r in caplog.records
        if r.getMessage().startswith("loss = ")
    ]
    state = tf.train.get_checkpoint_state(str(directory))
    return {
        "checkpoints": [int(path.rsplit("-", 1)[1]) for path in state.all_model_checkpoint_paths],
        "final": int(
            tf.train.load_checkpoint(str(directory)).get_tensor("step/.ATTRIBUTES/VARIABLE_VALUE")
        ),
        "loss_summaries": scalars(directory, "loss"),
        "rate_steps": [s for s, _ in scalars(directory, "global_step/sec")],
        "logged": logged,
        "calls": calls,
    }


def test_standard_hooks_see_the_same_steps_and_values_fused(tmp_path, caplog):
    single = train(tmp_path / "single", 1, caplog)
    fused = train(tmp_path / "fused", "auto", caplog)
    assert fused["final"] == single["final"] == LAST_STEP
    assert fused["checkpoints"] == single["checkpoints"]
    assert fused["checkpoints"][-1] == LAST_STEP
    single_steps, single_values = zip(*single["loss_summaries"], strict=True)
    fused_steps, fused_values = zip(*fused["loss_summaries"], strict=True)
    assert fused_steps == single_steps == (1, 6, 11, 16, 21, 26, 31, 36)
    assert fused_values == pytest.approx(single_values)
    assert fused["rate_steps"] == single["rate_steps"] != []
    assert fused["logged"] == single["logged"] and len(single["logged"]) == 8
    assert single["calls"] == LAST_STEP
    assert fused["calls"] < LAST_STEP / 2


@pytest.mark.parametrize("steps_per_execution", [1, "auto"])
def test_kept_loss_check_names_the_first_bad_step_when_fused(steps_per_execution):
    step, _ = make_step(nan_at=23)
    hook = NanTensorHook("loss", check_every_n_steps=10)
    watched = hook.watch(step)
    hooks = [hook, monsession.StopAtStepHook(last_step=LAST_STEP)]
    with pytest.raises(RuntimeError, match="global step 23"):
        with monsession.MonitoredSession(
            hooks=hooks, steps_per_execution=steps_per_execution
        ) as sess:
            while not sess.should_stop():
                sess.run(watched)
