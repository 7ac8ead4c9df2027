"""`NanTensorHook`: a real divergence, caught at the right step, in both modes."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import tensorflow as tf
from debug_testing import (
    STABLE_LR,
    RequestRecorder,
    eager_program,
    first_bad_step,
    graph_program,
    host_reads_per_step,
    mode_context,
    run_until_stopped,
)

import monsession
from monsession.testing import hooked_session
from monsession_hooks_debug import NanLossDuringTrainingError, NanTensorHook

NAN_STEP = first_bad_step("nan")
INF_STEP = first_bad_step("inf")


def test_the_program_really_diverges():
    assert 1 < INF_STEP < NAN_STEP < 100


def test_error_class_matches_tensorflow():
    error = NanLossDuringTrainingError()
    assert isinstance(error, RuntimeError)
    assert str(error) == str(tf.compat.v1.train.NanLossDuringTrainingError())
    assert error.step is None and error.loss is None


# Graph mode, side by side with TensorFlow's hook.


def _graph_run(api, hook_class, fail_on_nan_loss):
    """Runs the diverging graph program; returns (runs, error)."""
    with tf.Graph().as_default():
        program = graph_program()
        hook = hook_class(program.loss, fail_on_nan_loss)
        runs, error = 0, None
        try:
            with api.MonitoredSession(hooks=[hook]) as session:
                while not session.should_stop():
                    runs += 1
                    session.run(program.step)
        except RuntimeError as caught:
            error = caught
        return runs, error


def test_graph_raise_side_by_side_with_tensorflow():
    tf_runs, tf_error = _graph_run(
        tf.compat.v1.train, tf.compat.v1.train.NanTensorHook, fail_on_nan_loss=True
    )
    our_runs, our_error = _graph_run(monsession, NanTensorHook, fail_on_nan_loss=True)
    assert isinstance(tf_error, tf.compat.v1.train.NanLossDuringTrainingError)
    assert isinstance(our_error, NanLossDuringTrainingError)
    assert tf_runs == our_runs == NAN_STEP
    assert our_error.step == NAN_STEP
    assert np.isnan(our_error.loss)
    assert str(our_error).startswith("NaN loss during training")


def test_graph_stop_side_by_side_with_tensorflow(caplog):
    tf_runs, tf_error = _graph_run(
        tf.compat.v1.train, tf.compat.v1.train.NanTensorHook, fail_on_nan_loss=False
    )
    with caplog.at_level(logging.WARNING, logger="tensorflow"):
        our_runs, our_error = _graph_run(monsession, NanTensorHook, fail_on_nan_loss=False)
    assert tf_error is None and our_error is None
    assert tf_runs == our_runs == NAN_STEP
    assert f"Model diverged with loss = NaN at global step {NAN_STEP}." in caplog.text


def test_graph_loss_given_by_name_and_inf_detection():
    with tf.Graph().as_default():
        program = graph_program()
        hook = NanTensorHook("loss", detect_inf=True)
        with pytest.raises(NanLossDuringTrainingError, match="Inf loss during training") as info:
            with monsession.MonitoredSession(hooks=[hook]) as sess:
                run_until_stopped(sess, program.step)
    assert info.value.step == INF_STEP
    assert np.isinf(info.value.loss)


def test_graph_hooked_session_without_begin_like_tensorflow_tests():
    # TensorFlow's own tests drive hooks through a hooked session without begin().
    with tf.Graph().as_default(), tf.compat.v1.Session() as sess:
        nan = tf.constant(np.nan, name="nan_loss")
        fine = tf.constant(1.0)
        raising = hooked_session(sess, [NanTensorHook(nan)])
        with pytest.raises(NanLossDuringTrainingError) as info:
            raising.run(fine)
        assert info.value.step is None  # No global step in this graph.
        stopping = hooked_session(sess, [NanTensorHook(nan, fail_on_nan_loss=False)])
        assert stopping.run(fine) == 1.0
        assert stopping.should_stop()
        healthy = hooked_session(sess, [NanTensorHook(fine)])
        healthy.run(fine)
        assert not healthy.should_stop()


def test_graph_asks_only_for_the_loss():
    with tf.Graph().as_default():
        program = graph_program(lr=STABLE_LR)
        recorder = RequestRecorder(NanTensorHook("loss"))
        with monsession.MonitoredSession(hooks=[recorder]) as sess:
            for _ in range(3):
                sess.run(program.step)
    assert len(recorder.requests) == 3
    assert all(request.fetches is program.loss for request in recorder.requests)
    assert all(request.options is None for request in recorder.requests)


# Eager mode.


@pytest.mark.parametrize("every", [1, 5, 100])
def test_eager_raise_names_the_first_bad_step(every):
    program = eager_program()
    hook = NanTensorHook("loss", check_every_n_steps=every)
    step_fn = hook.watch(program.step)
    with pytest.raises(NanLossDuringTrainingError) as info:
        with monsession.MonitoredSession(hooks=[hook]) as sess:
            for _ in range(120):
                sess.run(step_fn)
    assert info.value.step == NAN_STEP
    assert np.isnan(info.value.loss)
    # Found at the first check at or after the bad step.
    checked_at = -(-NAN_STEP // every) * every
    assert int(program.global_step.numpy()) == checked_at


@pytest.mark.parametrize("every", [1, 5])
def test_eager_stop_requests_a_stop(every, caplog):
    program = eager_program()
    hook = NanTensorHook("loss", fail_on_nan_loss=False, check_every_n_steps=every)
    with caplog.at_level(logging.WARNING, logger="tensorflow"):
        with monsession.MonitoredSession(hooks=[hook]) as sess:
            runs = run_until_stopped(sess, hook.watch(program.step))
    assert runs == -(-NAN_STEP // every) * every
    assert f"Model diverged with loss = NaN at global step {NAN_STEP}" in caplog.text


@pytest.mark.parametrize("every", [1, 4])
def test_eager_names_the_global_step_from_a_resumed_start(every):
    program = eager_program()
    program.global_step.assign(100)  # As restored from a checkpoint.
    hook = NanTensorHook("loss", check_every_n_steps=every)
    with pytest.raises(NanLossDuringTrainingError) as info:
        with monsession.MonitoredSession(hooks=[hook]) as sess:
            run_until_stopped(sess, hook.watch(program.step))
    assert info.value.step == 100 + NAN_STEP


def test_eager_checks_every_n_steps_on_the_global_step_after_a_resume_off_the_schedule():
    # A session restored at step 17 (a restart after a stop there) keeps the run's
    # schedule: checks at 20, 25, ... (before: 22, 27, ... from the session's start).
    program = eager_program()
    program.global_step.assign(17)
    hook = NanTensorHook("loss", fail_on_nan_loss=False, check_every_n_steps=5)
    with monsession.MonitoredSession(hooks=[hook]) as sess:
        run_until_stopped(sess, hook.watch(program.step))
    assert int(program.global_step.numpy()) == -(-(17 + NAN_STEP) // 5) * 5


def test_eager_default_mode_needs_no_watch_and_detects_inf():
    program = eager_program()
    hook = NanTensorHook("loss", detect_inf=True)
    with pytest.raises(NanLossDuringTrainingError, match="Inf loss") as info:
        with monsession.MonitoredSession(hooks=[hook]) as sess:
            run_until_stopped(sess, program.step)
    assert info.value.step == INF_STEP
    assert int(program.global_step.numpy()) == INF_STEP


@pytest.mark.parametrize("as_callable", [False, True])
def test_eager_variable_and_callable_losses(as_callable):
    tf.compat.v1.reset_default_graph()
    global_step = monsession.get_or_create_global_step()
    value = tf.Variable(1.0)

    @tf.function
    def step():
        global_step.assign_add(1)
        value.assign(tf.where(global_step >= 3, np.nan, 1.0))

    hook = NanTensorHook(value.read_value if as_callable else value, fail_on_nan_loss=False)
    with monsession.MonitoredSession(hooks=[hook]) as sess:
        assert run_until_stopped(sess, step) == 3


def test_deferred_mode_asks_for_nothing_and_keeps_losses_on_the_device():
    program = eager_program(lr=STABLE_LR)
    hook = NanTensorHook("loss", check_every_n_steps=10)
    step_fn = hook.watch(program.step)
    recorder = RequestRecorder(hook)
    with monsession.MonitoredSession(hooks=[recorder]) as sess:
        for _ in range(25):
            outputs = sess.run(step_fn)
            assert isinstance(outputs["loss"], tf.Tensor)  # Still a tensor for the caller.
    assert recorder.requests == [None] * 25


def test_deferred_mode_checks_what_is_left_at_the_end(caplog):
    program = eager_program()
    raising = NanTensorHook("loss", check_every_n_steps=100)
    step_fn = raising.watch(program.step)
    with pytest.raises(NanLossDuringTrainingError) as info:
        with monsession.MonitoredSession(hooks=[raising]) as sess:
            for _ in range(NAN_STEP + 2):
                sess.run(step_fn)
    assert info.value.step == NAN_STEP

    program = eager_program()
    logging_only = NanTensorHook("loss", fail_on_nan_loss=False, check_every_n_steps=100)
    step_fn = logging_only.watch(program.step)
    with caplog.at_level(logging.WARNING, logger="tensorflow"):
        with monsession.MonitoredSession(hooks=[logging_only]) as sess:
            for _ in range(NAN_STEP + 2):
                sess.run(step_fn)
    assert f"at global step {NAN_STEP}" in caplog.text


def test_deferred_mode_in_monitored_training_session(tmp_path):
    program = eager_program()
    hook = NanTensorHook("loss", check_every_n_steps=8)
    step_fn = hook.watch(program.step)
    with pytest.raises(NanLossDuringTrainingError) as info:
        with monsession.MonitoredTrainingSession(
            hooks=[hook], save_checkpoint_secs=None, save_summaries_steps=None
        ) as sess:
            run_until_stopped(sess, step_fn)
    assert info.value.step == NAN_STEP


class FusedLosses(monsession.SessionRunHook):
    """Keeps the loss of every step the session ran inside its fused loop."""

    def __init__(self) -> None:
        self.losses: list[float] = []

    def next_action(self, global_step):
        return monsession.NextAction(keep=("loss",))

    def before_run(self, run_context):
        if run_context.silent_steps:
            self.losses += run_context.silent_outputs["loss"].numpy().tolist()


def test_a_watched_step_fuses_in_the_epochs_loop(caplog):
    tf.compat.v1.reset_default_graph()
    global_step = monsession.get_or_create_global_step()

    @tf.function
    def step(x):
        reached = global_step.assign_add(1)
        loss = tf.where(reached >= 23, float("nan"), tf.cast(x, tf.float32))
        return {"loss": loss}

    hook = NanTensorHook("loss", fail_on_nan_loss=False, check_every_n_steps=5)
    fused = FusedLosses()
    data = monsession.Epochs(tf.data.Dataset.range(10), num_epochs=3)
    with caplog.at_level(logging.WARNING, logger="tensorflow"):
        with monsession.MonitoredSession(hooks=[hook, fused], steps_per_execution="auto") as sess:
            assert list(data.run(sess, hook.watch(step))) == [0, 1]
    # Stopped by the check at step 25, which names the first NaN's step.
    assert int(global_step.numpy()) == 25
    assert "Model diverged with loss = NaN at global step 23" in caplog.text
    # The first step, the checks (every 5) and the epochs' last steps ran with
    # the hooks; the 19 others ran fused, with their batches in order.
    assert len(fused.losses) == 19
    assert fused.losses[:7] == [1.0, 2.0, 3.0, 5.0, 6.0, 7.0, 8.0]


def test_watch_keeps_the_step_signature_for_feeds():
    program = eager_program(lr=STABLE_LR)
    weight = tf.Variable(1.0)

    @tf.function
    def step(scale):
        weight.assign(weight * scale)
        program.global_step.assign_add(1)
        return {"loss": weight * 1.0}

    hook = NanTensorHook("loss", check_every_n_steps=2)
    step_fn = hook.watch(step)
    with monsession.MonitoredSession(hooks=[hook]) as sess:
        sess.run(step_fn, feed_dict={"scale": tf.constant(2.0)})
        with pytest.raises(TypeError, match="takes no argument of that name"):
            sess.run(step_fn, feed_dict={"bogus": 1.0})
    assert weight.numpy() == 2.0


# Bad input.


def test_bad_arguments_at_construction():
    prefix = "^NanTensorHook: invalid check_every_n_steps="
    expected = "; expected a positive int number of steps"
    with pytest.raises(ValueError, match=prefix + "0" + expected):
        NanTensorHook("loss", check_every_n_steps=0)
    with pytest.raises(TypeError, match=prefix + "2.5 of type float" + expected):
        NanTensorHook("loss", check_every_n_steps=2.5)
    with pytest.raises(TypeError, match=prefix + "'3' of type str" + expected):
        NanTensorHook("loss", check_every_n_steps="3")
    with pytest.raises(TypeError, match="loss_tensor must be"):
        NanTensorHook(3.0)
    with pytest.raises(ValueError, match="empty name"):
        NanTensorHook("")
    with pytest.raises(
        TypeError, match=r"^NanTensorHook: fail_on_nan_loss must be a bool, got 'False' of type str"
    ):
        NanTensorHook("loss", fail_on_nan_loss="False")
    with pytest.raises(TypeError, match="watch"):
        NanTensorHook("loss").watch("not a step")


def test_graph_non_scalar_or_non_float_loss_fails_at_construction_or_begin():
    with tf.Graph().as_default():
        with pytest.raises(ValueError, match=r"NanTensorHook: loss_tensor must be a scalar.*\[3\]"):
            NanTensorHook(tf.zeros([3]))
        with pytest.raises(TypeError, match="dtype int32"):
            NanTensorHook(tf.constant(1, name="count"))
        NanTensorHook(tf.zeros([1]))  # A single element is accepted.
        tf.zeros([2, 2], name="matrix")
        hook = NanTensorHook("matrix")
        with pytest.raises(ValueError, match=r"shape \[2, 2\]"):
            hook.begin()
        with pytest.raises(ValueError, match="names no tensor"):
            NanTensorHook("missing").begin()
        with pytest.raises(TypeError, match="only works in eager mode"):
            NanTensorHook(lambda: 1.0).begin()


@pytest.mark.parametrize("every", [1, 4])
def test_eager_non_scalar_loss_fails_at_the_first_step(every):
    tf.compat.v1.reset_default_graph()
    global_step = monsession.get_or_create_global_step()

    @tf.function
    def step():
        global_step.assign_add(1)
        return {"loss": tf.ones([3])}

    hook = NanTensorHook("loss", check_every_n_steps=every)
    step_fn = hook.watch(step)
    with monsession.MonitoredSession(hooks=[hook]) as sess:
        # Checked when the first loss is kept, not only at the first check.
        with pytest.raises(ValueError, match=r"loss_tensor must be a scalar.*'loss'.*\[3\]"):
            sess.run(step_fn)


def test_eager_misuse_gets_clear_errors():
    program = eager_program(lr=STABLE_LR)
    with pytest.raises(TypeError, match="computed outside the step"):
        NanTensorHook(tf.constant(1.0)).begin()
    with pytest.raises(TypeError, match="must be the name of the loss entry"):
        NanTensorHook(tf.Variable(1.0), check_every_n_steps=3).begin()

    hook = NanTensorHook("loss", check_every_n_steps=3)
    with pytest.raises(ValueError, match=r"hook.watch\(train_step\)"):
        with monsession.MonitoredSession(hooks=[hook]) as sess:
            sess.run(program.step)

    hook = NanTensorHook("total", check_every_n_steps=3)
    with pytest.raises(
        ValueError, match=r"'total' entry, but the step returned entries \['loss'\]"
    ):
        with monsession.MonitoredSession(hooks=[hook]) as sess:
            sess.run(hook.watch(program.step))


# The device flag: a NaN at step 37, checked every 100 steps.

NAN_AT = 37


def _nan_at_step_37(mode):
    """A step whose loss is NaN from global step 37 on (the step after the run)."""
    global_step = monsession.get_or_create_global_step()
    if mode == "graph":
        increment = tf.compat.v1.assign_add(global_step, 1)
        loss = tf.where(increment >= NAN_AT, float("nan"), 1.0)
        return global_step, tf.group(increment, loss), loss

    @tf.function
    def step():
        reached = global_step.assign_add(1)
        return {"loss": tf.where(reached >= NAN_AT, float("nan"), 1.0)}

    return global_step, step, "loss"


@pytest.mark.parametrize("fail", [True, False], ids=["raise", "stop"])
@pytest.mark.parametrize(
    "variant", ["graph", "eager-every-step", "eager-watched-every-step", "eager-every-100"]
)
def test_nan_at_step_37_is_reported_as_step_37(variant, fail, caplog):
    mode = "graph" if variant == "graph" else "eager"
    every = 100 if variant == "eager-every-100" else 1
    with mode_context(mode):
        global_step, step, loss = _nan_at_step_37(mode)
        hook = NanTensorHook(loss, fail_on_nan_loss=fail, check_every_n_steps=every)
        run = hook.watch(step) if variant.startswith("eager-w") or every > 1 else step
        error = None
        with caplog.at_level(logging.WARNING, logger="tensorflow"):
            try:
                with monsession.MonitoredSession(hooks=[hook]) as sess:
                    for _ in range(150):
                        if sess.should_stop():
                            break
                        sess.run(run)
            except NanLossDuringTrainingError as caught:
                error = caught
            checked = (
                int(global_step.numpy()) if mode == "eager" else NAN_AT
            )  # Graph mode checks the loss of every run, fetched with it.
    # The first check at or after the NaN finds it, and names the step of the NaN.
    assert checked == (100 if every == 100 else NAN_AT)
    if fail:
        assert error is not None and error.step == NAN_AT and np.isnan(error.loss)
    else:
        assert error is None
    assert f"Model diverged with loss = NaN at global step {NAN_AT}" in caplog.text
    if every == 100:
        assert "(found by the check at global step 100)" in caplog.text


@pytest.mark.parametrize("fail", [True, False], ids=["raise", "stop"])
def test_nan_at_step_37_fused_between_checks(fail, caplog):
    tf.compat.v1.reset_default_graph()
    global_step, step, _ = _nan_at_step_37("eager")
    hook = NanTensorHook("loss", fail_on_nan_loss=fail, check_every_n_steps=20)
    runs = RunsSeen()
    error = None
    with caplog.at_level(logging.WARNING, logger="tensorflow"):
        try:
            with monsession.MonitoredSession(
                hooks=[hook, runs], steps_per_execution="auto"
            ) as sess:
                run_until_stopped(sess, hook.watch(step))
        except NanLossDuringTrainingError as caught:
            error = caught
    # Stopped at the check at 40; the steps between checks ran fused, flagged inside the loop.
    assert int(global_step.numpy()) == 40
    assert runs.silent and sum(runs.silent) >= 30
    if fail:
        assert error is not None and error.step == NAN_AT
    assert f"Model diverged with loss = NaN at global step {NAN_AT}" in caplog.text


class RunsSeen(monsession.SessionRunHook):
    """Records how many steps ran fused before each run it sees (it acts at every check)."""

    def __init__(self) -> None:
        self.silent: list[int] = []

    def next_action(self, global_step):
        return monsession.NextAction(steps=20 - global_step % 20)

    def before_run(self, run_context):
        self.silent.append(run_context.silent_steps)


def test_the_flag_is_read_only_when_a_check_is_due():
    program = eager_program(lr=STABLE_LR)
    hook = NanTensorHook("loss", check_every_n_steps=5)
    reads = host_reads_per_step([hook], hook.watch(program.step), 15)
    # One read (the flag) at each check, on global steps 5, 10 and 15; none between.
    assert [index + 1 for index, count in enumerate(reads) if count] == [5, 10, 15]
    assert all(count == 1 for count in reads if count)


@pytest.mark.parametrize("every", [1, 5])
def test_watched_step_detects_inf_and_names_its_value(every):
    program = eager_program()
    hook = NanTensorHook("loss", detect_inf=True, check_every_n_steps=every)
    with pytest.raises(NanLossDuringTrainingError, match="Inf loss during training") as info:
        with monsession.MonitoredSession(hooks=[hook]) as sess:
            run_until_stopped(sess, hook.watch(program.step))
    assert info.value.step == INF_STEP
    assert np.isinf(info.value.loss)
    assert int(program.global_step.numpy()) == -(-INF_STEP // every) * every


def test_a_watched_python_step_is_checked_beside_it(caplog):
    # A step that is not a tf.function: its loss is checked in a call of its own.
    program = eager_program()

    def python_step():
        return program.step()

    hook = NanTensorHook("loss", fail_on_nan_loss=False, check_every_n_steps=5)
    with caplog.at_level(logging.WARNING, logger="tensorflow"):
        with monsession.MonitoredSession(hooks=[hook]) as sess:
            runs = run_until_stopped(sess, hook.watch(python_step))
    assert runs == -(-NAN_STEP // 5) * 5
    assert f"Model diverged with loss = NaN at global step {NAN_STEP}" in caplog.text
