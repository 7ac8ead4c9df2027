"""StepCounterHook in both modes, side by side with tf.compat.v1.train.StepCounterHook."""

from __future__ import annotations

import contextlib
import logging
import os
import re
import subprocess
import sys
import time

import pytest
import tensorflow as tf
from summary_testing import (
    FakeClock,
    eager_program,
    graph_program,
    increment_after_read,
    raw_events,
    steps_of,
    summaries,
    tag_steps,
)
from tensorflow.python.platform import tf_logging

import monsession
from monsession_hooks_summary import StepCounterHook, SummarySaverHook

TF = tf.compat.v1.train


def _run_graph(api, hook, steps, clock=None, train_op=None):
    with api.MonitoredSession(hooks=[hook]) as session:
        for _ in range(steps):
            if clock is not None:
                clock.advance(0.5)
            session.run(train_op)


@pytest.mark.parametrize("api_name", ["monsession", "tensorflow"])
def test_every_n_steps_graph_matches_tensorflow(tmp_path, monkeypatch, api_name):
    clock = FakeClock()
    monkeypatch.setattr(time, "time", clock)
    api, hooks = (monsession, monsession.hooks) if api_name == "monsession" else (TF, TF)
    with tf.Graph().as_default():
        program = graph_program()
        hook = hooks.StepCounterHook(every_n_steps=3, output_dir=str(tmp_path))
        _run_graph(api, hook, 10, clock, program.train_op)
        tf.compat.v1.summary.FileWriterCache.get(str(tmp_path)).flush()
    # TensorFlow's timeline: the first trigger (step 1) only starts the clock.
    assert summaries(tmp_path) == [
        (4, "global_step/sec", 2.0),
        (7, "global_step/sec", 2.0),
        (10, "global_step/sec", 2.0),
    ]


def test_every_n_secs_graph_matches_tensorflow(tmp_path, monkeypatch):
    results = []
    for api, name in ((monsession, "ours"), (TF, "tf")):
        clock = FakeClock()
        monkeypatch.setattr(time, "time", clock)
        with tf.Graph().as_default():
            program = graph_program()
            hook = api.StepCounterHook if api is TF else monsession.hooks.StepCounterHook
            logdir = str(tmp_path / name)
            _run_graph(
                api,
                hook(every_n_steps=None, every_n_secs=1.2, output_dir=logdir),
                9,
                clock,
                program.train_op,
            )
            tf.compat.v1.summary.FileWriterCache.get(logdir).flush()
        results.append(summaries(logdir))
    # 0.5 s per step, every 1.2 s: triggers at steps 1 (clock start), 4 and 7.
    assert results[0] == results[1] == [(4, "global_step/sec", 2.0), (7, "global_step/sec", 2.0)]


def test_tag_follows_the_global_step_name(tmp_path):
    with tf.Graph().as_default():
        with tf.compat.v1.variable_scope("bar"):
            tf.compat.v1.get_variable(
                "foo",
                initializer=tf.constant(0, tf.int64),
                trainable=False,
                collections=[
                    tf.compat.v1.GraphKeys.GLOBAL_STEP,
                    tf.compat.v1.GraphKeys.GLOBAL_VARIABLES,
                ],
            )
        train_op = increment_after_read(monsession.get_global_step())
        hook = StepCounterHook(every_n_steps=1, output_dir=str(tmp_path))
        _run_graph(monsession, hook, 2, train_op=train_op)
    assert [(s, tag) for s, tag, _ in summaries(tmp_path)] == [(2, "bar/foo/sec")]


def test_eager_every_n_steps(tmp_path, monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(time, "time", clock)
    program = eager_program()
    with monsession.MonitoredSession(
        hooks=[StepCounterHook(every_n_steps=3, output_dir=str(tmp_path))]
    ) as session:
        for _ in range(10):
            clock.advance(0.25)
            session.run(program.step)
    assert summaries(tmp_path) == [
        (4, "global_step/sec", 4.0),
        (7, "global_step/sec", 4.0),
        (10, "global_step/sec", 4.0),
    ]


@pytest.mark.parametrize("mode", ["graph", "eager"])
def test_a_run_shorter_than_the_period_gets_its_rate_at_the_end(tmp_path, monkeypatch, mode):
    clock = FakeClock()
    monkeypatch.setattr(time, "time", clock)
    hook = StepCounterHook(every_n_steps=100, output_dir=str(tmp_path))
    with tf.Graph().as_default() if mode == "graph" else contextlib.nullcontext():
        program = graph_program() if mode == "graph" else eager_program()
        step = program.train_op if mode == "graph" else program.step
        with monsession.MonitoredSession(hooks=[hook]) as session:
            for _ in range(5):
                clock.advance(0.5)
                session.run(step)
        tf.compat.v1.summary.FileWriterCache.clear()
    # The first step starts the clock; four more steps in two seconds.
    assert summaries(tmp_path) == [(5, "global_step/sec", 2.0)]
    # Off the schedule: the timer keeps its trigger at step 1, so a restart
    # from a checkpoint saved after this rate writes the next at step 101.
    assert hook.state_dict()["timer"]["last_triggered_step"] == 1


def test_eager_rate_is_written_on_steps_the_summary_saver_skips(tmp_path):
    program = eager_program()
    hooks = [
        StepCounterHook(every_n_steps=2, output_dir=str(tmp_path)),
        SummarySaverHook(save_steps=100, output_dir=str(tmp_path)),
    ]
    with monsession.MonitoredSession(hooks=hooks) as session:
        for _ in range(6):
            session.run(program.step)
    assert steps_of(tmp_path, "loss") == [1]
    assert steps_of(tmp_path, "global_step/sec") == [3, 5]
    assert program.traces == [1]


def test_eager_rate_is_written_as_tf_summary_scalar_writes_it(tmp_path):
    program = eager_program()
    with monsession.MonitoredSession(
        hooks=[StepCounterHook(every_n_steps=1, output_dir=str(tmp_path / "hook"))]
    ) as session:
        for _ in range(2):
            session.run(program.step)
    writer = tf.summary.create_file_writer(str(tmp_path / "reference"))
    with writer.as_default():
        tf.summary.scalar("global_step/sec", 2.5, step=2)
    writer.close()

    def rate_values(logdir):
        return [
            value
            for event in raw_events(logdir)
            if event.HasField("summary")
            for value in event.summary.value
            if value.tag == "global_step/sec"
        ]

    [written], [reference] = rate_values(tmp_path / "hook"), rate_values(tmp_path / "reference")
    assert written.metadata == reference.metadata
    assert written.tensor.dtype == reference.tensor.dtype
    assert written.tensor.tensor_shape == reference.tensor.tensor_shape
    assert tag_steps(tmp_path / "hook") == {"global_step/sec": [2]}


def test_eager_hooks_accept_a_noop_writer(tmp_path, caplog):
    program = eager_program()
    noop = tf.summary.create_noop_writer()
    hooks = [
        StepCounterHook(every_n_steps=1, summary_writer=noop),
        SummarySaverHook(save_steps=1, summary_writer=noop),
    ]
    with caplog.at_level(logging.INFO, logger="tensorflow"):
        with monsession.MonitoredSession(hooks=hooks) as session:
            for _ in range(3):
                session.run(program.step)
    rates = [r for r in caplog.records if r.getMessage().startswith("global_step/sec")]
    assert len(rates) == 2


@pytest.fixture
def step_warnings(monkeypatch):
    """The "not increased" warnings the hook logs, as (current, previous) values.

    Patches `tf_logging.log_first_n` as TensorFlow's own StepCounterHook test
    does, so the hook's warnings are seen where TensorFlow's are.
    """
    warnings = []

    def spy(level, msg, n, *args):
        if "has not been increased" in msg:
            warnings.append(args)

    monkeypatch.setattr(tf_logging, "log_first_n", spy)
    return warnings


def test_graph_warns_when_the_global_step_does_not_advance(step_warnings):
    """TensorFlow's check: the step before each run against the previous one."""
    with tf.Graph().as_default():
        monsession.get_or_create_global_step()
        stuck = tf.no_op()
        with monsession.MonitoredSession(hooks=[StepCounterHook(every_n_steps=1)]) as session:
            for _ in range(3):
                session.run(stuck)
    assert step_warnings == [(0, 0), (0, 0)]


class FetchGlobalStep(monsession.SessionRunHook):
    """Makes the eager session read the device on every step."""

    def before_run(self, run_context):
        return monsession.SessionRunArgs(monsession.get_global_step())


def test_eager_warns_once_the_session_reads_a_step_that_did_not_advance(step_warnings, caplog):
    """Eager mode counts steps on the host; a device read reveals a stuck step."""
    tf.compat.v1.reset_default_graph()
    monsession.get_or_create_global_step()
    hooks = [FetchGlobalStep(), StepCounterHook(every_n_steps=1)]
    with caplog.at_level(logging.WARNING, logger="monsession"):
        with monsession.MonitoredSession(hooks=hooks) as session:
            for _ in range(3):
                session.run(tf.function(lambda: tf.constant(0)))
    assert any("exactly one per run" in r.getMessage() for r in caplog.records)
    assert step_warnings == [(0, 0), (0, 0)]


@pytest.mark.parametrize("mode", ["graph", "eager"])
def test_no_warning_while_the_global_step_advances(mode, step_warnings):
    if mode == "graph":
        with tf.Graph().as_default():
            program = graph_program()
            with monsession.MonitoredSession(hooks=[StepCounterHook(every_n_steps=1)]) as s:
                for _ in range(3):
                    s.run(program.train_op)
    else:
        program = eager_program()
        with monsession.MonitoredSession(hooks=[StepCounterHook(every_n_steps=1)]) as s:
            for _ in range(3):
                s.run(program.step)
    assert step_warnings == []


def test_without_writer_it_only_logs(tmp_path, monkeypatch, caplog):
    clock = FakeClock()
    monkeypatch.setattr(time, "time", clock)
    program = eager_program()
    with caplog.at_level(logging.INFO, logger="tensorflow"):
        with monsession.MonitoredSession(hooks=[StepCounterHook(every_n_steps=2)]) as session:
            for _ in range(3):
                clock.advance(0.5)
                session.run(program.step)
    messages = [r.getMessage() for r in caplog.records if r.name == "tensorflow"]
    assert [m for m in messages if "global_step" in m] == ["global_step/sec: 2"]
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"every_n_steps": None}, "exactly one of every_n_steps and every_n_secs"),
        (
            {"every_n_steps": 3, "every_n_secs": 1.0},
            "exactly one of every_n_steps and every_n_secs",
        ),
        (
            {"every_n_steps": -3},
            "invalid every_n_steps=-3; expected a positive int number of steps",
        ),
    ],
)
def test_bad_arguments_raise_value_error(kwargs, match):
    with pytest.raises(ValueError, match=match):
        StepCounterHook(**kwargs)


def test_missing_global_step_is_a_runtime_error():
    with tf.Graph().as_default():
        with pytest.raises(RuntimeError, match="created to use StepCounterHook"):
            StepCounterHook().begin()


def _racing_graph_program():
    """A training program whose global-step increment races TensorFlow's read tensor.

    The increment does not wait for the update, so TensorFlow runs the
    global-step read fetched with the step before or after it (measured: in
    about one run in five). A check based on that fetched value sees the
    same value twice in a row now and then and warns; the step service
    knows the step either way.
    """
    global_step = tf.compat.v1.train.get_or_create_global_step()
    weight = tf.compat.v1.get_variable("w", initializer=tf.ones([20, 20]))
    loss = tf.reduce_sum(tf.matmul(weight, weight))
    update = tf.compat.v1.train.GradientDescentOptimizer(1e-9).minimize(loss)
    return tf.group(update, global_step.assign_add(1))


def test_a_normally_training_graph_never_warns(step_warnings):
    for _ in range(5):
        with tf.Graph().as_default():
            train_op = _racing_graph_program()
            hook = StepCounterHook(every_n_steps=5)
            with monsession.MonitoredSession(hooks=[hook]) as session:
                for _ in range(20):
                    session.run(train_op)
    assert step_warnings == []


@pytest.mark.parametrize("api_name", ["monsession", "tensorflow"])
def test_a_stuck_graph_warns_with_the_default_schedule(step_warnings, api_name):
    api, hook = (
        (monsession, StepCounterHook) if api_name == "monsession" else (TF, TF.StepCounterHook)
    )
    with tf.Graph().as_default():
        monsession.get_or_create_global_step()
        stuck = tf.no_op()
        with api.MonitoredSession(hooks=[hook()]) as session:
            for _ in range(6):
                session.run(stuck)
    assert step_warnings
    assert set(step_warnings) == {(0, 0)}


_VERBOSITY_SCRIPT = """
import tensorflow as tf
import monsession
from monsession.hooks import StepCounterHook

tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.INFO)
global_step = monsession.get_or_create_global_step()
step = tf.function(lambda: global_step.assign_add(1))
with monsession.MonitoredSession(hooks=[StepCounterHook(every_n_steps=2)]) as session:
    for _ in range(5):
        session.run(step)
"""


def test_set_verbosity_info_alone_shows_the_rate_on_stderr():
    """What a TF1 script does to see TensorFlow's hooks: nothing else is configured."""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    result = subprocess.run(
        [sys.executable, "-c", _VERBOSITY_SCRIPT],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    rates = re.findall(r"^INFO:tensorflow:global_step/sec: [\d.e+-]+$", result.stderr, re.M)
    assert len(rates) == 2, result.stderr  # Global steps 3 and 5.
