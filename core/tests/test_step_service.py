"""The step service: hooks know the global step of every run without fetching it."""

from __future__ import annotations

import logging

import pytest
import tensorflow as tf

import monsession
from monsession._api._run_context import finish_run
from monsession._backends._eager_backend import MOST_UNCHECKED
from monsession._backends._eager_calls import returning_global_step


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
    """A train op that reads the global step before it increments it.

    TensorFlow runs the global-step read fetched with a step and the step's
    increment in no fixed order, so the read may see either value (for
    TensorFlow's hooks as for ours). Ordering the read first makes the values
    deterministic, so that runs can be compared exactly.
    """
    global_step = monsession.get_or_create_global_step()
    weight = tf.compat.v1.get_variable("w", initializer=1.0)
    loss = tf.square(weight)
    optimizer = tf.compat.v1.train.GradientDescentOptimizer(0.1)
    with tf.control_dependencies([monsession.testing.global_step_read_tensor()]):
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


class BeforeRecorder(monsession.SessionRunHook):
    """Records `global_step` only: no exact read after the run."""

    def __init__(self):
        self.before = []

    def before_run(self, run_context):
        self.before.append(run_context.global_step)


def test_graph_step_is_exact_on_every_run_of_a_program_without_ordering():
    recorder = BeforeRecorder()
    with tf.Graph().as_default():
        global_step = monsession.get_or_create_global_step()
        weight = tf.compat.v1.get_variable("w", initializer=1.0)
        optimizer = tf.compat.v1.train.GradientDescentOptimizer(0.1)
        train_op = optimizer.minimize(tf.square(weight), global_step=global_step)
        hooks = [recorder, monsession.StopAtStepHook(last_step=40)]
        with monsession.MonitoredSession(hooks=hooks) as sess:
            while not sess.should_stop():
                sess.run(train_op)
    assert recorder.before == list(range(40))


@pytest.mark.parametrize("read_first", [False, True])
def test_graph_steps_adding_several_fall_back_to_exact_reads(caplog, read_first):
    recorder = BeforeRecorder()
    with tf.Graph().as_default():
        global_step = monsession.get_or_create_global_step()
        read = monsession.testing.global_step_read_tensor()
        with tf.control_dependencies([read] if read_first else []):
            train_op = global_step.assign_add(3)
        final = monsession.FinalOpsHook(global_step)
        hooks = [recorder, monsession.StopAtStepHook(last_step=10), final]
        with caplog.at_level(logging.WARNING, logger="monsession"):
            with monsession.MonitoredSession(hooks=hooks) as sess:
                while not sess.should_stop():
                    sess.run(train_op)
    assert final.final_ops_values == 12, "stopped on the first run reaching the last step"
    assert recorder.before[0] == 0
    warnings = [r for r in caplog.records if "do not each add one" in r.getMessage()]
    assert len(warnings) == 1


@pytest.mark.parametrize(
    ("before", "seen", "after"),
    [
        (5, 5, 6),  # The read ran before the step's increment.
        (5, 6, 6),  # The read ran after it: TensorFlow's hooks would say 7.
        (5, 8, None),  # The step added several: only a read can tell.
        (None, 5, 6),  # Nothing expected yet: TensorFlow's rule.
        (6, 5, None),  # Expected too high (a run that added nothing).
    ],
)
def test_graph_step_after_a_run_from_the_value_read_during_it(before, seen, after):
    from monsession._backends._graph_backend import _step_after_run

    assert _step_after_run(before, seen) == after


def test_graph_step_after_a_run_without_increment_is_corrected_by_the_next_read():
    recorder = StepRecorder()
    with tf.Graph().as_default():
        train_op = _graph_program()
        loss = tf.constant(0.0)
        with monsession.MonitoredSession(hooks=[recorder]) as sess:
            sess.run(train_op)
            sess.run(loss)  # Adds nothing; the session cannot tell.
            sess.run(train_op)
            sess.run(train_op)
    # The recorder reads the exact step after each run, which keeps the
    # expected step before the next one exact too.
    assert [after for _, after in recorder.seen] == [1, 1, 2, 3]
    assert recorder.before == [0, 1, 1, 2]


def test_eager_reports_the_steps_without_reading_the_device():
    global_step = monsession.get_or_create_global_step()
    global_step.assign(3)

    @tf.function
    def step():
        global_step.assign_add(1)
        return {"loss": tf.constant(1.0)}

    recorder = StepRecorder()
    stop = monsession.StopAtStepHook(last_step=9)
    reads_per_step = []
    with monsession.MonitoredSession(hooks=[recorder, stop]) as sess:
        while not sess.should_stop():
            with monsession.testing.count_host_reads() as reads:
                sess.run(step)
            reads_per_step.append(reads.count)
    assert recorder.before == [3, 4, 5, 6, 7, 8]
    assert recorder.seen == [(s, s + 1) for s in range(3, 9)]
    assert int(global_step.numpy()) == 9
    assert reads_per_step == [0] * 6, "no host read on steps where no hook fetches"


def test_count_host_reads_counts_every_kind_of_read():
    variable = tf.Variable(2.0)
    tensor = tf.constant([1.0])
    with monsession.testing.count_host_reads() as reads:
        variable.numpy()
        float(variable)
        tensor.numpy()
        str(tensor)
        tf.constant(1.0) * 2  # Runs on the device: no read.
    assert reads.count == 4
    with monsession.testing.count_host_reads() as reads:
        pass
    assert reads.count == 0


def test_eager_hook_fetching_now_and_then_reads_only_on_its_steps():
    global_step = monsession.get_or_create_global_step()

    @tf.function
    def step():
        global_step.assign_add(1)
        return {"loss": tf.constant(1.0)}

    class EveryThird(monsession.SessionRunHook):
        def __init__(self):
            self.timer = monsession.SecondOrStepTimer(every_steps=3)
            self.seen = []

        def before_run(self, run_context):
            if self.timer.should_trigger_for_step(run_context.global_step + 1):
                return monsession.SessionRunArgs("loss")
            return None

        def after_run(self, run_context, run_values):
            step = run_context.global_step_after(self.timer.should_trigger_for_step)
            if step is not None:
                self.timer.update_last_triggered_step(step)
                self.seen.append((step, float(run_values.results)))

    hook = EveryThird()
    reads_per_step = []
    with monsession.MonitoredSession(hooks=[hook, monsession.StopAtStepHook(9)]) as sess:
        while not sess.should_stop():
            with monsession.testing.count_host_reads() as reads:
                sess.run(step)
            reads_per_step.append(reads.count)
    assert hook.seen == [(1, 1.0), (4, 1.0), (7, 1.0)]
    # The loss on the hook's steps only; the global step checked alongside it on
    # the first and third of them (`MOST_UNCHECKED`).
    assert reads_per_step == [2, 0, 0, 1, 0, 0, 2, 0, 0]


def test_eager_checks_the_step_on_ever_fewer_reads_and_catches_a_late_drift(caplog):
    global_step = monsession.get_or_create_global_step()
    increment = tf.Variable(1, dtype=global_step.dtype)

    @tf.function
    def step():
        global_step.assign_add(increment)
        return {"loss": tf.constant(1.0)}

    class FetchLoss(monsession.SessionRunHook):
        def before_run(self, run_context):
            return monsession.SessionRunArgs("loss")

    recorder = StepRecorder()
    reads_per_step = []
    late = 3 * MOST_UNCHECKED
    with caplog.at_level(logging.WARNING, logger="monsession"):
        with monsession.MonitoredSession(hooks=[FetchLoss(), recorder]) as sess:
            for _ in range(late):
                with monsession.testing.count_host_reads() as reads:
                    sess.run(step)
                reads_per_step.append(reads.count)
            increment.assign(2)  # From now on the step adds two.
            for _ in range(MOST_UNCHECKED):
                sess.run(step)
    checked = [run for run, count in enumerate(reads_per_step, 1) if count == 2]
    gaps = [2**k for k in range(1, 7) if 2**k <= MOST_UNCHECKED]
    expected = [1]
    for gap in gaps + [MOST_UNCHECKED] * late:
        if expected[-1] + gap > late:
            break
        expected.append(expected[-1] + gap)
    assert checked == expected
    assert set(reads_per_step) == {1, 2}
    # The drift is seen at the next check: within MOST_UNCHECKED runs, then every
    # run reads the exact step.
    warned = [r for r in caplog.records if "exactly one per run" in r.getMessage()]
    assert len(warned) == 1
    steps_after = [after for _, after in recorder.seen]
    assert steps_after[:late] == list(range(1, late + 1))
    assert steps_after[-1] == late + 2 * MOST_UNCHECKED
    seen_wrong = [i for i, (before, after) in enumerate(recorder.seen) if after != before + 2]
    assert seen_wrong[-1] < late + MOST_UNCHECKED


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


@pytest.mark.parametrize("with_batch", [False, True], ids=["no-arguments", "batch-argument"])
def test_eager_hooks_reading_the_device_get_the_global_step_from_the_steps_own_call(with_batch):
    global_step = monsession.get_or_create_global_step()

    @tf.function
    def step(scale=None):
        global_step.assign_add(1)
        return {"loss": tf.constant(1.0) if scale is None else scale * 2.0}

    class FetchLoss(monsession.SessionRunHook):
        def before_run(self, run_context):
            return monsession.SessionRunArgs({"loss": "loss", "step": global_step})

        def after_run(self, run_context, run_values):
            self.fetched.append(int(run_values.results["step"]))

    fetch = FetchLoss()
    fetch.fetched = []
    recorder = StepRecorder()

    def run(sess):
        return sess.call(step, tf.constant(0.5)) if with_batch else sess.run(step)

    with monsession.MonitoredSession(hooks=[fetch, recorder]) as sess:
        run(sess)
        run(sess)
        global_step.assign_add(5)  # Steps this session did not run.
        run(sess)
        run(sess)
    # The check of the third run saw the jump, with the loss; the count follows it.
    assert recorder.seen == [(0, 1), (1, 2), (2, 8), (8, 9)]
    assert fetch.fetched == [1, 2, 8, 9]
    # The value came back with the step's own call: no read of the variable after it.
    wrapper = returning_global_step(step, global_step)
    assert wrapper.experimental_get_tracing_count() == 1


_WRAPPER_NAMES = ("with_global_step", "WithGlobalStep")


def test_many_steps_whose_hooks_read_the_device_do_not_warn_of_retracing(caplog):
    # Each step gets its own wrapper (`returning_global_step`): one trace each, and
    # TensorFlow's retracing warning does not count them together.
    global_step = monsession.get_or_create_global_step()

    class FetchLoss(monsession.SessionRunHook):
        def before_run(self, run_context):
            return monsession.SessionRunArgs("loss")

    with caplog.at_level(logging.WARNING, logger="tensorflow"):
        for scale in range(8):

            @tf.function
            def step(scale=float(scale)):
                global_step.assign_add(1)
                return {"loss": tf.constant(scale)}

            with monsession.MonitoredSession(hooks=[FetchLoss()]) as sess:
                for _ in range(3):
                    sess.run(step)
            assert returning_global_step(step, global_step).experimental_get_tracing_count() == 1
    # (The test's own steps, made in a loop, may warn: they share their code.)
    wrappers = [r for r in caplog.records if any(n in r.getMessage() for n in _WRAPPER_NAMES)]
    assert not [r for r in wrappers if "retracing" in r.getMessage()]


def test_a_hand_made_context_has_no_step():
    context = monsession.SessionRunContext(monsession.SessionRunArgs(None), session=None)
    assert context.global_step is None
    finish_run(context)
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
    # of the global step (the one when the session was created is cleared):
    # one on each step whose expected value reaches 3, none on the others.
    assert len(runs) == 2


class _IdleThenAsking(monsession.SessionRunHook):
    """Idle on its first runs; from run `first` on, asks for the step in `where`."""

    def __init__(self, first, where):
        self.first, self.where = first, where
        self.runs = 0
        self.steps = []

    def before_run(self, run_context):
        self.runs += 1
        if self.runs >= self.first and self.where == "before_run":
            self.steps.append(run_context.global_step)

    def after_run(self, run_context, run_values):
        if self.runs >= self.first and self.where == "after_run":
            self.steps.append(run_context.global_step_after())


@pytest.mark.parametrize(("where", "steps"), [("before_run", [1, 2]), ("after_run", [2, 3])])
def test_graph_hook_asking_after_idle_runs_that_add_nothing_gets_the_exact_step(
    caplog, where, steps
):
    hook = _IdleThenAsking(first=4, where=where)
    with tf.Graph().as_default():
        train_op = _graph_program()
        loss = tf.constant(0.0)
        with caplog.at_level(logging.WARNING, logger="monsession"):
            with monsession.MonitoredSession(hooks=[hook]) as sess:
                # Counted without a fetch: the session expects step 3 next.
                for fetches in (train_op, loss, loss, train_op, train_op):
                    sess.run(fetches)
    assert hook.steps == steps
    warnings = [r for r in caplog.records if "do not each add one" in r.getMessage()]
    assert len(warnings) == 1


def test_graph_idle_hooks_fetch_nothing_after_the_first_run():
    from monsession._backends._graph_backend import GraphBackend

    with tf.Graph().as_default():
        train_op = _graph_program()
        with tf.compat.v1.Session() as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            fetched = {}
            for follow_step in (False, True):
                backend = GraphBackend(sess, follow_step)
                fetched[follow_step] = []
                for _ in range(4):
                    backend.start_run()
                    _, results = backend.run(train_op, {}, None, None, None, {})
                    fetched[follow_step].append(len(results))
            assert int(sess.run(tf.compat.v1.train.get_global_step())) == 8
    # Only the caller's fetches; with hooks per step, the first run also
    # fetches the global step, to check that runs add one.
    assert fetched == {False: [1, 1, 1, 1], True: [2, 1, 1, 1]}
