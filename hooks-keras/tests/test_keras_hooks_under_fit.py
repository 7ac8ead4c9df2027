"""The standard monsession hooks under `model.fit` (HooksCallback), side by side with a loop.

Both runs train the same model on the same batches (`keras_hooks_testing`):
checkpoints are read back with `tf.train.load_checkpoint`, event files with
TensorBoard's reader. Under `fit` the global step is the optimizer's
iteration count; in the loop it is monsession's global step, advanced by
the step.
"""

from __future__ import annotations

import glob
import io
import logging
import os
import re

import keras
import numpy as np
import pytest
import tensorflow as tf
from keras_hooks_testing import X, fit_run, fresh_state, loop_run, scalars

import monsession
from monsession.hooks import (
    CheckpointSaverHook,
    LoggingTensorHook,
    NanLossDuringTrainingError,
    NanTensorHook,
    ProfilerHook,
    ProgressBarHook,
    StepCounterHook,
    StopAtStepHook,
    SummarySaverHook,
)
from monsession_hooks_keras import HooksCallback, fit_global_step


def both(make_hooks, *, epochs=3, x=X):
    """Trains under `fit` with `HooksCallback(make_hooks(model, "fit"))`, then in a loop."""
    fit_model = fit_run([], epochs=0)  # Built, not trained: the hooks need the model.
    fit_run([HooksCallback(make_hooks(fit_model, "fit"))], epochs=epochs, x=x, model=fit_model)
    fresh_state()
    loop_model = loop_run(lambda model: make_hooks(model, "loop"), epochs=epochs, x=x)
    return fit_model, loop_model


def _checkpoint_values(directory):
    """Step -> {name: value} of every checkpoint in `directory` (model variables only)."""
    found = {}
    for index in glob.glob(os.path.join(directory, "model.ckpt-*.index")):
        prefix = index[: -len(".index")]
        reader = tf.train.load_checkpoint(prefix)
        found[int(prefix.rsplit("-", 1)[1])] = {
            name: reader.get_tensor(name)
            for name in reader.get_variable_to_shape_map()
            if name.startswith("model/")
        }
    return found


def test_checkpoint_saver_writes_the_same_checkpoints(tmp_path):
    def hooks(model, run):
        state = tf.train.Checkpoint(model=model)
        return [CheckpointSaverHook(str(tmp_path / run), save_steps=2, saver=state)]

    both(hooks)
    fit, loop = _checkpoint_values(tmp_path / "fit"), _checkpoint_values(tmp_path / "loop")
    assert sorted(fit) == sorted(loop) == [0, 2, 4, 6]
    for step in fit:
        assert fit[step].keys() == loop[step].keys() and fit[step]
        for name in fit[step]:
            np.testing.assert_allclose(fit[step][name], loop[step][name], rtol=1e-5)


def test_summary_saver_and_step_counter_write_the_same_events(tmp_path):
    def hooks(model, run):
        return [
            SummarySaverHook(save_steps=2, output_dir=str(tmp_path / run / "summaries")),
            StepCounterHook(every_n_steps=2, output_dir=str(tmp_path / run / "counter")),
        ]

    both(hooks)
    fit = scalars(tmp_path / "fit" / "summaries")
    assert [(step, tag) for _, step, tag, _ in fit] == [(0, "step_loss"), (2, "step_loss"),
                                                        (4, "step_loss")]  # fmt: skip
    assert scalars(tmp_path / "loop" / "summaries") == fit

    def rate_steps(run):
        return [
            (step, tag.split("/")[-1]) for _, step, tag, _ in scalars(tmp_path / run / "counter")
        ]

    # The first trigger (step 1) starts the clock; rates follow at steps 3 and 5.
    assert rate_steps("fit") == rate_steps("loop") == [(3, "sec"), (5, "sec")]


def test_stop_at_step_stops_fit_at_the_same_step():
    def hooks(model, run):
        return [StopAtStepHook(last_step=3)]

    fit_model, loop_model = both(hooks, epochs=5)
    assert int(fit_model.optimizer.iterations) == int(loop_model.optimizer.iterations) == 3


def test_nan_tensor_hook_raises_at_the_same_step():
    x = X.copy()
    x[5, 0] = np.nan
    errors = []
    for run in ("fit", "loop"):
        fresh_state()
        with pytest.raises(NanLossDuringTrainingError) as caught:
            if run == "fit":
                fit_run([HooksCallback([NanTensorHook("loss")])], x=x)
            else:
                loop_run(lambda model: [NanTensorHook("loss")], x=x)
        errors.append(caught.value.step)
    assert errors[0] == errors[1] is not None


def test_logging_tensor_hook_logs_the_same_values(caplog):
    def hooks(model, run):
        return [LoggingTensorHook(["loss"], every_n_iter=2)]

    with caplog.at_level(logging.INFO):
        fit_run([HooksCallback(hooks(None, "fit"))])
        fit_lines = [r.getMessage() for r in caplog.records if "loss =" in r.getMessage()]
        caplog.clear()
        fresh_state()
        loop_run(lambda model: hooks(model, "loop"))
        loop_lines = [r.getMessage() for r in caplog.records if "loss =" in r.getMessage()]
    assert len(fit_lines) == 3
    assert [line[:12] for line in loop_lines] == [line[:12] for line in fit_lines]


def test_progress_bar_hook_logs_the_same_progress(caplog):
    outputs = {}
    for run in ("fit", "loop"):
        fresh_state()
        caplog.clear()
        hook = ProgressBarHook(["loss"], every_n_iter=2, last_step=6, file=io.StringIO(),
                               log_every_n_secs=0)  # fmt: skip
        with caplog.at_level(logging.INFO):
            if run == "fit":
                fit_run([HooksCallback([hook])])
            else:
                loop_run(lambda model, hook=hook: [hook])
        outputs[run] = [
            re.sub(r"[\d.]+ steps/sec|ETA [^,]*", "", r.getMessage())
            for r in caplog.records
            if "/6" in r.getMessage()
        ]
    assert outputs["fit"] == outputs["loop"]
    assert "6/6" in outputs["fit"][-1]


def test_profiler_hook_traces_under_fit(tmp_path):
    fit_run([HooksCallback([ProfilerHook(save_steps=3, output_dir=str(tmp_path))])], epochs=2)
    assert glob.glob(str(tmp_path / "plugins" / "profile" / "*" / "*.xplane.pb"))


def test_request_stop_stops_fit_after_the_batch():
    class StopAfterTwo(monsession.SessionRunHook):
        def after_run(self, run_context, run_values):
            if run_context.global_step_after() == 2:
                run_context.request_stop()

    model = fit_run([HooksCallback([StopAfterTwo()])], epochs=5)
    assert int(model.optimizer.iterations) == 2


def test_hooks_see_the_lifecycle_steps_and_fetched_logs():
    calls = []

    class Trace(monsession.SessionRunHook):
        def begin(self):
            calls.append(("begin", monsession.get_global_step().name))

        def after_create_session(self, session, coord):
            calls.append(("created", monsession.plugins.read_global_step(session), coord))

        def before_run(self, run_context):
            calls.append(("before", run_context.global_step))
            return monsession.SessionRunArgs({"loss": "loss", "step": monsession.get_global_step()})

        def after_run(self, run_context, run_values):
            results = run_values.results
            calls.append(("after", run_context.global_step_after(), int(results["step"])))
            assert np.isfinite(results["loss"])

        def end(self, session):
            calls.append(("end", monsession.plugins.read_global_step(session)))

    before = monsession.get_or_create_global_step()
    model = fit_run([HooksCallback([Trace()])], epochs=1)
    name = model.optimizer.iterations.value.name
    assert calls == [("begin", name), ("created", 0, None), ("before", 0), ("after", 1, 1),
                     ("before", 1), ("after", 2, 2), ("end", 2)]  # fmt: skip
    assert monsession.get_global_step() is before  # Put back after fit.


def test_steps_per_execution_advances_the_step_by_the_steps_run():
    seen = []

    class Steps(monsession.SessionRunHook):
        def after_run(self, run_context, run_values):
            seen.append((run_context.global_step, run_context.global_step_after()))

    model = fit_run([], epochs=0)
    model.compile(optimizer=model.optimizer, loss="mse", steps_per_execution=2, jit_compile=False)
    fit_run([HooksCallback([Steps()])], epochs=2, model=model)
    assert seen == [(0, 2), (2, 4)]
    assert int(model.optimizer.iterations) == 4


def test_fit_global_step_registers_and_restores():
    model = fit_run([], epochs=0)
    with fit_global_step(model) as step:
        assert monsession.get_global_step() is step is model.optimizer.iterations.value
    assert monsession.get_global_step() is None


def test_bad_hooks_and_feeds_fail_clearly():
    with pytest.raises(TypeError, match=r"HooksCallback: hooks\[1\] is 3, which lacks begin"):
        HooksCallback([StopAtStepHook(last_step=1), 3])

    class Feeds(monsession.SessionRunHook):
        def before_run(self, run_context):
            return monsession.SessionRunArgs(None, feed_dict={"x": 1})

    with pytest.raises(ValueError, match=r"Feeds feeds \['x'\], but model\.fit takes no feeds"):
        fit_run([HooksCallback([Feeds()])], epochs=1)

    class Fetches(monsession.SessionRunHook):
        def before_run(self, run_context):
            return monsession.SessionRunArgs("accuracy")

    with pytest.raises(ValueError, match=r"Fetches fetches 'accuracy', but model\.fit's logs"):
        fit_run([HooksCallback([Fetches()])], epochs=1)


class PlainStepModel(keras.Sequential):
    """Keras's own train_step: it writes no tf.summary."""


def _summary_warnings(caplog):
    return [r.getMessage() for r in caplog.records if "recorded no summary" in r.getMessage()]


def test_summary_saver_warns_once_when_the_step_writes_no_summary(tmp_path, caplog):
    """Under fit with Keras's own train_step the event file would stay empty, silently."""
    model = PlainStepModel([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.SGD(0.01), loss="mse")
    hook = SummarySaverHook(save_steps=2, output_dir=str(tmp_path / "plain"))
    with caplog.at_level(logging.WARNING, logger="tensorflow"):
        fit_run([HooksCallback([hook])], epochs=3, model=model)
    warned = _summary_warnings(caplog)
    assert len(warned) == 1, warned
    assert warned[0].startswith("SummarySaverHook: the step recorded no summary at global step 1")
    assert f"the event file in {tmp_path / 'plain'} gets none" in warned[0]
    assert "Call tf.summary.scalar(...)" in warned[0]
    assert scalars(tmp_path / "plain") == []


def test_summary_saver_does_not_warn_when_the_step_writes_summaries(tmp_path, caplog):
    hook = SummarySaverHook(save_steps=2, output_dir=str(tmp_path / "written"))
    with caplog.at_level(logging.WARNING, logger="tensorflow"):
        fit_run([HooksCallback([hook])], epochs=3)
    assert _summary_warnings(caplog) == []
    assert scalars(tmp_path / "written") != []
