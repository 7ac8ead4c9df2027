"""Hook state saved beside checkpoints (`SessionRunHook.use_hook_state`) and restored."""

from __future__ import annotations

import json
import logging
import os
import time

import pytest
import tensorflow as tf

import monsession


class Counter(monsession.SessionRunHook):
    """Counts the runs it sees; its count is its state."""

    def __init__(self, state_key=None):
        if state_key is not None:
            self.state_key = state_key
        self.seen = 0
        self.created = 0

    def after_create_session(self, session, coord):
        self.created += 1

    def after_run(self, run_context, run_values):
        self.seen += 1

    def state_dict(self):
        return {"seen": self.seen}

    def load_state_dict(self, state):
        self.seen = int(state["seen"])


class Picky(Counter):
    """Loads only counts below 100, after changing its count (to test the rollback)."""

    def load_state_dict(self, state):
        self.seen = -1
        if state["seen"] >= 100:
            raise ValueError("too many")
        self.seen = state["seen"]


class TakesHookState(monsession.SessionRunHook):
    """Keeps the `HookStateWriter` the session hands it."""

    hook_state = None

    def use_hook_state(self, hook_state):
        self.hook_state = hook_state


class SaveAt(TakesHookState):
    """Writes a checkpoint after the runs that reach `steps`, hook state first."""

    def __init__(self, directory, steps, program, scaffold):
        self.directory = directory
        self.steps = set(steps)
        self.program = program
        self.scaffold = scaffold
        self.manager = None

    def after_run(self, run_context, run_values):
        step = run_context.global_step_after()
        if step not in self.steps:
            return
        prefix = os.path.join(self.directory, f"model.ckpt-{step}")
        assert self.hook_state.save(prefix) == prefix + ".hooks.json"
        if self.program.mode == "graph":
            self.scaffold.saver.save(
                run_context.session, os.path.join(self.directory, "model.ckpt"), global_step=step
            )
        else:
            if self.manager is None:
                self.manager = tf.train.CheckpointManager(
                    self.program.checkpoint,
                    self.directory,
                    max_to_keep=None,
                    checkpoint_name="model.ckpt",
                )
            self.manager.save(checkpoint_number=step)


def _session(program, directory, hooks):
    scaffold = program.scaffold()
    creator = monsession.ChiefSessionCreator(scaffold=scaffold, checkpoint_dir=directory)
    return monsession.MonitoredSession(creator, hooks=hooks), scaffold


def _train(program, directory, hooks, runs, save_steps=()):
    scaffold = program.scaffold()
    saver = SaveAt(directory, save_steps, program, scaffold)
    creator = monsession.ChiefSessionCreator(scaffold=scaffold, checkpoint_dir=directory)
    with monsession.MonitoredSession(creator, hooks=[*hooks, saver]) as sess:
        for _ in range(runs):
            sess.run(program.step)


def test_second_or_step_timer_state_round_trips_and_rejects_bad_states():
    timer = monsession.SecondOrStepTimer(every_steps=5)
    assert timer.state_dict() == {"last_triggered_step": None, "secs_since_trigger": None}
    timer.update_last_triggered_step(7)
    state = json.loads(json.dumps(timer.state_dict()))
    assert state["last_triggered_step"] == 7 and 0 <= state["secs_since_trigger"] < 60
    other = monsession.SecondOrStepTimer(every_steps=5)
    other.load_state_dict(state)
    assert other.last_triggered_step() == 7
    assert not other.should_trigger_for_step(11)
    assert other.should_trigger_for_step(12)
    for bad in (
        {"last_triggered_step": "7", "secs_since_trigger": 1.0},
        {"last_triggered_step": 7, "secs_since_trigger": float("nan")},
        {"last_triggered_step": 7, "secs_since_trigger": -1.0},
        {"last_triggered_step": None, "secs_since_trigger": 1.0},
        [7, 1.0],
    ):
        with pytest.raises(ValueError, match="SecondOrStepTimer"):
            other.load_state_dict(bad)
        assert other.last_triggered_step() == 7


def test_a_loaded_timer_keeps_steps_and_durations_never_the_time_between_processes():
    """The state holds seconds since the last trigger, not a clock time: a
    restart an hour later neither makes a secs-based timer due nor adds the
    hour to an elapsed time."""
    hourly = monsession.SecondOrStepTimer(every_secs=3600)
    hourly.update_last_triggered_step(10)
    state = hourly.state_dict()
    restarted = monsession.SecondOrStepTimer(every_secs=3600)
    restarted.load_state_dict(state)  # However long after.
    assert not restarted.should_trigger_for_step(11)
    assert restarted.next_action(11).at_time > time.time() + 3000
    # One hour of training was done before the state was taken: due now.
    due = monsession.SecondOrStepTimer(every_secs=3600)
    due.load_state_dict({"last_triggered_step": 10, "secs_since_trigger": 3600.0})
    assert due.should_trigger_for_step(11)
    # The first trigger after a load counts the 30 s run before the save and
    # the time since the load, not the hour in between.
    steps = monsession.SecondOrStepTimer(every_steps=4)
    steps.load_state_dict({"last_triggered_step": 9, "secs_since_trigger": 30.0})
    assert not steps.should_trigger_for_step(12)
    assert steps.should_trigger_for_step(13)
    elapsed, elapsed_steps = steps.update_last_triggered_step(13)
    assert elapsed is not None and 30.0 <= elapsed < 90 and elapsed_steps == 4
    # A state of the previous format (a clock time): its step is kept, the
    # time is not trusted (a secs-based timer triggers at the next step).
    old = monsession.SecondOrStepTimer(every_secs=3600)
    old.load_state_dict({"last_triggered_step": 9, "last_triggered_time": 1.0e9})
    assert old.last_triggered_step() == 9 and old.should_trigger_for_step(10)


def test_state_is_saved_beside_the_checkpoint_and_restored_with_it(program, tmp_path, caplog):
    directory = str(tmp_path)
    first, keyed = Counter(), Counter(state_key="my-counter")
    _train(program, directory, [first, keyed], runs=5, save_steps=[3])
    with open(tmp_path / "model.ckpt-3.hooks.json") as state_file:
        saved = json.load(state_file)["hooks"]
    # Written before the SaveAt hook's own after_run of step 3: all three runs.
    assert saved == {"Counter[0]": {"seen": 3}, "my-counter": {"seen": 3}}

    restored, again, added = Counter(), Counter(state_key="my-counter"), Counter()
    with caplog.at_level(logging.INFO, logger="monsession"):
        sess, _ = _session(program, directory, [added, again, restored])
        with sess:
            # Keys by class and index among stateful hooks: `added` is now Counter[0].
            assert (added.seen, again.seen, restored.seen) == (3, 3, 0)
            assert added.created == 1
    warnings = [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and r.name == "monsession"
    ]
    assert warnings == [
        f"Counter (key 'Counter[1]') has no saved state in "
        f"{os.path.join(directory, 'model.ckpt-3.hooks.json')}; it starts fresh."
    ]


def test_every_eager_worker_restores_the_chiefs_hook_state(tmp_path):
    """A worker that is not the chief restores the chief's checkpoint and its hooks' state
    (the creator under multi-worker strategies too), so their schedules continue."""
    from programs import make_program

    tf.compat.v1.reset_default_graph()
    program = make_program("eager")
    directory = str(tmp_path)
    _train(program, directory, [Counter()], runs=5, save_steps=[3])
    worker = Counter()
    with monsession.MonitoredTrainingSession(
        is_chief=False,
        checkpoint_dir=directory,
        scaffold=program.scaffold(),
        hooks=[worker],
        log_step_count_steps=None,
    ) as sess:
        assert worker.seen == 3 and worker.created == 1
        sess.run(program.step)
    assert worker.seen == 4
    tf.compat.v1.reset_default_graph()


def test_hooks_after_the_saver_are_saved_as_of_the_end_of_the_checkpoints_step(program, tmp_path):
    """Before, a hook after the saver (as the user hooks of
    MonitoredTrainingSession) was saved without the step being saved, and
    after a restart ran its schedule one step late."""
    directory = str(tmp_path)
    scaffold = program.scaffold()
    saver, before, after = SaveAt(directory, [3], program, scaffold), Counter(), Counter()
    creator = monsession.ChiefSessionCreator(scaffold=scaffold, checkpoint_dir=directory)
    with monsession.MonitoredSession(creator, hooks=[before, saver, after]) as sess:
        for _ in range(5):
            sess.run(program.step)
    with open(tmp_path / "model.ckpt-3.hooks.json") as state_file:
        saved = json.load(state_file)["hooks"]
    assert saved == {"Counter[0]": {"seen": 3}, "Counter[1]": {"seen": 3}}
    restored = [Counter(), Counter()]
    sess, _ = _session(program, directory, restored)
    with sess:
        assert [hook.seen for hook in restored] == [3, 3]


def test_a_hook_that_cannot_load_its_state_warns_and_keeps_its_own(program, tmp_path, caplog):
    directory = str(tmp_path)
    counter = Picky()
    counter.seen = 500
    _train(program, directory, [counter], runs=1, save_steps=[1])
    picky = Picky()
    picky.seen = 2
    with caplog.at_level(logging.WARNING, logger="monsession"):
        sess, _ = _session(program, directory, [picky])
        with sess:
            assert picky.seen == 2
    (message,) = [r.getMessage() for r in caplog.records if r.name == "monsession"]
    assert message.startswith("Picky (key 'Picky[0]') could not load its saved state")
    assert "could not load its saved state" in message and "ValueError: too many" in message


def test_an_unreadable_state_file_warns_naming_it(program, tmp_path, caplog):
    directory = str(tmp_path)
    _train(program, directory, [Counter()], runs=2, save_steps=[2])
    (tmp_path / "model.ckpt-2.hooks.json").write_text("{not json")
    counter = Counter()
    with caplog.at_level(logging.WARNING, logger="monsession"):
        sess, _ = _session(program, directory, [counter])
        with sess:
            assert counter.seen == 0
    (message,) = [r.getMessage() for r in caplog.records if r.name == "monsession"]
    assert "model.ckpt-2.hooks.json cannot be read" in message
    assert "the hooks Counter[0] start fresh" in message


def test_recovery_from_a_preemption_restores_the_checkpoints_state(program, tmp_path):
    directory = str(tmp_path)

    class AbortOnce(monsession.SessionRunHook):
        aborted = False

        def before_run(self, run_context):
            if run_context.global_step == 4 and not self.aborted:
                AbortOnce.aborted = True
                raise tf.errors.AbortedError(None, None, "preempted")

    counter = Counter()
    scaffold = program.scaffold()
    saver = SaveAt(directory, [2], program, scaffold)
    creator = monsession.ChiefSessionCreator(scaffold=scaffold, checkpoint_dir=directory)
    with monsession.MonitoredSession(creator, hooks=[counter, AbortOnce(), saver]) as sess:
        for _ in range(4):
            sess.run(program.step)
        assert counter.seen == 4
        sess.run(program.step)  # Aborts, restores step 2, then runs step 3.
        assert counter.created == 2
        assert counter.seen == 3  # 2 from the checkpoint, then this run.


def test_damaged_newest_checkpoint_restores_the_older_ones_state(program, tmp_path, caplog):
    directory = str(tmp_path)
    counter = Counter()
    _train(program, directory, [counter], runs=4, save_steps=[2, 4])
    for data in tmp_path.glob("model.ckpt-4.data-*"):
        data.write_bytes(b"damaged")
    restored = Counter()
    with caplog.at_level(logging.WARNING, logger="monsession"):
        sess, _ = _session(program, directory, [restored])
        with sess:
            assert restored.seen == 2
    assert any("Damaged checkpoint files" in r.getMessage() for r in caplog.records)


def test_state_files_of_deleted_checkpoints_are_removed(graph, tmp_path):
    global_step = monsession.get_or_create_global_step()
    increment = global_step.assign_add(1)
    saver = tf.compat.v1.train.Saver(max_to_keep=1)
    counter = Counter()
    directory = str(tmp_path)

    class SaveEvery(TakesHookState):
        def after_run(self, run_context, run_values):
            step = run_context.global_step_after()
            self.hook_state.save(f"{directory}/model.ckpt-{step}")
            saver.save(run_context.session, f"{directory}/model.ckpt", global_step=step)

    with monsession.MonitoredSession(hooks=[counter, SaveEvery()]) as sess:
        for _ in range(3):
            sess.run(increment)
    # The saver deletes the previous checkpoint after its state is written; the
    # state is written again once the step's hooks ran, which removes the old one.
    assert sorted(p.name for p in tmp_path.glob("*.hooks.json")) == ["model.ckpt-3.hooks.json"]


def test_bad_state_keys_and_states_are_named(graph, tmp_path):
    global_step = monsession.get_or_create_global_step()
    with pytest.raises(
        ValueError, match="Counter and Counter both save their state under the key 'k'"
    ):
        monsession.MonitoredSession(hooks=[Counter("k"), Counter("k")])
    with pytest.raises(TypeError, match=r"Counter\.state_key must be a non-empty string"):
        monsession.MonitoredSession(hooks=[Counter(3)])

    class SetState(Counter):
        def state_dict(self):
            return {"seen": {1, 2}}

    taker = TakesHookState()
    with monsession.MonitoredSession(hooks=[SetState(), taker]) as sess:
        with pytest.raises(TypeError, match=r"SetState.state_dict\(\) \(key 'SetState\[0\]'\)"):
            taker.hook_state.save(str(tmp_path / "model.ckpt-0"))
        sess.run(global_step)
    assert not list(tmp_path.iterdir())


def test_a_driver_without_a_monitored_session_saves_and_loads_through_hook_lifecycle(
    tmp_path, caplog
):
    session = monsession.EagerSession()  # What a driver of its own hands to its hooks.
    first, second, stateless, taker = (
        Counter(),
        Picky(),
        monsession.SessionRunHook(),
        TakesHookState(),
    )
    prefix = str(tmp_path / "model.ckpt-7")
    lifecycle = monsession.plugins.HookLifecycle([first, stateless, second, taker], "MyDriver")
    lifecycle.begin()
    assert taker.hook_state is lifecycle.hook_state
    lifecycle.created(session, None, restored_from=None)
    first.seen, second.seen = 7, 200
    assert taker.hook_state.save(prefix) == prefix + ".hooks.json"

    fresh_first, fresh_second = Counter(), Picky()
    restarted = monsession.plugins.HookLifecycle([fresh_first, fresh_second], "MyDriver")
    restarted.begin()
    with caplog.at_level(logging.INFO, logger="monsession"):
        restarted.created(monsession.EagerSession(), None, restored_from=prefix)
    assert fresh_first.seen == 7
    assert fresh_second.seen == 0  # Its load raised: it keeps its own state, with a WARNING.
    assert "Picky (key 'Picky[0]') could not load its saved state" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="monsession"):
        restarted.hook_state.load(str(tmp_path / "model.ckpt-3"))
    assert "No hook state beside checkpoint" in caplog.text
    with pytest.raises(ValueError, match="MyDriver: Counter and Counter both save"):
        monsession.plugins.HookLifecycle([Counter("k"), Counter("k")], "MyDriver")


def test_the_deprecated_functions_by_session_still_save_and_load_and_warn(graph, tmp_path):
    def deprecated(name):
        return pytest.warns(
            monsession.RemovedIn2Warning,
            match=rf"^monsession\.plugins\.{name} is deprecated since monsession 1\.1\.0 ",
        )

    session = monsession.EagerSession()
    first, prefix = Counter(), str(tmp_path / "model.ckpt-7")
    with deprecated("load_hook_state") as caught:
        assert monsession.plugins.load_hook_state(session, prefix) is False  # Nothing attached.
    assert caught[0].filename == __file__
    with deprecated("attach_hook_state") as caught:
        monsession.plugins.attach_hook_state(session, [first], "MyDriver")
    assert caught[0].filename == __file__
    first.seen = 7
    with deprecated("save_hook_state") as caught:
        assert monsession.plugins.save_hook_state(session, prefix) == prefix + ".hooks.json"
        assert monsession.plugins.save_hook_state(object(), str(tmp_path / "x")) is None
    assert caught[0].filename == __file__
    assert "HookStateWriter" in str(caught[0].message)
    fresh, restarted = Counter(), monsession.EagerSession()
    with deprecated("attach_hook_state"):
        monsession.plugins.attach_hook_state(restarted, [fresh], "MyDriver")
    with deprecated("load_hook_state"):
        assert monsession.plugins.load_hook_state(restarted, prefix) is True
    assert fresh.seen == 7

    global_step = monsession.get_or_create_global_step()
    counter = Counter()
    with monsession.MonitoredSession(hooks=[counter]) as sess:  # A monitored session's too.
        sess.run(global_step)
        with deprecated("save_hook_state"):
            written = monsession.plugins.save_hook_state(sess._tf_sess(), prefix)
    assert json.loads(open(written).read())["hooks"] == {"Counter[0]": {"seen": 1}}


class CountsOwnRuns(Counter):
    """`Counter`, planning ahead (eager mode): it acts every 10 of its runs, and is told
    of the runs it was not called for (`silent_steps`)."""

    def before_run(self, run_context):
        self.seen += run_context.silent_steps

    def next_action(self, global_step):
        return monsession.NextAction(steps=10 - self.seen % 10)


class SavesAtThree(TakesHookState):
    """Planning ahead, saves the hooks' state after step 3 only; called on every step by
    `EveryStep` beside it."""

    def __init__(self, directory):
        self.prefix = os.path.join(directory, "model.ckpt-3")

    def after_run(self, run_context, run_values):
        if run_context.global_step_after() == 3:
            self.hook_state.save(self.prefix)

    def next_action(self, global_step):
        return monsession.NextAction(steps=max(1, 3 - global_step))


class EveryStep(monsession.SessionRunHook):
    def after_run(self, run_context, run_values):
        pass

    def next_action(self, global_step):
        return monsession.NextAction(steps=1)


def test_a_hook_not_due_is_called_where_the_state_is_saved_so_its_state_counts_every_step(
    tmp_path,
):
    """Eager mode calls a hook only where it acts, but every hook whose state is saved
    where a hook saving it acts: the state saved at step 3 counts 3 runs, not 0."""
    tf.compat.v1.reset_default_graph()
    global_step = monsession.get_or_create_global_step()

    @tf.function
    def step():
        global_step.assign_add(1)

    counter, saver = CountsOwnRuns(), SavesAtThree(str(tmp_path))
    with monsession.MonitoredSession(hooks=[counter, EveryStep(), saver]) as sess:
        for _ in range(5):
            sess.run(step)
    with open(tmp_path / "model.ckpt-3.hooks.json") as state_file:
        assert json.load(state_file)["hooks"] == {"CountsOwnRuns[0]": {"seen": 3}}
    tf.compat.v1.reset_default_graph()
