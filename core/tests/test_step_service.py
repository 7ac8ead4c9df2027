"""The step service: hooks know the global step of every run without fetching it."""

from __future__ import annotations

import logging

import pytest
import tensorflow as tf

import monsession


@pytest.fixture(autouse=True)
def fresh_global_step():
    tf.compat.v1.reset_default_graph()
    yield
    tf.compat.v1.reset_default_graph()


class StepRecorder(monsession.SessionRunHook):
    """Records what the run context says about the global step on every run."""

    def __init__(self):
        self.before = []  # global_step in before_run
        self.seen = []  # (global_step, global_step_after()) in after_run

    def before_run(self, run_context):
        self.before.append(run_context.global_step)
        with pytest.raises(RuntimeError, match="known after the run"):
            run_context.global_step_after()

    def after_run(self, run_context, run_values):
        self.seen.append((run_context.global_step, run_context.global_step_after()))


class TensorFlowStyleRecorder(tf.compat.v1.train.SessionRunHook):
    """What TensorFlow's own hooks compute: the read tensor, then the variable."""

    def begin(self):
        from monsession import _tf_compat

        self.read = _tf_compat.global_step_read_tensor()
        self.seen = []

    def before_run(self, run_context):
        return tf.compat.v1.train.SessionRunArgs(self.read)

    def after_run(self, run_context, run_values):
        self.seen.append((int(run_values.results), int(run_context.session.run(self.read))))


def _graph_program():
    global_step = monsession.get_or_create_global_step()
    weight = tf.compat.v1.get_variable("w", initializer=1.0)
    loss = tf.square(weight)
    optimizer = tf.compat.v1.train.GradientDescentOptimizer(0.1)
    return optimizer.minimize(loss, global_step=global_step)


@pytest.mark.parametrize("start", [0, 7])
def test_graph_reports_tensorflows_values_on_every_step(start):
    def run(api, recorder):
        with tf.Graph().as_default():
            train_op = _graph_program()
            init = tf.compat.v1.assign(monsession.get_global_step(), start)
            scaffold = api.Scaffold(local_init_op=init)
            creator = api.ChiefSessionCreator(scaffold=scaffold)
            hooks = [recorder, api.StopAtStepHook(last_step=start + 6)]
            with api.MonitoredSession(session_creator=creator, hooks=hooks) as sess:
                while not sess.should_stop():
                    sess.run(train_op)
        return recorder.seen

    theirs = run(tf.compat.v1.train, TensorFlowStyleRecorder())
    ours = StepRecorder()
    assert run(monsession, ours) == theirs
    assert theirs == [(start + i, start + i + 1) for i in range(6)]
    assert ours.before == [start + i for i in range(6)]


def test_eager_reports_the_steps_without_reading_the_device(monkeypatch):
    from monsession import _eager, _eager_backend

    global_step = monsession.get_or_create_global_step()
    global_step.assign(3)

    @tf.function
    def step():
        global_step.assign_add(1)
        return {"loss": tf.constant(1.0)}

    reads = []
    for module in (_eager, _eager_backend):
        original = module.to_numpy
        monkeypatch.setattr(
            module, "to_numpy", lambda value, original=original: reads.append(1) or original(value)
        )
    recorder = StepRecorder()
    stop = monsession.StopAtStepHook(last_step=9)
    with monsession.MonitoredSession(hooks=[recorder, stop]) as sess:
        after_creation = len(reads)
        while not sess.should_stop():
            sess.run(step)
    assert recorder.before == [3, 4, 5, 6, 7, 8]
    assert recorder.seen == [(s, s + 1) for s in range(3, 9)]
    assert int(global_step.numpy()) == 9
    assert len(reads) == after_creation, "no host read on steps where no hook fetches"


def test_eager_falls_back_to_exact_reads_when_the_step_adds_more_than_one(caplog):
    global_step = monsession.get_or_create_global_step()

    @tf.function
    def step():
        global_step.assign_add(2)
        return {"loss": tf.constant(1.0)}

    class FetchLoss(monsession.SessionRunHook):
        def before_run(self, run_context):
            return monsession.SessionRunArgs("loss")

    recorder = StepRecorder()
    with caplog.at_level(logging.WARNING, logger="monsession"):
        with monsession.MonitoredSession(hooks=[FetchLoss(), recorder]) as sess:
            for _ in range(3):
                sess.run(step)
    assert recorder.seen == [(0, 2), (2, 4), (4, 6)]
    warnings = [r for r in caplog.records if "exactly one per run" in r.getMessage()]
    assert len(warnings) == 1


def test_a_hand_made_context_has_no_step():
    context = monsession.SessionRunContext(monsession.SessionRunArgs(None), session=None)
    assert context.global_step is None
    context._finish_run()
    assert context.global_step_after() is None


def test_global_step_after_reads_the_graph_once_and_only_when_reaching():
    runs = []

    class CountingSession(tf.compat.v1.Session):
        def run(self, *args, **kwargs):
            runs.append(args[0])
            return super().run(*args, **kwargs)

        def make_callable(self, fetches, *args, **kwargs):
            made = super().make_callable(fetches, *args, **kwargs)

            def counted(*a, **k):
                runs.append(fetches)
                return made(*a, **k)

            return counted

    class Creator(monsession.SessionCreator):
        def create_session(self):
            sess = CountingSession()
            sess.run(tf.compat.v1.global_variables_initializer())
            return sess

    asked = []

    class Reaching(monsession.SessionRunHook):
        def after_run(self, run_context, run_values):
            asked.append(run_context.global_step_after(lambda step: step >= 3))
            asked.append(run_context.global_step_after(lambda step: step >= 3))

    with tf.Graph().as_default():
        train_op = _graph_program()
        with monsession.MonitoredSession(session_creator=Creator(), hooks=[Reaching()]) as sess:
            runs.clear()
            for _ in range(4):
                sess.run(train_op)
    assert asked == [None, None, None, None, 3, 3, 4, 4]
    # The train steps run as prepared steps; what `runs` sees are the reads
    # of the global step: one after the first step (nothing known yet), then
    # one on each step whose expected value reaches 3, none on the others.
    assert len(runs) == 3
