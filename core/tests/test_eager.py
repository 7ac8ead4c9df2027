"""Eager mode: TF2 tf.function training loops under monsession."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from programs import make_program

import monsession


@pytest.fixture(autouse=True)
def fresh_eager_state():
    tf.compat.v1.reset_default_graph()
    yield
    tf.compat.v1.reset_default_graph()


class LossEveryN(monsession.SessionRunHook):
    """A user hook: fetches the loss every n steps, and the step it was at."""

    def __init__(self, loss, every_n):
        self.loss = loss
        self.every_n = every_n
        self.logged = {}

    def begin(self):
        self.global_step = monsession.get_global_step()
        self.calls = 0

    def before_run(self, run_context):
        self.calls += 1
        if self.calls % self.every_n:
            return None
        return monsession.SessionRunArgs({"loss": self.loss})

    def after_run(self, run_context, run_values):
        if run_values.results is not None:
            step = int(run_context.session.run(self.global_step))
            self.logged[step] = float(run_values.results["loss"])


@pytest.mark.parametrize("mode", ["graph", "eager"])
def test_the_same_user_hook_in_both_modes(mode):
    """One hook class, one expectation, graph and eager."""

    def run():
        program = make_program(mode)
        hook = LossEveryN(program.loss, every_n=2)
        with monsession.MonitoredSession(hooks=[hook, monsession.StopAtStepHook(last_step=6)]) as s:
            while not s.should_stop():
                s.run(program.step)
        return hook.logged

    if mode == "graph":
        with tf.Graph().as_default():
            logged = run()
    else:
        logged = run()
    expected = {step: (4.0 * 0.8 ** (step - 1)) ** 2 for step in (2, 4, 6)}
    assert logged.keys() == expected.keys()
    for step, loss in expected.items():
        assert logged[step] == pytest.approx(loss, rel=1e-5)


def _keras_setup():
    import keras

    rng = np.random.default_rng(0)
    features = rng.normal(size=(64, 4)).astype("float32")
    labels = (features @ np.array([1.0, -2.0, 0.5, 3.0], dtype="float32"))[:, None]
    model = keras.Sequential(
        [keras.Input((4,)), keras.layers.Dense(8, "relu"), keras.layers.Dense(1)]
    )
    optimizer = keras.optimizers.Adam(0.01)
    optimizer.build(model.trainable_variables)
    global_step = monsession.get_or_create_global_step()
    loss_fn = keras.losses.MeanSquaredError()

    @tf.function
    def train_step():
        with tf.GradientTape() as tape:
            loss = loss_fn(labels, model(features, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        global_step.assign_add(1)
        return {"loss": loss}

    checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer, step=global_step)
    return model, checkpoint, train_step


class SaveAtEnd(monsession.SessionRunHook):
    """Writes the eager checkpoint when the session ends."""

    def __init__(self, checkpoint, directory):
        self.manager = tf.train.CheckpointManager(checkpoint, directory, max_to_keep=2)

    def end(self, session):
        self.manager.save(checkpoint_number=monsession.get_global_step())


def test_keras_model_trains_then_resumes_from_checkpoint(tmp_path):
    model, checkpoint, train_step = _keras_setup()
    loss_hook = LossEveryN("loss", every_n=10)
    hooks = [monsession.StopAtStepHook(last_step=30), loss_hook, SaveAtEnd(checkpoint, tmp_path)]
    scaffold = monsession.Scaffold(saver=checkpoint)
    with monsession.MonitoredTrainingSession(
        checkpoint_dir=str(tmp_path),
        scaffold=scaffold,
        hooks=hooks,
        save_checkpoint_secs=None,  # This test saves by itself, family installed or not.
        save_summaries_steps=None,
        log_step_count_steps=None,
    ) as sess:
        while not sess.should_stop():
            outputs = sess.run(train_step)
    assert isinstance(outputs["loss"], tf.Tensor), "run() returns tensors, not NumPy"
    assert sorted(loss_hook.logged) == [10, 20, 30]
    assert loss_hook.logged[30] < loss_hook.logged[10]
    saved_weights = [w.numpy() for w in model.weights]
    assert tf.train.latest_checkpoint(str(tmp_path)).endswith("ckpt-30")

    # A new process would rebuild everything; do the same here.
    tf.compat.v1.reset_default_graph()
    model, checkpoint, train_step = _keras_setup()
    resumed = []

    class FirstStep(monsession.SessionRunHook):
        def after_create_session(self, session, coord):
            resumed.append(int(session.run(monsession.get_global_step())))
            resumed.append([w.numpy() for w in model.weights])

    scaffold = monsession.Scaffold(saver=checkpoint)
    with monsession.MonitoredTrainingSession(
        checkpoint_dir=str(tmp_path),
        scaffold=scaffold,
        hooks=[FirstStep(), monsession.StopAtStepHook(last_step=35)],
        save_checkpoint_secs=None,
        save_summaries_steps=None,
        log_step_count_steps=None,
    ) as sess:
        steps = 0
        while not sess.should_stop():
            sess.run(train_step)
            steps += 1
    assert resumed[0] == 30
    for restored, saved in zip(resumed[1], saved_weights, strict=True):
        np.testing.assert_array_equal(restored, saved)
    assert steps == 5


def test_fetches_of_every_kind_come_back_as_numpy():
    program = make_program("eager")
    counter = []

    def zero_arg():
        counter.append(1)
        return program.weight * 2

    class Everything(monsession.SessionRunHook):
        def before_run(self, run_context):
            return monsession.SessionRunArgs(
                {"var": program.weight, "name": "loss", "fn": zero_arg, "t": tf.constant([1, 2])}
            )

        def after_run(self, run_context, run_values):
            self.results = run_values.results

    hook = Everything()
    with monsession.MonitoredSession(hooks=[hook]) as sess:
        sess.run(program.step)
    assert isinstance(hook.results["var"], np.floating)
    assert hook.results["var"] == pytest.approx(3.2)
    assert hook.results["name"] == pytest.approx(16.0)
    assert hook.results["fn"] == pytest.approx(6.4)
    np.testing.assert_array_equal(hook.results["t"], [1, 2])
    assert counter == [1]


def test_a_variable_fetched_by_several_hooks_is_read_once_per_step(monkeypatch):
    from monsession._backends import _eager_backend

    program = make_program("eager")
    global_step = monsession.get_global_step()
    reads = []
    to_numpy = _eager_backend.to_numpy

    def counting(value):
        if isinstance(value, tf.Variable):
            reads.append(value.name)
        return to_numpy(value)

    monkeypatch.setattr(_eager_backend, "to_numpy", counting)

    class Fetch(monsession.SessionRunHook):
        def __init__(self, fetches):
            self.fetches = fetches
            self.results = []

        def before_run(self, run_context):
            return monsession.SessionRunArgs(self.fetches)

        def after_run(self, run_context, run_values):
            self.results.append(run_values.results)

    # A callable fetch may change variables: reads after it start afresh.
    bump = Fetch(lambda: global_step.assign_add(10))
    hooks = [Fetch(global_step), Fetch({"step": global_step}), bump, Fetch([global_step])]
    with monsession.MonitoredSession(hooks=hooks) as sess:
        sess.run(program.step)
        sess.run(program.step)
    assert [h.results for h in hooks[:2]] == [[1, 12], [{"step": 1}, {"step": 12}]]
    assert hooks[3].results == [[11], [22]]
    # One read when the session is created (the step service); on the first
    # step one before the callable and one after it; from the second on the
    # step's own call returns the value before the callable (`returning_global_step`),
    # so one read after it.
    assert reads.count(global_step.name) == 4


def test_no_value_is_read_when_no_hook_asks():
    program = make_program("eager")
    evaluated = []

    class Sometimes(monsession.SessionRunHook):
        def __init__(self):
            self.calls = 0
            self.results = []

        def before_run(self, run_context):
            self.calls += 1
            if self.calls == 3:
                return monsession.SessionRunArgs(lambda: evaluated.append(1) or program.weight)
            return None

        def after_run(self, run_context, run_values):
            self.results.append(run_values.results)

    hook = Sometimes()
    with monsession.MonitoredSession(hooks=[hook]) as sess:
        outputs = [sess.run(program.step) for _ in range(4)]
    assert all(isinstance(o["loss"], tf.Tensor) for o in outputs)
    assert [r is None for r in hook.results] == [True, True, False, True]
    assert evaluated == [1]


def test_hook_feeds_become_keyword_arguments():
    program = make_program("eager")
    with monsession.MonitoredSession(hooks=[monsession.FeedFnHook(lambda: {"lr": 0.5})]) as sess:
        sess.run(program.step)
        assert program.weight.numpy() == pytest.approx(0.0)
        with pytest.raises(RuntimeError, match="Same tensor is fed by a SessionRunHook and user"):
            sess.run(program.step, feed_dict={"lr": 0.1})


def test_bad_input_names_the_hook_and_the_name():
    program = make_program("eager")

    class Fetches(monsession.SessionRunHook):
        def __init__(self, fetches=None, feeds=None):
            self.args = monsession.SessionRunArgs(fetches, feeds)

        def before_run(self, run_context):
            return self.args

    with monsession.MonitoredSession(hooks=[Fetches("los")]) as sess:
        with pytest.raises(ValueError, match=r"Fetches fetches 'los'.*entries \['loss'\]"):
            sess.run(program.step)
    with monsession.MonitoredSession(hooks=[Fetches(feeds={"learning_rate": 1.0})]) as sess:
        with pytest.raises(TypeError, match=r"Fetches feeds 'learning_rate'.*takes \['lr'\]"):
            sess.run(program.step)
    with monsession.MonitoredSession() as sess:
        with pytest.raises(TypeError, match=r"takes a step: a callable .* Got 42 of type int"):
            sess.run(42)
        with pytest.raises(TypeError, match=r"The caller feeds 'rate'.*takes \['lr'\]"):
            sess.run(program.step, feed_dict={"rate": 1.0})


def test_aborted_step_recovers_from_the_latest_checkpoint(tmp_path):
    program = make_program("eager")
    manager = tf.train.CheckpointManager(program.checkpoint, tmp_path, max_to_keep=3)
    created = []
    failed = []

    class Watch(monsession.SessionRunHook):
        def after_create_session(self, session, coord):
            created.append(int(session.run(program.global_step)))

        def after_run(self, run_context, run_values):
            step = int(run_context.session.run(program.global_step))
            if step == 2:
                manager.save(checkpoint_number=step)

    @tf.function
    def flaky_step():
        return program.step()

    def step():
        if int(program.global_step.numpy()) == 3 and not failed:
            failed.append(True)
            raise tf.errors.AbortedError(None, None, "preempted")
        return flaky_step()

    creator = monsession.ChiefSessionCreator(
        scaffold=monsession.Scaffold(saver=manager), checkpoint_dir=str(tmp_path)
    )
    hooks = [Watch(), monsession.StopAtStepHook(last_step=5)]
    with monsession.MonitoredSession(session_creator=creator, hooks=hooks) as sess:
        while not sess.should_stop():
            sess.run(step)
    assert created == [0, 2], "re-created once, from the step-2 checkpoint"
    assert int(program.global_step.numpy()) == 5


@pytest.mark.parametrize("error", ["out_of_range", "stop_iteration"])
def test_end_of_data_ends_the_with_block_cleanly(error):
    program = make_program("eager")
    iterator = iter(tf.data.Dataset.range(3))
    ended = []

    class End(monsession.SessionRunHook):
        def end(self, session):
            ended.append(int(session.run(program.global_step)))

    @tf.function
    def from_dataset():
        return {"x": iterator.get_next(), **program.step()}

    def python_step():
        return {"x": next(iterator), **program.step()}

    step = from_dataset if error == "out_of_range" else python_step
    seen = []
    with monsession.MonitoredSession(hooks=[End()]) as sess:
        while not sess.should_stop():
            seen.append(int(sess.run(step)["x"]))
    assert seen == [0, 1, 2]
    assert len(ended) == 1, "end() ran once: the exit was clean"


def test_run_step_fn_in_eager_mode():
    program = make_program("eager")

    def step_fn(step_context):
        before = step_context.session.run(program.global_step)
        outputs = step_context.run_with_hooks(program.step)
        if before >= 1:
            step_context.request_stop()
        return outputs

    with monsession.MonitoredSession() as sess:
        while not sess.should_stop():
            sess.run_step_fn(step_fn)
    assert int(program.global_step.numpy()) == 2


def test_checkpoint_without_state_to_restore_into_is_an_error(tmp_path):
    program = make_program("eager")
    program.checkpoint.save(str(tmp_path / "ckpt"))
    with pytest.raises(ValueError, match="nothing to restore it into"):
        monsession.MonitoredTrainingSession(checkpoint_dir=str(tmp_path))
