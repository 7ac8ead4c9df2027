"""`HookTimingHook`: which hook slows training, in both modes."""

from __future__ import annotations

import logging
import types

import pytest
import tensorflow as tf
from debug_testing import STABLE_LR, make_program, mode_context

import monsession
from monsession_hooks_debug import HookTimingHook, NanTensorHook


class FakeClock:
    """A `perf_counter` that only moves when a hook says it spent time."""

    def __init__(self):
        self.now = 1000.0

    def perf_counter(self):
        return self.now


class SlowHook(monsession.SessionRunHook):
    """Spends `secs` of the fake clock in after_run; says how often it was called."""

    def __init__(self, clock, secs):
        self.clock = clock
        self.secs = secs
        self.after_runs = 0

    def after_run(self, run_context, run_values):
        self.after_runs += 1
        self.clock.now += self.secs


@pytest.mark.parametrize("mode", ["graph", "eager"])
def test_wrap_times_each_hook_and_reports_the_slow_one(mode, caplog, monkeypatch):
    from monsession_hooks_debug import _hook_timing

    clock = FakeClock()
    monkeypatch.setattr(
        _hook_timing, "time", types.SimpleNamespace(perf_counter=clock.perf_counter)
    )
    with mode_context(mode):
        program = make_program(mode, lr=STABLE_LR)
        slow = SlowHook(clock, 0.25)
        nan = NanTensorHook(program.loss)
        hooks = HookTimingHook.wrap([nan, slow], every_n_steps=2)
        reporter = hooks[-1]
        assert isinstance(reporter, HookTimingHook)
        with caplog.at_level(logging.INFO, logger="tensorflow"):
            with monsession.MonitoredSession(hooks=hooks) as sess:
                for _ in range(5):
                    sess.run(program.step)
    timings = reporter.timings()
    assert list(timings) == ["NanTensorHook", "SlowHook"]
    assert slow.after_runs == 5
    for label in timings:
        assert timings[label]["begin"].calls == 1
        assert timings[label]["after_create_session"].calls == 1
        assert timings[label]["after_run"].calls == 5
        assert timings[label]["end"].calls == 1
    assert timings["NanTensorHook"]["before_run"].calls == 5
    assert timings["SlowHook"]["before_run"].calls == 0  # Not overridden: never called.
    slow_after_run = timings["SlowHook"]["after_run"]
    assert slow_after_run.total_secs == 1.25  # Exactly what the hook spent: 5 x 0.25.
    assert slow_after_run.max_secs == 0.25
    assert timings["NanTensorHook"]["after_run"].total_secs == 0.0
    report = reporter.report()
    lines = report.splitlines()
    assert lines[0] == "Hook timing after 5 steps:"
    assert lines[2].startswith("SlowHook")  # Slowest hook first.
    # Logged after steps 2 and 4, and at the end.
    logged = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Hook timing")]
    assert [m.splitlines()[0] for m in logged] == [
        "Hook timing after 2 steps:",
        "Hook timing after 4 steps:",
        "Hook timing after 5 steps:",
    ]


def test_proxies_forward_requests_results_and_attributes():
    class Fetcher(monsession.SessionRunHook):
        marker = "mine"

        def __init__(self, tensor):
            self.tensor = tensor
            self.results = []

        def before_run(self, run_context):
            return monsession.SessionRunArgs(self.tensor)

        def after_run(self, run_context, run_values):
            self.results.append(run_values.results)
            run_context.request_stop()

    with tf.Graph().as_default():
        fetcher = Fetcher(tf.constant(7.0))
        one = tf.constant(1.0)
        timed, reporter = HookTimingHook.wrap([fetcher])
        assert timed.marker == "mine" and timed.wrapped_hook is fetcher
        with monsession.MonitoredSession(hooks=[timed, reporter]) as sess:
            sess.run(one)
            assert sess.should_stop()
    assert fetcher.results == [7.0]


def test_repeated_classes_get_numbered_labels():
    reporter = HookTimingHook()
    for _ in range(3):
        reporter.time(SlowHook(FakeClock(), 0))
    assert list(reporter.timings()) == ["SlowHook", "SlowHook#2", "SlowHook#3"]


def test_bad_arguments():
    expected = "; expected a positive int number of steps"
    with pytest.raises(ValueError, match="^HookTimingHook: invalid every_n_steps=0" + expected):
        HookTimingHook(every_n_steps=0)
    with pytest.raises(
        TypeError, match=r"^HookTimingHook: invalid every_n_steps=True of type bool"
    ):
        HookTimingHook.wrap([], every_n_steps=True)
    with pytest.raises(TypeError, match=r"^HookTimingHook: invalid every_n_steps='10' of type str"):
        HookTimingHook(every_n_steps="10")
    with pytest.raises(TypeError, match=r"takes a SessionRunHook.*lacks"):
        HookTimingHook().time(object())


def test_a_failing_hook_is_still_timed():
    class Broken(monsession.SessionRunHook):
        def begin(self):
            raise RuntimeError("broken")

    reporter = HookTimingHook()
    timed = reporter.time(Broken())
    with pytest.raises(RuntimeError, match="broken"):
        timed.begin()
    assert reporter.timings()["Broken"]["begin"].calls == 1


class IdleHook(monsession.SessionRunHook):
    """Overrides no per-step method."""

    def __init__(self):
        self.begun = 0

    def begin(self):
        self.begun += 1


@pytest.mark.parametrize("mode", ["graph", "eager"])
def test_a_timed_idle_hook_stays_idle_per_step(mode):
    with mode_context(mode):
        program = make_program(mode, lr=STABLE_LR)
        idle = IdleHook()
        timed, reporter = HookTimingHook.wrap([idle])
        with monsession.MonitoredSession(hooks=[timed, reporter]) as sess:
            for _ in range(3):
                sess.run(program.step)
    timings = reporter.timings()["IdleHook"]
    assert idle.begun == 1 and timings["begin"].calls == 1
    assert timings["before_run"].calls == 0
    assert timings["after_run"].calls == 0
