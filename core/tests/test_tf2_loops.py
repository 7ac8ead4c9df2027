"""TF2 loops: the session owns the global step, steps take their own arguments, epochs."""

from __future__ import annotations

import logging

import pytest
import tensorflow as tf

import monsession


@pytest.fixture(autouse=True)
def no_global_step():
    tf.compat.v1.reset_default_graph()  # Eager mode's global step lives there.
    yield
    tf.compat.v1.reset_default_graph()


class Steps(monsession.SessionRunHook):
    """Records the global step after each run, and the value of `fetch`."""

    def __init__(self, fetch=None) -> None:
        self.fetch = fetch
        self.after: list[int] = []
        self.values: list = []

    def before_run(self, run_context):
        return None if self.fetch is None else monsession.SessionRunArgs(self.fetch)

    def after_run(self, run_context, run_values):
        self.after.append(run_context.global_step_after())
        if self.fetch is not None:
            self.values.append(run_values.results)


def test_the_session_owns_the_global_step_of_a_step_without_one():
    w = tf.Variable(1.0)

    @tf.function
    def step():
        w.assign_add(1.0)
        return {"loss": w.read_value()}

    steps = Steps("loss")
    with monsession.MonitoredSession(hooks=[steps, monsession.StopAtStepHook(5)]) as sess:
        while not sess.should_stop():
            sess.run(step)
        global_step = monsession.get_global_step()
    assert int(global_step.numpy()) == 5
    assert steps.after == [1, 2, 3, 4, 5]
    assert steps.values == [2.0, 3.0, 4.0, 5.0, 6.0]


def test_a_step_that_advances_the_owned_global_step_is_counted_once():
    with monsession.MonitoredSession(hooks=[monsession.StopAtStepHook(4)]) as sess:
        global_step = monsession.get_global_step()

        @tf.function
        def step():
            global_step.assign_add(1)
            return {}

        runs = 0
        while not sess.should_stop():
            sess.run(step)
            runs += 1
    assert runs == 4 and int(global_step.numpy()) == 4


def test_a_global_step_the_program_created_is_left_to_the_program():
    global_step = monsession.get_or_create_global_step()

    @tf.function
    def evaluate():
        return {"loss": tf.constant(0.0)}

    with monsession.MonitoredSession() as sess:
        for _ in range(3):
            sess.run(evaluate)
    assert int(global_step.numpy()) == 0


def test_fused_steps_advance_the_owned_global_step():
    @tf.function
    def step():
        return {"loss": tf.constant(1.0)}

    calls = 0
    hooks = [monsession.StopAtStepHook(last_step=50)]
    with monsession.MonitoredSession(hooks=hooks, steps_per_execution="auto") as sess:
        while not sess.should_stop():
            sess.run(step)
            calls += 1
    assert int(monsession.get_global_step().numpy()) == 50
    assert calls < 50


def test_the_owned_global_step_is_saved_and_restored_with_the_checkpoint(tmp_path):
    w = tf.Variable(0.0)
    checkpoint = tf.train.Checkpoint(w=w)
    manager = tf.train.CheckpointManager(checkpoint, tmp_path, max_to_keep=1)

    class SaveAtEnd(monsession.SessionRunHook):
        def end(self, session):
            manager.save()

    @tf.function
    def step():
        w.assign_add(1.0)
        return {}

    def train(last_step):
        creator = monsession.ChiefSessionCreator(
            scaffold=monsession.Scaffold(saver=manager), checkpoint_dir=str(tmp_path)
        )
        hooks = [SaveAtEnd(), monsession.StopAtStepHook(last_step=last_step)]
        with monsession.MonitoredSession(session_creator=creator, hooks=hooks) as sess:
            while not sess.should_stop():
                sess.run(step)

    train(3)
    reader = tf.train.load_checkpoint(str(tmp_path))
    assert reader.get_tensor("monsession_global_step/.ATTRIBUTES/VARIABLE_VALUE") == 3
    monsession.get_global_step().assign(0)
    w.assign(0.0)
    train(5)  # Resumes at the saved step 3: two more steps.
    assert int(monsession.get_global_step().numpy()) == 5
    assert float(w.numpy()) == 5.0


def test_call_passes_the_batch_as_the_steps_own_arguments():
    seen = Steps("output")

    @tf.function
    def step(x, y, scale=1.0):
        return scale * x + y

    with monsession.MonitoredSession(hooks=[seen]) as sess:
        result = sess.call(step, tf.constant(2.0), tf.constant(1.0), scale=3.0)
        sess.call(step, tf.constant(1.0), y=tf.constant(0.0))
    assert float(result) == 7.0
    assert seen.values == [7.0, 1.0]
    assert seen.after == [1, 2]


def test_hooks_name_the_items_of_a_tuple_output():
    seen = Steps(["output/1", "output/0"])

    @tf.function
    def step(x):
        return x, 2.0 * x

    with monsession.MonitoredSession(hooks=[seen]) as sess:
        sess.call(step, tf.constant(3.0))
    assert seen.values == [[6.0, 3.0]]


def test_a_missing_output_name_says_what_the_step_returned():
    @tf.function
    def step():
        return tf.constant(1.0)

    with monsession.MonitoredSession(hooks=[Steps("loss")]) as sess:
        with pytest.raises(ValueError, match=r"Steps fetches 'loss'.*a .*name it 'output'"):
            sess.run(step)


def test_call_is_for_eager_steps():
    with tf.Graph().as_default():
        monsession.get_or_create_global_step()
        with monsession.SingularMonitoredSession() as sess:
            with pytest.raises(RuntimeError, match=r"call\(\) runs a TF2 step"):
                sess.call(lambda: None)


class EpochEvents(monsession.SessionRunHook):
    def __init__(self) -> None:
        self.events: list[str] = []

    def epoch_begin(self, epoch):
        self.events.append(f"begin {epoch}")

    def epoch_end(self, epoch):
        self.events.append(f"end {epoch}")


def test_epochs_run_every_batch_and_yield_completed_epochs():
    total = tf.Variable(0.0)

    @tf.function
    def step(x, y):
        total.assign_add(tf.reduce_sum(x) + tf.reduce_sum(y))
        return {}

    data = tf.data.Dataset.from_tensor_slices((tf.range(6.0), tf.ones(6))).batch(2)
    epochs = monsession.Epochs(data, num_epochs=2)
    events = EpochEvents()
    with monsession.MonitoredSession(hooks=[events]) as sess:
        done = list(epochs.run(sess, step))
    assert done == [0, 1]
    assert events.events == ["begin 0", "end 0", "begin 1", "end 1"]
    assert float(total.numpy()) == 2 * (15.0 + 6.0)
    assert int(monsession.get_global_step().numpy()) == 6


def test_a_stop_ends_the_epoch_loop_without_the_end_of_the_epoch():
    @tf.function
    def step(x):
        return {}

    epochs = monsession.Epochs(tf.data.Dataset.range(4), num_epochs=3)
    events = EpochEvents()
    ended = []
    hooks = [events, monsession.StopAtStepHook(last_step=6)]
    with monsession.MonitoredSession(hooks=hooks) as sess:
        for epoch in epochs.run(sess, step):
            ended.append(epoch)
    assert ended == [0]
    assert events.events == ["begin 0", "end 0", "begin 1"]
    assert int(epochs.epoch.numpy()) == 1


@pytest.mark.parametrize(
    ("dataset", "error", "match"),
    [
        (tf.data.Dataset.range(3).repeat(), ValueError, "infinite length"),
        (tf.data.Dataset.range(3).filter(lambda x: x > 0), ValueError, "unknown or empty"),
        ([1, 2, 3], TypeError, "must be a tf.data.Dataset"),
    ],
)
def test_epochs_reject_data_without_a_known_length(dataset, error, match):
    with pytest.raises(error, match=f"Epochs: .*{match}"):
        monsession.Epochs(dataset)


@pytest.mark.parametrize(("value", "error"), [(0, ValueError), ("2", TypeError), (True, TypeError)])
def test_epochs_reject_a_bad_number_of_epochs(value, error):
    with pytest.raises(error, match="Epochs: num_epochs must be an int >= 1 or None, got"):
        monsession.Epochs(tf.data.Dataset.range(3), num_epochs=value)


def test_a_call_with_chosen_hooks_does_not_advance_the_owned_global_step():
    @tf.function
    def train():
        return {"loss": tf.constant(1.0)}

    @tf.function
    def evaluate():
        return {"accuracy": tf.constant(0.5)}

    steps = Steps()
    train_runs = 0
    hooks = [steps, monsession.StopAtStepHook(last_step=4)]
    with monsession.MonitoredSession(hooks=hooks, steps_per_execution="auto") as sess:
        while not sess.should_stop():
            sess.run(train)
            train_runs += 1
            if not sess.should_stop():
                sess.run(evaluate, hooks=[])  # Neither advances the step nor calls a hook.
    assert int(monsession.get_global_step().numpy()) == 4
    assert train_runs == 4 and steps.after == [1, 2, 3, 4]


class _EveryFive(monsession.SessionRunHook):
    """Acts every 5 steps and records what it saw, epoch boundaries included."""

    def __init__(self):
        self.seen = []

    def next_action(self, global_step):
        return monsession.NextAction(steps=5 - global_step % 5)

    def before_run(self, run_context):
        return monsession.SessionRunArgs({"w": "w"})

    def after_run(self, run_context, run_values):
        step = run_context.global_step_after()
        if step % 5 == 0:
            self.seen.append(("step", step, round(float(run_values.results["w"]), 6)))

    def epoch_begin(self, epoch):
        self.seen.append(("begin", epoch))

    def epoch_end(self, epoch):
        self.seen.append(("end", epoch))


def _epochs_run(steps_per_execution, last_step=None):
    """An order-sensitive model trained by Epochs.run: what hooks, loop and weights saw."""
    tf.compat.v1.reset_default_graph()  # A fresh global step.
    w = tf.Variable(0.0)

    @tf.function
    def step(x):
        w.assign(w * 0.5 + tf.cast(x, tf.float32))
        return {"w": w.read_value()}

    data = monsession.Epochs(tf.data.Dataset.range(7).shuffle(7, seed=3), num_epochs=3)
    hook, silent = _EveryFive(), _SilentSteps()
    hooks = [hook, silent] + ([] if last_step is None else [monsession.StopAtStepHook(last_step)])
    with monsession.MonitoredSession(hooks=hooks, steps_per_execution=steps_per_execution) as sess:
        yielded = list(data.run(sess, step))
    step_now = int(monsession.get_global_step().numpy())
    return hook.seen, yielded, round(float(w.numpy()), 6), step_now, int(data.epoch), silent.total


class _SilentSteps(monsession.SessionRunHook):
    def __init__(self):
        self.total = 0

    def next_action(self, global_step):
        return monsession.NextAction()

    def after_run(self, run_context, run_values):
        self.total += run_context.silent_steps


@pytest.mark.parametrize("last_step", [None, 17])
def test_the_epochs_loop_fuses_and_sees_what_single_steps_see(last_step):
    *fused, silent = _epochs_run("auto", last_step)
    *single, quiet = _epochs_run(1, last_step)
    # Single steps on which no hook acts are quiet: the hooks learn of the
    # same steps as with fusion.
    assert fused == single and quiet == silent
    seen, yielded, _, step, epoch = fused
    assert step == (21 if last_step is None else 17)
    assert yielded == ([0, 1, 2] if last_step is None else [0, 1])
    assert epoch == (3 if last_step is None else 2)
    assert ("begin", 0) == seen[0] and ("end", 1) in seen
    # Silent steps ran: all but the epochs' last batches and the hooks' steps.
    assert silent >= step - 3 - step // 5 - 3


def test_an_epochs_step_that_is_no_tf_function_says_once_why_it_runs_single_steps(caplog):
    def step(x):  # Plain Python: its side effects run on every step.
        return {"x": x}

    epochs = monsession.Epochs(tf.data.Dataset.range(6).batch(2), num_epochs=2)
    with caplog.at_level(logging.INFO, logger="monsession"):
        with monsession.MonitoredSession(steps_per_execution="auto") as sess:
            sess.run(tf.Variable(1.0))  # Calls no step: nothing to say.
            assert list(epochs.run(sess, step)) == [0, 1]
    said = [r for r in caplog.records if "steps_per_execution" in r.getMessage()]
    assert len(said) == 1 and said[0].levelno == logging.WARNING
    message = said[0].getMessage()
    assert "it is not a tf.function" in message
    assert int(monsession.get_global_step().numpy()) == 6


def test_call_of_a_step_without_arguments_is_fused():
    @tf.function
    def step():
        return {"loss": tf.constant(1.0)}

    calls = 0
    hooks = [monsession.StopAtStepHook(last_step=40)]
    with monsession.MonitoredSession(hooks=hooks, steps_per_execution="auto") as sess:
        while not sess.should_stop():
            sess.call(step)
            calls += 1
    assert int(monsession.get_global_step().numpy()) == 40
    assert calls < 40
