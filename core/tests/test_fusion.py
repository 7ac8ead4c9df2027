"""Fused steps (`steps_per_execution`, eager mode): exact hook steps, caps, fallbacks."""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable

import pytest
import tensorflow as tf

import monsession


@pytest.fixture(autouse=True)
def no_time_budget(monkeypatch):
    """A fused call ends only where a hook acts, whatever this machine's pace:
    the blocks these tests count are exact (`MONSESSION_FUSED_CALL_SECONDS`)."""
    monkeypatch.setenv("MONSESSION_FUSED_CALL_SECONDS", "3600")


@pytest.fixture(autouse=True)
def fresh_global_step():
    tf.compat.v1.reset_default_graph()  # Eager mode's global step lives there.
    yield
    tf.compat.v1.reset_default_graph()


class Counter:
    """A step advancing the global step once, returning the step it reached as `loss`."""

    def __init__(self, data: int | None = None) -> None:
        self.global_step = monsession.get_or_create_global_step()
        self.traces = 0
        self.iterator = None if data is None else iter(tf.data.Dataset.range(data))

        @tf.function
        def step():
            self.traces += 1  # Python: runs once per trace.
            if self.iterator is None:
                reached = self.global_step.assign_add(1)
            else:
                x = next(self.iterator)
                with tf.control_dependencies([x]):  # No step without data.
                    reached = self.global_step.assign_add(1)
            return {"loss": tf.cast(reached, tf.float32)}

        self.step = step


class Every(monsession.SessionRunHook):
    """Acts when the global step after a run is a multiple of `n`."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.seen: list[tuple[int, int, int]] = []  # (step before, silent steps, step after)

    def after_run(self, run_context, run_values):
        after = run_context.global_step_after()
        if after % self.n == 0:
            self.seen.append((run_context.global_step, run_context.silent_steps, after))

    def next_action(self, global_step):
        return monsession.NextAction(steps=self.n - global_step % self.n)


class PerStep(monsession.SessionRunHook):
    """Has work on every step and no next_action()."""

    def __init__(self) -> None:
        self.runs = 0

    def after_run(self, run_context, run_values):
        self.runs += 1


def run_until_stop(sess, step) -> int:
    calls = 0
    while not sess.should_stop():
        sess.run(step)
        calls += 1
    return calls


def test_hooks_act_at_exactly_their_steps_with_silent_steps_before():
    counter = Counter()
    every = Every(7)
    hooks = [every, monsession.StopAtStepHook(last_step=30)]
    with monsession.MonitoredSession(hooks=hooks, steps_per_execution="auto") as sess:
        calls = run_until_stop(sess, counter.step)
    assert every.seen == [(6, 6, 7), (13, 6, 14), (20, 6, 21), (27, 6, 28)]
    assert int(counter.global_step.numpy()) == 30
    assert calls == 5  # Ends at 7, 14, 21, 28 and the stop step 30.


def test_same_hook_steps_as_single_steps():
    results = {}
    for setting in (1, "auto", 5):
        tf.compat.v1.reset_default_graph()
        counter = Counter()
        every = Every(4)
        hooks = [every, monsession.StopAtStepHook(last_step=17)]
        with monsession.MonitoredSession(hooks=hooks, steps_per_execution=setting) as sess:
            run_until_stop(sess, counter.step)
        results[setting] = ([after for _, _, after in every.seen], int(counter.global_step))
    assert results[1] == results["auto"] == results[5] == ([4, 8, 12, 16], 17)


class Calls(Every):
    """`Every`, also counting its before_run calls."""

    def __init__(self, n: int) -> None:
        super().__init__(n)
        self.before_runs = 0

    def before_run(self, run_context):
        self.before_runs += 1


def test_single_steps_call_the_hooks_only_when_one_acts():
    counter = Counter()
    calls = Calls(4)
    hooks = [calls, monsession.StopAtStepHook(last_step=10)]
    outputs = []
    with monsession.MonitoredSession(hooks=hooks, steps_per_execution=1) as sess:
        while not sess.should_stop():
            outputs.append(float(sess.run(counter.step)["loss"]))
    # Every call is one step and returns its outputs; each hook sees the steps
    # where it acts (4 and 8 for `calls`; 10 is the stop's alone), and how many
    # steps ran before each without it.
    assert outputs == [float(step) for step in range(1, 11)]
    assert calls.before_runs == 2
    assert calls.seen == [(3, 3, 4), (7, 3, 8)]
    assert int(counter.global_step.numpy()) == 10


def _run_to_the_stop(hooks, setting, last_step):
    """Runs a `Counter`'s step with `hooks` until a `StopAtStepHook(last_step)` stops it."""
    counter = Counter()
    hooks = [*hooks, monsession.StopAtStepHook(last_step=last_step)]
    with monsession.MonitoredSession(hooks=hooks, steps_per_execution=setting) as sess:
        run_until_stop(sess, counter.step)
    return int(counter.global_step.numpy())


@pytest.mark.parametrize("setting", [1, "auto", 5])
def test_each_hook_is_called_only_where_it_acts_and_told_the_steps_it_did_not_see(setting):
    fours, sixes = Calls(4), Calls(6)
    assert _run_to_the_stop([fours, sixes], setting, last_step=13) == 13
    # (global step before, silent steps, after) where each acts: 3 or 5 steps before
    # each ran without it, though the other hook was called on some of them.
    assert fours.seen == [(3, 3, 4), (7, 3, 8), (11, 3, 12)]
    assert sixes.seen == [(5, 5, 6), (11, 5, 12)]
    # Called only there; 5 caps a call at 4 silent steps and one step with the hooks,
    # where neither acts on step 5 (10) and so neither is called.
    assert (fours.before_runs, sixes.before_runs) == (3, 2)


class OwnRuns(monsession.SessionRunHook):
    """Acts every `n` of the runs it saw, as TensorFlow's LoggingTensorHook counts them:
    its `next_action` answers from its own count, which runs it is not called for leave
    behind until it is told of them (`silent_steps`)."""

    def __init__(self, n: int) -> None:
        self.n, self.runs, self.acted = n, 0, []

    def before_run(self, run_context):
        self.runs += run_context.silent_steps

    def after_run(self, run_context, run_values):
        self.runs += 1
        if self.runs % self.n == 0:
            self.acted.append(run_context.global_step_after())

    def next_action(self, global_step):
        return monsession.NextAction(steps=self.n - self.runs % self.n)


@pytest.mark.parametrize("setting", [1, "auto"])
def test_a_hook_counting_its_own_runs_acts_on_time_beside_one_acting_every_step(setting):
    own, every = OwnRuns(4), Calls(1)
    _run_to_the_stop([own, every], setting, last_step=14)
    assert every.before_runs == 14
    assert own.acted == [4, 8, 12]
    assert own.runs == 12  # Called last at step 12: not told of 13 and 14.


def test_quiet_single_steps_call_the_function_a_wrapper_names():
    """A wrapper naming its `tf.function` (`monsession_fused_step`) does
    nothing where no hook acts: quiet steps call that function, through its
    trace, and only the steps with the hooks call the wrapper."""
    counter = Counter()
    wrapper_steps = []

    def wrapped():
        outputs = counter.step()
        wrapper_steps.append(int(counter.global_step.numpy()))
        return outputs

    wrapped.monsession_fused_step = counter.step
    calls = Calls(4)
    outputs = []
    with monsession.MonitoredSession(hooks=[calls], steps_per_execution=1) as sess:
        for _ in range(9):
            outputs.append(float(sess.run(wrapped)["loss"]))
    assert outputs == [float(step) for step in range(1, 10)]
    # Only steps 4 and 8, where the hook acts, called the wrapper.
    assert wrapper_steps == [4, 8]
    assert calls.seen == [(3, 3, 4), (7, 3, 8)]
    assert counter.traces == 1


def test_a_hook_without_next_action_is_called_on_every_single_step():
    counter = Counter()
    per_step, every = PerStep(), Every(3)
    hooks = [per_step, every, monsession.StopAtStepHook(last_step=7)]
    with monsession.MonitoredSession(hooks=hooks, steps_per_execution=1) as sess:
        run_until_stop(sess, counter.step)
    assert per_step.runs == 7
    assert every.seen == [(2, 0, 3), (5, 0, 6)]


def test_an_int_caps_the_steps_of_one_call():
    counter = Counter()
    hooks = [monsession.StopAtStepHook(last_step=25)]
    with monsession.MonitoredSession(hooks=hooks, steps_per_execution=4) as sess:
        calls = run_until_stop(sess, counter.step)
    assert int(counter.global_step.numpy()) == 25
    assert calls == 7  # 6 calls of 4 steps, then 1.


def test_the_loop_is_traced_once_not_per_count():
    counter = Counter()
    hooks = [Every(3), Every(5), monsession.StopAtStepHook(last_step=200)]
    with monsession.MonitoredSession(hooks=hooks, steps_per_execution="auto") as sess:
        for _ in range(10):
            sess.run(counter.step)
        traced = counter.traces
        run_until_stop(sess, counter.step)
    assert counter.traces == traced <= 2  # The step itself, and inside the loop.


def _traces(run: Callable[[], object]) -> int:
    """How many graphs TensorFlow traced (built from Python) while `run` ran."""
    traced = 0

    def profile(frame, event, arg):
        nonlocal traced
        if event == "call" and frame.f_code.co_name == "func_graph_from_py_func":
            traced += 1

    sys.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(None)
    return traced


def test_a_new_session_over_the_same_step_does_not_trace_its_loop_again():
    counter = Counter()
    traced = []
    for last in (50, 100):  # E.g. one session per epoch, or per benchmark sample.
        hooks = [Every(10), monsession.StopAtStepHook(last_step=last)]
        with monsession.MonitoredSession(hooks=hooks, steps_per_execution="auto") as sess:
            traced.append(_traces(lambda sess=sess: run_until_stop(sess, counter.step)))
    assert int(counter.global_step.numpy()) == 100
    assert traced[0] > 0  # The first session traced the step and its loop.
    assert traced[1] == 0


def test_a_hook_without_next_action_keeps_single_steps(caplog):
    counter = Counter()
    per_step = PerStep()
    every = Every(3)
    hooks = [per_step, every, monsession.StopAtStepHook(last_step=9)]
    with caplog.at_level(logging.INFO, logger="monsession"):
        with monsession.MonitoredSession(hooks=hooks, steps_per_execution="auto") as sess:
            calls = run_until_stop(sess, counter.step)
    assert calls == per_step.runs == 9
    assert [silent for _, silent, _ in every.seen] == [0, 0, 0]
    lines = [r.getMessage() for r in caplog.records if "steps_per_execution" in r.getMessage()]
    assert len(lines) == 1 and "PerStep" in lines[0]


def test_a_time_already_due_runs_single_steps():
    counter = Counter()

    class Due(Every):
        def next_action(self, global_step):
            return monsession.NextAction(at_time=time.time() - 1)

    due = Due(1)
    hooks = [due, monsession.StopAtStepHook(last_step=5)]
    with monsession.MonitoredSession(hooks=hooks, steps_per_execution="auto") as sess:
        calls = run_until_stop(sess, counter.step)
    assert calls == 5
    assert [silent for _, silent, _ in due.seen] == [0] * 5


def test_feeds_run_one_step():
    global_step = monsession.get_or_create_global_step()

    @tf.function
    def step(scale=1.0):
        global_step.assign_add(1)
        return {"loss": scale}

    every = Every(10)
    hooks = [every, monsession.StopAtStepHook(last_step=3)]
    with monsession.MonitoredSession(hooks=hooks, steps_per_execution="auto") as sess:
        calls = 0
        while not sess.should_stop():
            sess.run(step, feed_dict={"scale": 2.0})
            calls += 1
    assert calls == 3


def test_kept_outputs_of_silent_steps_are_stacked_in_order():
    counter = Counter()
    kept = []

    class Keeper(Every):
        def before_run(self, run_context):
            if run_context.silent_steps:
                kept.append(run_context.silent_outputs["loss"].numpy().tolist())

        def next_action(self, global_step):
            return monsession.NextAction(steps=4 - global_step % 4, keep=("loss",))

    hooks = [Keeper(4), monsession.StopAtStepHook(last_step=8)]
    with monsession.MonitoredSession(hooks=hooks, steps_per_execution="auto") as sess:
        run_until_stop(sess, counter.step)
    assert kept == [[1.0, 2.0, 3.0], [5.0, 6.0, 7.0]]


def test_end_of_data_inside_a_block_ends_cleanly_at_the_exact_step():
    counter = Counter(data=23)
    ended = []

    class End(Every):
        def end(self, session):
            ended.append(monsession.plugins.read_global_step(session))

    hooks = [End(10), monsession.StopAtStepHook(last_step=100)]
    with monsession.MonitoredSession(hooks=hooks, steps_per_execution="auto") as sess:
        run_until_stop(sess, counter.step)
    assert int(counter.global_step.numpy()) == 23
    assert ended == [23]


def test_a_step_that_does_not_add_one_falls_back_to_single_steps(caplog):
    global_step = monsession.get_or_create_global_step()

    @tf.function
    def twice():
        global_step.assign_add(2)
        return {"loss": 0.0}

    every = Every(4)
    hooks = [every, monsession.StopAtStepHook(last_step=20)]
    with caplog.at_level(logging.WARNING, logger="monsession"):
        with monsession.MonitoredSession(hooks=hooks, steps_per_execution="auto") as sess:
            run_until_stop(sess, twice)
    assert int(global_step.numpy()) == 20
    # Exact steps from then on: every multiple of 4 reached is seen.
    assert [after for _, _, after in every.seen][-3:] == [12, 16, 20]
    assert any("single steps" in r.getMessage() for r in caplog.records)


def test_recovery_keeps_fusing(tmp_path):
    counter = Counter()
    checkpoint = tf.train.Checkpoint(step=counter.global_step)
    manager = tf.train.CheckpointManager(checkpoint, tmp_path, max_to_keep=2)
    created = []

    class Preempt(Every):
        failed = False

        def after_create_session(self, session, coord):
            created.append(monsession.plugins.read_global_step(session))

        def after_run(self, run_context, run_values):
            super().after_run(run_context, run_values)
            after = run_context.global_step_after()
            if after == 10:
                manager.save(checkpoint_number=after)
            if after == 15 and not Preempt.failed:
                Preempt.failed = True
                raise tf.errors.AbortedError(None, None, "injected preemption")

        def next_action(self, global_step):
            return monsession.NextAction(steps=5 - global_step % 5)

    creator = monsession.ChiefSessionCreator(
        scaffold=monsession.Scaffold(saver=manager), checkpoint_dir=str(tmp_path)
    )
    preempt = Preempt(5)
    hooks = [preempt, monsession.StopAtStepHook(last_step=25)]
    with monsession.MonitoredSession(
        session_creator=creator, hooks=hooks, steps_per_execution="auto"
    ) as sess:
        run_until_stop(sess, counter.step)
    assert created == [0, 10]
    assert [after for _, _, after in preempt.seen] == [5, 10, 15, 15, 20, 25]
    assert [silent for _, silent, _ in preempt.seen] == [4, 4, 4, 4, 4, 4]
    assert int(counter.global_step.numpy()) == 25


@pytest.mark.parametrize(
    ("value", "error", "match"),
    [
        (0, ValueError, "int >= 1 or 'auto'; got 0"),
        ("fast", TypeError, "got 'fast' of type str"),
        (True, TypeError, "of type bool"),
        (2.0, TypeError, "of type float"),
    ],
)
def test_bad_steps_per_execution_is_named(value, error, match):
    with pytest.raises(error, match=match) as raised:
        monsession.MonitoredSession(steps_per_execution=value)
    assert "MonitoredSession: steps_per_execution" in str(raised.value)


def test_graph_mode_rejects_fusion():
    with tf.Graph().as_default():
        monsession.get_or_create_global_step()
        with pytest.raises(ValueError, match=r"in graph mode each Session\.run"):
            monsession.SingularMonitoredSession(steps_per_execution="auto")
        with monsession.SingularMonitoredSession(steps_per_execution=1) as sess:
            assert not sess.should_stop()


def _recording_step(steps: int):
    """A step that records its batch at the global step before it; (global step, record, step)."""
    global_step = monsession.get_or_create_global_step()
    trained = tf.Variable(tf.fill([steps], tf.constant(-1, tf.int64)))

    @tf.function
    def step(x):
        at = global_step.assign_add(1) - 1
        trained.scatter_nd_update([[at]], [x])
        return {"loss": tf.cast(x, tf.float32)}

    return global_step, trained, step


class EpochEnds(Calls):
    """`Calls`, also recording the epochs that end."""

    def __init__(self, n: int) -> None:
        super().__init__(n)
        self.ended: list[int] = []

    def epoch_end(self, epoch):
        self.ended.append(epoch)


@pytest.mark.parametrize(
    ("setting", "host_pulls", "ends_epochs", "skipped"),
    [
        ("auto", 1, True, [2, 1, 3]),
        (1, 12, True, [2, 1, 3]),
        ("auto", 1, False, [2, 3, 3]),
        (1, 12, False, [2, 3, 3]),
    ],
)
def test_epochs_steps_with_hooks_pull_inside_the_step_when_fusing(
    monkeypatch, setting, host_pulls, ends_epochs, skipped
):
    from monsession._loops import Epochs

    pulls = []
    pull = Epochs._pull
    monkeypatch.setattr(Epochs, "_pull", lambda self, *a: pulls.append(1) or pull(self, *a))
    _, trained, step = _recording_step(12)

    hook = EpochEnds(4) if ends_epochs else Calls(4)
    data = monsession.Epochs(tf.data.Dataset.range(6), num_epochs=2)
    with monsession.MonitoredSession(hooks=[hook], steps_per_execution=setting) as sess:
        assert list(data.run(sess, step)) == [0, 1]
    # The batches of single steps, in order; the hook acts at its steps and
    # the epochs end at their last batch, with one host pull (the first
    # step's, which reads where the epoch is) when fusing.
    assert trained.numpy().tolist() == [0, 1, 2, 3, 4, 5] * 2
    assert [after for _, _, after in hook.seen] == [4, 8, 12]
    assert getattr(hook, "ended", [0, 1]) == [0, 1]
    assert int(data.epoch.numpy()) == 2
    assert len(pulls) == host_pulls
    # Fused or quiet, the hooks are called on the first step and their own
    # steps (1, 4, 8, 12); on each epoch's last step (6) only when a hook
    # acts at the epoch's end. The hooks learn of every step they skipped.
    assert hook.before_runs == (5 if ends_epochs else 4)
    assert [silent for _, silent, _ in hook.seen] == skipped


class SavesAtItsSteps(Every):
    """`Every`, saving `manager`'s checkpoint at its steps."""

    def __init__(self, n: int, manager) -> None:
        super().__init__(n)
        self.manager = manager

    def after_run(self, run_context, run_values):
        super().after_run(run_context, run_values)
        step = run_context.global_step_after()
        if step % self.n == 0:
            self.manager.save(checkpoint_number=step)


def _shuffled_epochs(directory, restore: bool):
    """Trains 3 epochs of 6 shuffled batches ("auto", a save every 4 steps); the batches by step.

    With `restore`, first restores the checkpoint of step 8, taken 2 steps
    after the first epoch ended in silent steps.
    """
    tf.compat.v1.reset_default_graph()
    global_step, trained, step = _recording_step(18)

    data = monsession.Epochs(tf.data.Dataset.range(6).shuffle(6, seed=5), num_epochs=3)
    checkpoint = tf.train.Checkpoint(step=global_step, trained=trained, data=data)
    manager = tf.train.CheckpointManager(checkpoint, str(directory), max_to_keep=None)
    if restore:
        checkpoint.restore(str(directory / "ckpt-8")).assert_consumed()
        assert int(data.epoch.numpy()) == 1  # Counted when the silent steps ended it.
    hook = SavesAtItsSteps(4, manager)
    with monsession.MonitoredSession(hooks=[hook], steps_per_execution="auto") as sess:
        yielded = list(data.run(sess, step))
    return trained.numpy().tolist(), yielded, int(data.epoch.numpy())


def test_a_checkpoint_after_an_epoch_ended_in_silent_steps_holds_the_exact_data_position(
    tmp_path,
):
    straight, yielded, epoch = _shuffled_epochs(tmp_path, restore=False)
    assert yielded == [0, 1, 2] and epoch == 3
    assert sorted(straight[:6]) == sorted(straight[6:12]) == list(range(6))
    assert straight[:6] != straight[6:12]  # Reshuffled each epoch.
    resumed, yielded, epoch = _shuffled_epochs(tmp_path, restore=True)
    # From step 8's checkpoint: steps 9 to 18 on the batches of the uninterrupted run.
    assert resumed == straight and yielded == [1, 2] and epoch == 3


def test_epochs_fuses_the_step_a_wrapper_names():
    """A wrapper naming its `tf.function` (`monsession_fused_step`) fuses in `Epochs.run`.

    The silent steps run the function inside the session's loop (their
    outputs come stacked), and only the steps with the hooks call the
    wrapper, as in `sess.run(step)`.
    """
    global_step, trained, step = _recording_step(12)

    wrapper_steps = []

    def wrapped(x):
        outputs = step(x)
        wrapper_steps.append(int(global_step.numpy()))
        return outputs

    wrapped.monsession_fused_step = step
    fused = []

    class Keeper(Calls):
        def before_run(self, run_context):
            super().before_run(run_context)
            if run_context.silent_steps:
                fused.extend(run_context.silent_outputs["loss"].numpy().tolist())

        def next_action(self, global_step):
            return monsession.NextAction(steps=self.n - global_step % self.n, keep=("loss",))

    hook = Keeper(4)
    data = monsession.Epochs(tf.data.Dataset.range(6), num_epochs=2)
    with monsession.MonitoredSession(hooks=[hook], steps_per_execution="auto") as sess:
        assert list(data.run(sess, wrapped)) == [0, 1]
    # The batches of single steps; the hooks' steps (the first, 4, each
    # epoch's last, 8, 12) call the wrapper, the 7 others ran fused.
    assert trained.numpy().tolist() == [0, 1, 2, 3, 4, 5] * 2
    assert wrapper_steps == [1, 4, 6, 8, 12]
    assert fused == [1.0, 2.0, 4.0, 0.0, 2.0, 3.0, 4.0]
    assert [after for _, _, after in hook.seen] == [4, 8, 12]


class OtherWorker:
    """The workers' agreement of a job (`StepAgreement.agree`), seen from this worker.

    Stands in for the all-reduce: the other worker's hook acts every `n`
    steps, and the answer is the fewest silent steps either allows.
    """

    def __init__(self, global_step, n: int) -> None:
        self.global_step, self.n = global_step, n
        self.agreed: list[int] = []

    def agree(self, received, silent_steps):
        reached = int(self.global_step.numpy())
        theirs = self.n - reached % self.n - 1
        self.agreed.append(min(silent_steps, theirs))
        return None, self.agreed[-1]


class FusedSteps(monsession.SessionRunHook):
    """Records, at each call with the hooks, how many steps ran inside the fused loop."""

    def __init__(self) -> None:
        self.fused: list[int] = []

    def next_action(self, global_step):
        return monsession.NextAction(keep=("loss",))  # No quiet steps: every call is seen.

    def before_run(self, run_context):
        kept = run_context.silent_outputs.get("loss") if run_context.silent_steps else None
        self.fused.append(0 if kept is None else int(kept.shape[0]))


def test_with_workers_each_call_fuses_exactly_the_steps_agreed_after_the_one_before():
    counter = Counter()
    every, fused = Every(7), FusedSteps()
    hooks = [every, fused, monsession.StopAtStepHook(last_step=40)]
    other = OtherWorker(counter.global_step, 5)
    with monsession.MonitoredSession(hooks=hooks, steps_per_execution="auto") as sess:
        sess.agree_with_workers(other)
        calls = run_until_stop(sess, counter.step)
    # This worker's hooks act on exactly their steps, fused or not...
    assert [after for _, _, after in every.seen] == [7, 14, 21, 28, 35]
    assert int(counter.global_step.numpy()) == 40
    # ...and each call ran exactly the steps agreed after the call before it
    # (the first call and the one after it, before a pace is known, none).
    assert len(other.agreed) == calls == len(fused.fused)
    assert fused.fused == [0, *other.agreed[:-1]]
    assert fused.fused[:2] == [0, 0] and sum(fused.fused) > 0
    # No call fused past a step at which a hook of either worker acts.
    reached = 0
    for silent in fused.fused:
        stops = [step for step in range(reached + 1, reached + silent + 1) if step % 5 == 0]
        assert not stops and all(step % 7 for step in range(reached + 1, reached + silent + 1))
        reached += silent + 1


def test_the_time_budget_of_a_call_is_its_environment_variable(monkeypatch):
    """`MONSESSION_FUSED_CALL_SECONDS`: a budget already over when a call starts
    fuses no step, so every step is a call of its own (the hooks' steps unchanged)."""
    monkeypatch.setenv("MONSESSION_FUSED_CALL_SECONDS", "1e-12")
    counter, every = Counter(), Every(5)
    with monsession.MonitoredSession(hooks=[every], steps_per_execution="auto") as sess:
        calls = 0
        while int(counter.global_step.numpy()) < 20:
            sess.run(counter.step)
            calls += 1
    assert calls == 20
    assert [after for _, _, after in every.seen] == [5, 10, 15, 20]


@pytest.mark.parametrize("value", ["0", "-1", "soon"])
def test_a_bad_time_budget_is_named(monkeypatch, value):
    monkeypatch.setenv("MONSESSION_FUSED_CALL_SECONDS", value)
    Counter()
    with pytest.raises(ValueError, match=f"MONSESSION_FUSED_CALL_SECONDS={value!r}"):
        monsession.MonitoredSession(steps_per_execution="auto")
