"""`ProfilerHook`: Chrome-trace timelines in graph mode, TF2 profiles in eager mode."""

from __future__ import annotations

import json
import logging
import os
import time

import pytest
import tensorflow as tf
from debug_testing import STABLE_LR, RequestRecorder, eager_program, graph_program
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorflow.tsl.profiler.protobuf import xplane_pb2

import monsession
from monsession_hooks_debug import ProfilerHook


def _timelines(directory):
    return sorted(name for name in os.listdir(directory) if name.startswith("timeline-"))


def _graph_profile(api, hook_class, directory, runs, **kwargs):
    """Runs the stable graph program under `api` with a profiler hook."""
    with tf.Graph().as_default():
        program = graph_program(lr=STABLE_LR)
        hook = hook_class(output_dir=str(directory), **kwargs)
        seen = []
        with api.SingularMonitoredSession(hooks=[hook]) as sess:
            for _ in range(runs):
                sess.run(program.step)
                seen.append(_timelines(directory))
        if api is not monsession:  # TensorFlow's hook does not flush; ours does in end().
            tf.compat.v1.summary.FileWriterCache.get(str(directory)).flush()
    return seen


@pytest.mark.parametrize(
    ("kwargs", "error", "pattern"),
    [
        (
            {"save_steps": 2, "save_secs": 10},
            ValueError,
            "exactly one of save_steps and save_secs must be given, not both",
        ),
        ({}, ValueError, "exactly one of save_steps and save_secs must be given; got"),
        (
            {"save_steps": 0},
            ValueError,
            "invalid save_steps=0; expected a positive int number of steps",
        ),
        ({"save_steps": -1}, ValueError, "invalid save_steps=-1; expected a positive int"),
        ({"save_steps": "5"}, TypeError, "invalid save_steps='5' of type str; expected"),
        ({"save_steps": True}, TypeError, "invalid save_steps=True of type bool; expected"),
        (
            {"save_secs": 0},
            ValueError,
            "invalid save_secs=0; expected a positive number of seconds",
        ),
        ({"save_secs": "5"}, TypeError, "invalid save_secs='5' of type str; expected"),
        (
            {"save_steps": 1, "trace_steps": 0},
            ValueError,
            "invalid trace_steps=0; expected a positive int",
        ),
        (
            {"save_steps": 1, "trace_steps": 1.0},
            TypeError,
            "invalid trace_steps=1.0 of type float; expected",
        ),
        (
            {"save_steps": 1, "output_dir": "/proc/self"},
            PermissionError,
            "cannot write to output_dir '/proc/self'",
        ),
        (
            {"save_steps": 1, "show_dataflow": "False"},
            TypeError,
            "show_dataflow must be a bool, got 'False' of type str",
        ),
        (
            {"save_steps": 1, "show_memory": None},
            TypeError,
            "show_memory must be a bool, got None of type NoneType",
        ),
    ],
)
def test_bad_arguments(kwargs, error, pattern):
    with pytest.raises(error, match="^ProfilerHook: " + pattern):
        ProfilerHook(**kwargs)


def test_output_dir_that_is_a_file(tmp_path):
    path = tmp_path / "a-file"
    path.write_text("")
    with pytest.raises(ValueError, match=r"^ProfilerHook: output_dir '.*a-file' is a file"):
        ProfilerHook(save_steps=1, output_dir=str(path))


def test_graph_needs_a_global_step():
    with tf.Graph().as_default():
        with pytest.raises(RuntimeError, match="Global step should be created to use ProfilerHook"):
            ProfilerHook(save_steps=1).begin()


def test_graph_save_steps_side_by_side_with_tensorflow(tmp_path):
    ours = _graph_profile(monsession, ProfilerHook, tmp_path / "ours", 5, save_steps=2)
    theirs = _graph_profile(
        tf.compat.v1.train, tf.compat.v1.train.ProfilerHook, tmp_path / "tf", 5, save_steps=2
    )
    assert ours == theirs
    assert ours[-1] == ["timeline-2.json", "timeline-4.json"]
    assert ours[0] == []  # The first step is never traced.


def test_graph_timelines_are_chrome_traces_with_op_events(tmp_path):
    _graph_profile(monsession, ProfilerHook, tmp_path, 2, save_steps=1, show_memory=True)
    with open(tmp_path / "timeline-2.json") as handle:
        trace = json.load(handle)
    events = trace["traceEvents"]
    ops = {event["args"]["op"] for event in events if event.get("ph") == "X"}
    assert {"ResourceApplyGradientDescent", "AssignAddVariableOp"} <= ops
    processes = {e["args"]["name"] for e in events if e.get("name") == "process_name"}
    assert any("/device:CPU:0 Compute" in name for name in processes)


def test_graph_run_metadata_reaches_tensorboard(tmp_path):
    _graph_profile(monsession, ProfilerHook, tmp_path, 4, save_steps=3)
    accumulator = EventAccumulator(str(tmp_path))
    accumulator.Reload()
    assert accumulator.Tags()["run_metadata"] == ["step_3"]
    metadata = accumulator.RunMetadata("step_3")
    assert metadata.step_stats.dev_stats


def test_graph_save_secs(tmp_path, monkeypatch):
    now = [1000.0]
    monkeypatch.setattr(time, "time", lambda: now[0])
    with tf.Graph().as_default():
        program = graph_program(lr=STABLE_LR)
        hook = ProfilerHook(save_secs=2, output_dir=str(tmp_path))
        with monsession.SingularMonitoredSession(hooks=[hook]) as sess:
            sess.run(program.step)
            assert _timelines(tmp_path) == []
            now[0] += 2.5
            sess.run(program.step)
            assert _timelines(tmp_path) == ["timeline-2.json"]
            now[0] += 1.0
            sess.run(program.step)
            assert _timelines(tmp_path) == ["timeline-2.json"]
            now[0] += 1.5
            sess.run(program.step)
            assert _timelines(tmp_path) == ["timeline-2.json", "timeline-4.json"]


def _xplanes(directory):
    root = directory / "plugins" / "profile"
    if not root.exists():
        return []
    return sorted(root.glob("*/*.xplane.pb"))


def test_eager_captures_a_tensorboard_profile(tmp_path):
    program = eager_program(lr=STABLE_LR)
    hook = RequestRecorder(ProfilerHook(save_steps=3, output_dir=str(tmp_path), trace_steps=2))
    with monsession.MonitoredSession(hooks=[hook]) as sess:
        for run in range(1, 5):
            sess.run(program.step)
            if run < 4:  # The trace covers steps 3 and 4, and is saved after step 4.
                assert _xplanes(tmp_path) == []
    assert hook.requests == [None] * 4  # No fetch: eager profiling never syncs the step.
    [xplane] = _xplanes(tmp_path)  # plugins/profile/<run>/<host>.xplane.pb
    space = xplane_pb2.XSpace()
    space.ParseFromString(xplane.read_bytes())
    names = {metadata.name for plane in space.planes for metadata in plane.event_metadata.values()}
    assert "train_step" in names
    # An event file without values: TensorBoard lists the directory as a run.
    (events,) = tmp_path.glob("events.out.tfevents.*")
    records = tf.compat.v1.train.summary_iterator(str(events))
    assert [event.WhichOneof("what") for event in records] == ["file_version"]


def test_eager_first_step_is_not_traced_and_end_stops_an_open_trace(tmp_path):
    program = eager_program(lr=STABLE_LR)
    with monsession.MonitoredSession(
        hooks=[ProfilerHook(save_steps=1, output_dir=str(tmp_path / "one"))]
    ) as sess:
        sess.run(program.step)
    assert _xplanes(tmp_path / "one") == []

    with monsession.MonitoredSession(
        hooks=[ProfilerHook(save_steps=1, output_dir=str(tmp_path / "open"), trace_steps=50)]
    ) as sess:
        for _ in range(3):
            sess.run(program.step)
    assert len(_xplanes(tmp_path / "open")) == 1
    # The profiler is free again.
    tf.profiler.experimental.start(str(tmp_path / "after"))
    tf.profiler.experimental.stop()


def test_eager_needs_a_global_step():
    tf.compat.v1.reset_default_graph()
    with pytest.raises(RuntimeError, match="Global step should be created to use ProfilerHook"):
        ProfilerHook(save_steps=1).begin()


def test_graph_asks_only_for_trace_options_and_only_on_traced_steps(tmp_path):
    with tf.Graph().as_default():
        program = graph_program(lr=STABLE_LR)
        recorder = RequestRecorder(ProfilerHook(save_steps=2, output_dir=str(tmp_path)))
        with monsession.SingularMonitoredSession(hooks=[recorder]) as sess:
            for _ in range(5):
                sess.run(program.step)
    traced = [index + 1 for index, request in enumerate(recorder.requests) if request is not None]
    assert traced == [2, 4]
    for run in traced:
        request = recorder.requests[run - 1]
        assert request.fetches is None  # The global step comes from the step service.
        assert request.options.trace_level == tf.compat.v1.RunOptions.FULL_TRACE
    assert _timelines(tmp_path) == ["timeline-2.json", "timeline-4.json"]


def test_eager_skips_a_trigger_while_another_profiler_runs(tmp_path, caplog):
    program = eager_program(lr=STABLE_LR)
    tf.profiler.experimental.start(str(tmp_path / "other"))
    try:
        with caplog.at_level(logging.WARNING, logger="tensorflow"):
            with monsession.MonitoredSession(
                hooks=[ProfilerHook(save_steps=2, output_dir=str(tmp_path / "ours"))]
            ) as sess:
                for _ in range(3):
                    sess.run(program.step)
    finally:
        tf.profiler.experimental.stop()
    # Skipped at step 2 and not retried at step 3.
    assert caplog.text.count("another profiler session is running") == 1
    assert "skipping the trace at step 2" in caplog.text
    assert _xplanes(tmp_path / "ours") == []


class _SaveAt(monsession.SessionRunHook):
    """Writes the hooks' state and a graph-mode checkpoint after the run reaching `step`."""

    def __init__(self, directory, step):
        self.directory, self.step = directory, step

    def begin(self):
        self.saver = tf.compat.v1.train.Saver()

    def use_hook_state(self, hook_state):
        self.hook_state = hook_state

    def after_run(self, run_context, run_values):
        step = run_context.global_step_after()
        if step == self.step:
            prefix = os.path.join(self.directory, f"model.ckpt-{step}")
            self.hook_state.save(prefix)
            self.saver.save(run_context.session, prefix)


def test_graph_traces_continue_their_schedule_after_a_restart(tmp_path):
    """Before, the profiler had no state: a process restarted from step 7
    traced at 12 (five steps after its first), not at 10 as an uninterrupted run."""
    traces, checkpoints = tmp_path / "traces", str(tmp_path / "checkpoints")
    for runs in (7, 5):  # The second process restarts from the checkpoint of step 7.
        with tf.Graph().as_default():
            program = graph_program(lr=STABLE_LR)
            hooks = [ProfilerHook(save_steps=5, output_dir=str(traces)), _SaveAt(checkpoints, 7)]
            creator = monsession.ChiefSessionCreator(checkpoint_dir=checkpoints)
            with monsession.MonitoredSession(creator, hooks=hooks) as sess:
                for _ in range(runs):
                    sess.run(program.step)
    assert tf.train.load_checkpoint(checkpoints).get_tensor("global_step") == 7
    assert _timelines(traces) == ["timeline-10.json", "timeline-5.json"]
