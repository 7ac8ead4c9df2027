"""The hooks follow the global step through the step service and ask nothing of idle steps."""

from __future__ import annotations

import tensorflow as tf
from summary_testing import eager_program, graph_program, session_start_steps, tag_steps

import monsession
from monsession_hooks_summary import StepCounterHook, SummarySaverHook


class _CountingSession:
    """Forwards to a session and counts the `run` calls a hook makes itself."""

    def __init__(self, session, spy):
        self._session = session
        self._spy = spy

    def run(self, *args, **kwargs):
        self._spy.session_runs += 1
        return self._session.run(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._session, name)


class _Context:
    """A run context whose session counts the hook's own `run` calls."""

    def __init__(self, run_context, spy):
        self._run_context = run_context
        self.session = _CountingSession(run_context.session, spy)

    def __getattr__(self, name):
        return getattr(self._run_context, name)


class Spy(monsession.SessionRunHook):
    """Runs `hook` and records what it asked of every step."""

    def __init__(self, hook):
        self.hook = hook
        self.requests = []
        self.session_runs = 0

    def begin(self):
        self.hook.begin()

    def after_create_session(self, session, coord):
        self.hook.after_create_session(session, coord)

    def before_run(self, run_context):
        request = self.hook.before_run(_Context(run_context, self))
        self.requests.append(request)
        return request

    def after_run(self, run_context, run_values):
        self.hook.after_run(_Context(run_context, self), run_values)

    def end(self, session):
        self.hook.end(session)


def _acting_runs(spy):
    return [run for run, request in enumerate(spy.requests) if request is not None]


def test_eager_hooks_request_nothing_and_read_nothing(tmp_path):
    program = eager_program()
    saver = Spy(SummarySaverHook(save_steps=3, output_dir=str(tmp_path)))
    counter = Spy(StepCounterHook(every_n_steps=4, output_dir=str(tmp_path)))
    with monsession.MonitoredSession(hooks=[counter, saver]) as session:
        for _ in range(12):
            session.run(program.step)
    # Eager summaries are recorded by the step itself and the global step
    # comes from the step service: no step fetches anything for these hooks,
    # and they never run the session themselves.
    assert saver.requests == [None] * 12
    assert counter.requests == [None] * 12
    assert saver.session_runs == counter.session_runs == 0
    # ...and they still act on TensorFlow's steps, read back by TensorBoard.
    steps = tag_steps(tmp_path)
    assert steps["loss"] == [1, 4, 7, 10]
    assert steps["global_step/sec"] == [5, 9]
    assert session_start_steps(tmp_path) == [1]  # The saver's; the step counter writes none.
    assert program.traces == [1]


def test_graph_hooks_fetch_only_the_summary_op_on_recording_steps(tmp_path):
    with tf.Graph().as_default():
        program = graph_program()
        saver = Spy(
            SummarySaverHook(save_steps=3, output_dir=str(tmp_path), summary_op=program.summary_op)
        )
        counter = Spy(StepCounterHook(every_n_steps=4, output_dir=str(tmp_path)))
        with monsession.MonitoredSession(hooks=[counter, saver]) as session:
            for _ in range(12):
                session.run(program.train_op)
    assert _acting_runs(saver) == [0, 3, 6, 9]  # The runs that reach steps 1, 4, 7, 10.
    assert all(saver.requests[run].fetches == [program.summary_op] for run in [0, 3, 6, 9])
    assert counter.requests == [None] * 12
    # The global step after a run is read by the step service, not by the hooks.
    assert saver.session_runs == counter.session_runs == 0
    steps = tag_steps(tmp_path)
    assert steps["loss"] == [1, 4, 7, 10]
    assert steps["global_step/sec"] == [5, 9]
    assert session_start_steps(tmp_path) == [1]  # The saver's; the step counter writes none.
