"""Bad input: clear errors naming the hook, the argument and what was expected."""

from __future__ import annotations

import pytest
import tensorflow as tf
from logging_hooks_testing import program_in, train

import monsession
from monsession_hooks_logging import LoggingTensorHook, ProgressBarHook

# --- At construction -----------------------------------------------------------------------

STEPS = "invalid every_n_iter="
SECS = "invalid every_n_secs="


@pytest.mark.parametrize(
    "kwargs, error, pattern",
    [
        ({"every_n_iter": 5, "every_n_secs": 5}, ValueError, "either at_end and/or exactly one"),
        ({"every_n_iter": 5, "every_n_secs": 5, "at_end": True}, ValueError, "either at_end"),
        ({}, ValueError, r"either at_end and/or exactly one of .* got every_n_iter=None"),
        ({"every_n_iter": 0}, ValueError, STEPS + "0"),
        ({"every_n_iter": -10}, ValueError, STEPS + "-10"),
        ({"every_n_iter": "5"}, TypeError, STEPS + "'5' of type str"),
        ({"every_n_iter": True}, TypeError, STEPS + "True of type bool"),
        ({"every_n_iter": 2.5}, TypeError, STEPS + "2.5 of type float"),
        ({"every_n_secs": 0}, ValueError, SECS + "0"),
        ({"every_n_secs": -1.5}, ValueError, SECS + "-1.5"),
        ({"every_n_secs": "1"}, TypeError, SECS + "'1' of type str"),
        ({"every_n_iter": 1, "formatter": "%s"}, TypeError, "formatter must be callable"),
        ({"at_end": "yes"}, TypeError, "at_end must be a bool, got 'yes' of type str"),
    ],
)
def test_logging_tensor_hook_rejects_bad_arguments(kwargs, error, pattern):
    with pytest.raises(error, match="^LoggingTensorHook: " + pattern):
        LoggingTensorHook(["loss"], **kwargs)


@pytest.mark.parametrize("tensors", ["loss", 3, None])
def test_tensors_must_be_a_dict_or_a_list(tensors):
    with pytest.raises(TypeError, match="LoggingTensorHook: tensors must be a dict of tags"):
        LoggingTensorHook(tensors, every_n_iter=1)


def test_an_eager_tensor_in_a_list_needs_a_tag():
    with pytest.raises(TypeError, match="no name to use as its tag; pass tensors as a dict"):
        LoggingTensorHook([tf.constant(1.0)], every_n_iter=1)


@pytest.mark.parametrize(
    "kwargs, error, pattern",
    [
        (
            {"every_n_iter": 5, "every_n_secs": 5},
            ValueError,
            "at most one of every_n_iter and every_n_secs may be given",
        ),
        ({"every_n_iter": 0}, ValueError, STEPS + "0"),
        ({"every_n_iter": "10"}, TypeError, STEPS + "'10' of type str"),
        ({"every_n_secs": -2}, ValueError, SECS + "-2"),
        ({"every_n_secs": True}, TypeError, SECS + "True of type bool"),
        (
            {"log_every_n_secs": -1},
            ValueError,
            "invalid log_every_n_secs=-1; expected a non-negative number of seconds",
        ),
        (
            {"log_every_n_secs": None},
            TypeError,
            "invalid log_every_n_secs=None of type NoneType; expected",
        ),
        ({"last_step": -3}, ValueError, r"invalid last_step=-3; expected a global step >= 0"),
        (
            {"last_step": "3"},
            TypeError,
            r"invalid last_step='3' of type str; expected a global step >= 0",
        ),
        (
            {"last_step": 10, "stop_hook": monsession.StopAtStepHook(last_step=10)},
            ValueError,
            "give at most one of last_step and stop_hook",
        ),
        ({"stop_hook": object()}, TypeError, "stop_hook must have a last_step attribute"),
        (
            {"stop_hook": tf.compat.v1.train.StopAtStepHook(last_step=3)},
            TypeError,
            "stop_hook must have .* like monsession.StopAtStepHook .*pass last_step=",
        ),
        ({"tensors": "loss"}, TypeError, "tensors must be a dict of tags"),
    ],
)
def test_progress_bar_hook_rejects_bad_arguments(kwargs, error, pattern):
    with pytest.raises(error, match="^ProgressBarHook: " + pattern):
        ProgressBarHook(**kwargs)


# --- Graph mode: at begin() ------------------------------------------------------------------


@pytest.mark.parametrize(
    "make_hook, argument",
    [
        (lambda: LoggingTensorHook(["loss", "nope"], every_n_iter=1), "tensors[1]"),
        (lambda: ProgressBarHook({"x": "nope"}), "tensors['x']"),
    ],
    ids=["LoggingTensorHook", "ProgressBarHook"],
)
def test_graph_unknown_name_fails_in_begin(make_hook, argument):
    hook = make_hook()
    name = type(hook).__name__
    with program_in("graph"):
        with pytest.raises(monsession.plugins.TensorNotFoundError) as raised:
            hook.begin()
        assert isinstance(raised.value, KeyError), "a KeyError, as in TensorFlow"
        assert str(raised.value) == (
            f"{name}: {argument} 'nope' names no tensor of the graph. The name 'nope:0' refers "
            "to a Tensor which does not exist. The operation, 'nope', does not exist in the graph."
        )
        with pytest.raises(KeyError, match="'nope'"):
            monsession.MonitoredSession(hooks=[make_hook()])


def test_graph_ambiguous_name_and_foreign_tensor():
    with tf.Graph().as_default() as other:
        foreign = tf.constant(1.0, name="foreign")
    with tf.Graph().as_default():
        tf.split(tf.zeros([4]), 2, name="halves")
        with pytest.raises(ValueError, match="LoggingTensorHook: the name 'halves' is ambiguous"):
            LoggingTensorHook(["halves"], every_n_iter=1).begin()
        LoggingTensorHook(["halves:1"], every_n_iter=1).begin()
        with pytest.raises(ValueError, match=r"tensors\['f'\] .* belongs to another graph"):
            LoggingTensorHook({"f": foreign}, every_n_iter=1).begin()
    assert foreign.graph is other


def test_global_step_is_required_by_the_progress_bar():
    with tf.Graph().as_default():
        with pytest.raises(RuntimeError, match="Global step should be created to use ProgressBar"):
            ProgressBarHook().begin()


# --- Eager mode: at the first step that fetches the name ----------------------------------------


@pytest.mark.parametrize(
    "make_hook",
    [
        lambda: LoggingTensorHook(["loss", "nope"], every_n_iter=2),
        lambda: ProgressBarHook(["nope"], every_n_iter=2),
    ],
    ids=["LoggingTensorHook", "ProgressBarHook"],
)
def test_eager_unknown_name_fails_at_the_first_fetching_step(make_hook):
    hook = make_hook()
    with program_in("eager") as program:
        with monsession.MonitoredSession(hooks=[hook]) as session:  # begin() accepts names.
            with pytest.raises(ValueError) as raised:
                session.run(program.step)
            assert str(raised.value).startswith(f"{type(hook).__name__} fetches 'nope'")
            assert "entries ['loss']" in str(raised.value)


def test_eager_at_end_alone_cannot_log_a_step_output():
    with program_in("eager"):
        hook = LoggingTensorHook(["loss"], at_end=True)
        with pytest.raises(ValueError, match="at_end alone cannot log 'loss'"):
            hook.begin()


def test_eager_at_end_alone_logs_variables(caplog):
    caplog.set_level("INFO", logger="tensorflow")
    with program_in("eager") as program:
        train(program, [LoggingTensorHook({"w": program.weight}, at_end=True)], steps=2)
    assert [r.getMessage() for r in caplog.records if r.name == "tensorflow"] == ["w = 2.56"]


def test_eager_unsupported_target_fails_in_begin():
    with program_in("eager"):
        pattern = r"LoggingTensorHook: in eager mode tensors\['x'\] must be the name of an entry"
        with pytest.raises(TypeError, match=pattern):
            LoggingTensorHook({"x": 3.0}, every_n_iter=1).begin()


# --- Saved state ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "make", [lambda: LoggingTensorHook(["loss"], every_n_iter=2), ProgressBarHook]
)
@pytest.mark.parametrize("iterations", [-1, 1.5, True, "3", None])
def test_a_state_with_bad_iterations_is_refused_and_changes_nothing(make, iterations):
    hook = make()
    hook.load_state_dict(
        {"iterations": 7, "timer": {"last_triggered_step": 6, "secs_since_trigger": 1}}
    )
    kept = hook.state_dict()
    name = type(hook).__name__
    with pytest.raises(ValueError, match=rf"^{name}: iterations must be an int >= 0, got "):
        hook.load_state_dict(
            {"iterations": iterations, "timer": {"last_triggered_step": 1, "secs_since_trigger": 0}}
        )
    assert hook.state_dict()["iterations"] == kept["iterations"] == 7
    assert hook.state_dict()["timer"]["last_triggered_step"] == 6
