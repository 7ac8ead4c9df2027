"""Every first-party hook under TensorFlow's own `MonitoredTrainingSession` (graph mode).

A monsession hook is still a `tf.compat.v1.train.SessionRunHook`: driven by
TensorFlow's session, with TensorFlow's `StopAtStepHook(last_step=20)` beside
it, it does what TensorFlow's hook of the same name does on the same program
(the step read through the session, no fused steps, no hook state). Each row
runs the program once with TensorFlow's hook and once with ours and compares
what a user sees: checkpoints, event files, log lines, the step training
stopped at. Hooks with no TensorFlow twin run and are checked on their job.
"""

from __future__ import annotations

import dataclasses
import glob
import io
import logging
import os
import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import tensorflow as tf
from tensorboard.backend.event_processing import event_file_loader
from tensorboard.util import tensor_util

import monsession
import monsession.testing
from monsession_hooks_debug import HookTimingHook
from monsession_hooks_logging import ProgressBarHook

TF = tf.compat.v1.train
LAST_STEP = 20


@dataclasses.dataclass
class Program:
    global_step: Any
    weight: Any
    loss: Any
    scale: Any
    step_after: Any  # The global step after the run's update.


def _program(nan_from: int | None = None) -> Program:
    """w <- w - 0.1 * d(scale * w**2)/dw from w = 4; the loss is NaN from step `nan_from` on."""
    global_step = tf.compat.v1.train.get_or_create_global_step()
    weight = tf.compat.v1.get_variable("w", initializer=4.0)
    scale = tf.compat.v1.placeholder_with_default(1.0, [], name="scale")
    loss = tf.multiply(scale, tf.square(weight), name="loss")
    if nan_from is not None:
        loss = tf.where(global_step >= nan_from, np.float32("nan"), loss, name="nan_loss")
    tf.compat.v1.summary.scalar("loss", loss)
    # TensorFlow's hooks fetch the global step's read tensor with each step:
    # reading it before the increment makes their step deterministic.
    read = monsession.testing.global_step_read_tensor()
    with tf.control_dependencies([loss, read]):
        train = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(
            loss, global_step=global_step
        )
    with tf.control_dependencies([train]):
        step_after = global_step.read_value()
    return Program(global_step, weight, loss, scale, step_after)


@dataclasses.dataclass
class Run:
    directory: str
    hook: Any
    last_step: int  # The global step after the last run.
    error: str | None  # The TensorFlow error class caught, if any.
    lines: list[str]  # The "tensorflow" logger's messages.


def _run(
    make: Callable[[Any, Program, str], Any],
    api: Any,
    directory: str,
    caplog: Any,
    nan_from: int | None = None,
) -> Run:
    """Runs the program under TensorFlow's MonitoredTrainingSession with the hook `make` gives."""
    os.makedirs(directory)
    caplog.clear()
    last_step, error = 0, None
    with tf.Graph().as_default(), caplog.at_level(logging.INFO, logger="tensorflow"):
        program = _program(nan_from)
        hook = make(api, program, directory)
        hooks = hook if isinstance(hook, list) else [hook]
        try:
            with TF.MonitoredTrainingSession(
                hooks=[*hooks, TF.StopAtStepHook(last_step=LAST_STEP)],
                save_checkpoint_secs=None,
                save_summaries_steps=None,
                log_step_count_steps=None,
            ) as session:
                while not session.should_stop():
                    last_step = int(session.run(program.step_after))
        except TF.NanLossDuringTrainingError:
            # TensorFlow's class: monsession's NanLossDuringTrainingError derives from it.
            error = "NanLossDuringTrainingError"
        tf.compat.v1.summary.FileWriterCache.clear()  # Flushes and closes the event files.
    lines = [r.getMessage() for r in caplog.records if r.name == "tensorflow"]
    return Run(directory, hook, last_step, error, lines)


def _checkpoints(run: Run) -> Any:
    state = tf.train.get_checkpoint_state(run.directory)
    steps = [int(path.rsplit("-", 1)[1]) for path in state.all_model_checkpoint_paths]
    latest = tf.train.load_checkpoint(state.model_checkpoint_path)
    return steps, int(latest.get_tensor("global_step")), round(float(latest.get_tensor("w")), 5)


def _summaries(run: Run) -> list[tuple[int, str, float]]:
    """(step, tag, value) of every summary value, read with TensorBoard's reader."""
    found = []
    for path in sorted(glob.glob(os.path.join(run.directory, "events.out.tfevents.*"))):
        for event in event_file_loader.LegacyEventFileLoader(path).Load():
            for value in event.summary.value:
                number = (
                    value.simple_value
                    if value.HasField("simple_value")
                    else float(tensor_util.make_ndarray(value.tensor))
                )
                found.append((event.step, value.tag, round(number, 4)))
    return found


def _summary_steps(run: Run) -> list[tuple[int, str]]:
    return [(step, tag) for step, tag, _ in _summaries(run)]


def _log_lines(run: Run) -> list[str]:
    """The hook's lines without their wall-clock part (``" (0.003 sec)"``)."""
    return [re.sub(r" \(\d+\.\d+ sec\)$", "", line) for line in run.lines if " = " in line]


def _timelines(run: Run) -> list[str]:
    return sorted(name for name in os.listdir(run.directory) if name.startswith("timeline-"))


@dataclasses.dataclass
class Row:
    make: Callable[[Any, Program, str], Any]  # (api, program, directory) -> hook(s)
    observe: Callable[[Run], Any]  # What a user sees.
    nan_from: int | None = None


# The name of a row is the hook's; TensorFlow's hook of that name is the reference.
SIDE_BY_SIDE = {
    "CheckpointSaverHook": Row(
        lambda api, p, d: api.CheckpointSaverHook(d, save_steps=5), _checkpoints
    ),
    "SummarySaverHook": Row(
        lambda api, p, d: api.SummarySaverHook(
            save_steps=5, output_dir=d, summary_op=tf.compat.v1.summary.merge_all()
        ),
        _summaries,
    ),
    "StepCounterHook": Row(
        lambda api, p, d: api.StepCounterHook(every_n_steps=5, output_dir=d), _summary_steps
    ),
    "LoggingTensorHook": Row(
        lambda api, p, d: api.LoggingTensorHook({"loss": p.loss}, every_n_iter=5), _log_lines
    ),
    "NanTensorHook-fail": Row(
        lambda api, p, d: api.NanTensorHook(p.loss), lambda r: (r.error, r.last_step), nan_from=7
    ),
    "NanTensorHook-stop": Row(
        lambda api, p, d: api.NanTensorHook(p.loss, fail_on_nan_loss=False),
        lambda r: (r.error, r.last_step),
        nan_from=7,
    ),
    "ProfilerHook": Row(lambda api, p, d: api.ProfilerHook(save_steps=5, output_dir=d), _timelines),
    "StopAtStepHook-last_step": Row(
        lambda api, p, d: api.StopAtStepHook(last_step=12), lambda r: r.last_step
    ),
    "StopAtStepHook-num_steps": Row(
        lambda api, p, d: api.StopAtStepHook(num_steps=7), lambda r: r.last_step
    ),
    "GlobalStepWaiterHook": Row(
        lambda api, p, d: api.GlobalStepWaiterHook(wait_until_step=0), lambda r: r.last_step
    ),
    "FeedFnHook": Row(
        lambda api, p, d: [
            api.FeedFnHook(lambda: {p.scale: 0.5}),
            api.FinalOpsHook({"w": p.weight}),
        ],
        lambda r: np.round(r.hook[1].final_ops_values["w"], 5),
    ),
    "FinalOpsHook": Row(
        lambda api, p, d: api.FinalOpsHook(p.loss), lambda r: np.round(r.hook.final_ops_values, 5)
    ),
}


@pytest.mark.parametrize("name", list(SIDE_BY_SIDE))
def test_our_hook_does_what_tensorflows_does_under_tensorflows_session(name, tmp_path, caplog):
    row = SIDE_BY_SIDE[name]
    theirs = _run(row.make, TF, str(tmp_path / "tensorflow"), caplog, row.nan_from)
    ours = _run(row.make, monsession, str(tmp_path / "monsession"), caplog, row.nan_from)
    hook = ours.hook[0] if isinstance(ours.hook, list) else ours.hook
    assert type(hook).__module__.startswith("monsession")
    assert row.observe(ours) == row.observe(theirs)
    assert row.observe(theirs)  # The hook did something to compare.


def test_our_progress_bar_runs_under_tensorflows_session(tmp_path, caplog):
    out = io.StringIO()  # Not a terminal: plain lines on TensorFlow's logger.
    run = _run(
        lambda api, p, d: ProgressBarHook(
            {"loss": p.loss}, every_n_iter=5, last_step=LAST_STEP, file=out, log_every_n_secs=0
        ),
        None,
        str(tmp_path / "bar"),
        caplog,
    )
    assert run.last_step == LAST_STEP
    lines = [line for line in run.lines if line.startswith("step ")]
    # Every 5 runs from the first, and the last step at the end.
    assert [line.split()[1] for line in lines] == ["1/20", "6/20", "11/20", "16/20", "20/20"]
    assert lines[0] == "step 1/20 (5%), loss = 16"
    assert all("loss = " in line for line in lines)


def test_our_hook_timing_runs_under_tensorflows_session(tmp_path, caplog):
    run = _run(
        lambda api, p, d: HookTimingHook.wrap(
            [monsession.LoggingTensorHook({"loss": p.loss}, every_n_iter=5)]
        ),
        None,
        str(tmp_path / "timing"),
        caplog,
    )
    assert run.last_step == LAST_STEP
    timings = run.hook[-1].timings()["LoggingTensorHook"]
    assert (timings["before_run"].calls, timings["after_run"].calls) == (LAST_STEP, LAST_STEP)
    assert [line for line in _log_lines(run) if line.startswith("loss = ")][:1] == ["loss = 16.0"]


def _drive_by_hand(hooks: list[Any], program: Program, context_class: Any, steps: int) -> int:
    """Calls `hooks` around raw `Session.run`s as TensorFlow's hook tests do; the last step."""
    for hook in hooks:
        hook.begin()
    session = tf.compat.v1.Session()
    session.run(tf.compat.v1.global_variables_initializer())
    for hook in hooks:
        hook.after_create_session(session, None)
    last_step = 0
    for _ in range(steps):
        context = context_class(TF.SessionRunArgs(program.step_after), session)
        requests = {index: hook.before_run(context) for index, hook in enumerate(hooks)}
        fetches = {
            i: r.fetches for i, r in requests.items() if r is not None and r.fetches is not None
        }
        results = session.run({"hooks": fetches, "step": program.step_after})
        last_step = int(results["step"])
        for index, hook in enumerate(hooks):
            values = TF.SessionRunValues(
                results["hooks"].get(index), tf.compat.v1.RunOptions(), tf.compat.v1.RunMetadata()
            )
            hook.after_run(context, values)
        if context.stop_requested:
            break
    for hook in hooks:
        hook.end(session)
    session.close()
    tf.compat.v1.summary.FileWriterCache.clear()
    return last_step


CONTEXTS = {"monsession": monsession.SessionRunContext, "tensorflow": TF.SessionRunContext}


@pytest.mark.parametrize("context_class", list(CONTEXTS))
def test_our_hooks_do_what_tensorflows_do_with_a_context_made_by_hand(
    context_class, tmp_path, caplog
):
    """User code (TensorFlow's hook tests, estimator-style loops) building `SessionRunContext`s."""
    seen = {}
    for which, api in [("tensorflow", TF), ("monsession", monsession)]:
        directory = str(tmp_path / which)
        caplog.clear()
        with tf.Graph().as_default(), caplog.at_level(logging.INFO, logger="tensorflow"):
            program = _program()
            tf.compat.v1.add_to_collection(
                tf.compat.v1.GraphKeys.SAVERS, tf.compat.v1.train.Saver()
            )
            hooks = [
                api.CheckpointSaverHook(directory, save_steps=4),
                api.SummarySaverHook(
                    save_steps=4, output_dir=directory, summary_op=tf.compat.v1.summary.merge_all()
                ),
                api.StepCounterHook(every_n_steps=4, output_dir=directory),
                api.LoggingTensorHook({"loss": program.loss}, every_n_iter=4),
                api.StopAtStepHook(last_step=9),
            ]
            context = CONTEXTS[context_class] if which == "monsession" else TF.SessionRunContext
            last_step = _drive_by_hand(hooks, program, context, steps=12)
        run = Run(directory, hooks, last_step, None, [r.getMessage() for r in caplog.records])
        seen[which] = (_checkpoints(run), _summary_steps(run), _log_lines(run), last_step)
    assert seen["monsession"] == seen["tensorflow"]
    checkpoints, summaries, lines, last_step = seen["monsession"]
    assert (checkpoints[0], last_step) == ([0, 4, 8, 9], 9)
    assert summaries and lines[0] == "loss = 16.0", seen
