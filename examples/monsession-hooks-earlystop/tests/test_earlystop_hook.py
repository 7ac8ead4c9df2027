"""EarlyStoppingHook stops real training runs, in graph and eager mode."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Any

import pytest
import tensorflow as tf
from earlystop_testing import (
    BEST,
    BEST_STEP,
    SAFETY_LAST_STEP,
    STOP_STEP,
    make_program,
    mode_context,
    train,
)
from monsession_hooks_earlystop import EarlyStoppingHook

import monsession

MODES = ["graph", "eager"]

# The loss of step 8, the last one above the plateau (see earlystop_testing).
LOSS_AT_8 = pytest.approx(1.0995114)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("arguments", "stop", "best", "best_step"),
    [
        ({"patience": 3, "every_n_steps": 2}, STOP_STEP, BEST, BEST_STEP),
        # 1.0 does not beat 1.0995 by more than 0.2: the last improvement is step 8.
        ({"patience": 3, "every_n_steps": 2, "min_delta": 0.2}, 14, LOSS_AT_8, 8),
        # Every step: 1.0 at step 9 improves, step 10 does not.
        ({"patience": 1, "every_n_steps": 1}, 10, BEST, 9),
        ({"patience": 5, "every_n_steps": 3}, 24, BEST, 9),
    ],
    ids=["patience3-every2", "min-delta", "patience1-every1", "patience5-every3"],
)
def test_stops_after_patience_evaluations_without_improvement(
    mode: str, arguments: dict[str, Any], stop: int, best: Any, best_step: int
) -> None:
    with mode_context(mode):
        program = make_program(mode)
        hook = EarlyStoppingHook(program.loss, **arguments)
        assert (hook.best, hook.best_step, hook.stopped_step) == (None, None, None)
        final_step = train(program, [hook])
    assert final_step == stop
    assert hook.stopped_step == stop
    assert hook.best == best
    assert hook.best_step == best_step


def _monitors(mode: str, program: Any) -> dict[str, Any]:
    """Every kind of `monitor` the mode accepts, each naming the score."""
    if mode == "graph":
        return {
            "tensor": program.score,
            "name": "score",
            "name:0": "score:0",
            "variable": program.score_variable,
        }
    return {
        "entry name": program.score,
        "variable": program.score_variable,
        "callable": program.score_variable.read_value,
    }


@pytest.mark.parametrize("mode", MODES)
def test_mode_max_with_every_kind_of_monitor(mode: str) -> None:
    with mode_context(mode):
        program = make_program(mode)
        hooks = {
            kind: EarlyStoppingHook(monitor, patience=3, mode="max", every_n_steps=2)
            for kind, monitor in _monitors(mode, program).items()
        }
        final_step = train(program, list(hooks.values()))
    assert final_step == STOP_STEP
    for kind, hook in hooks.items():
        assert (kind, hook.stopped_step, hook.best, hook.best_step) == (
            kind,
            STOP_STEP,
            -BEST,
            BEST_STEP,
        )


@pytest.mark.parametrize("mode", MODES)
def test_baseline_that_is_never_beaten_stops_after_patience_evaluations(mode: str) -> None:
    with mode_context(mode):
        program = make_program(mode)
        hook = EarlyStoppingHook(program.loss, patience=3, every_n_steps=2, baseline=0.5)
        final_step = train(program, [hook])
    assert final_step == hook.stopped_step == 6
    assert (hook.best, hook.best_step) == (None, None)


@pytest.mark.parametrize("mode", MODES)
def test_no_improvement_runs_until_the_last_step(mode: str) -> None:
    with mode_context(mode):
        program = make_program(mode)
        hook = EarlyStoppingHook(program.loss, patience=100, every_n_steps=2)
        final_step = train(program, [hook])
    assert final_step == SAFETY_LAST_STEP
    assert hook.stopped_step is None
    assert (hook.best, hook.best_step) == (BEST, BEST_STEP)


class RecordingHook(EarlyStoppingHook):
    """Records, per run, what `before_run` asked the session to fetch (`None`: nothing).

    Runs are numbered by the global step they reach (from 1): in eager mode
    the session does not call the hook on steps where it does not act.
    """

    requests: dict[int, Any]

    def begin(self) -> None:
        super().begin()
        self.requests = {}

    def before_run(self, run_context: monsession.SessionRunContext) -> Any:
        request = super().before_run(run_context)
        self.requests[run_context.global_step + 1] = None if request is None else request.fetches
        return request

    def fetched(self) -> dict[int, Any]:
        """The fetches of the runs (numbered from 1) that fetched anything."""
        return {run: request for run, request in self.requests.items() if request is not None}


EVALUATIONS = list(range(5, SAFETY_LAST_STEP + 1, 5))


@pytest.mark.parametrize(
    ("mode", "kind", "fetching_runs"),
    [
        # A tensor or variable of known shape is checked in begin().
        ("graph", "loss", EVALUATIONS),
        ("eager", "variable", EVALUATIONS),
        # An entry of the step's outputs is read once at run 1, to check it.
        ("eager", "loss", [1, *EVALUATIONS]),
    ],
)
def test_fetches_nothing_but_the_metric_and_only_at_evaluations(
    mode: str, kind: str, fetching_runs: list[int]
) -> None:
    with mode_context(mode):
        program = make_program(mode)
        monitor = program.loss if kind == "loss" else program.score_variable
        hook = RecordingHook(monitor, patience=100, every_n_steps=5)
        train(program, [hook])
    fetched = hook.fetched()
    assert sorted(fetched) == fetching_runs
    # Never the global step: the step service gives it.
    assert all(request is monitor for request in fetched.values())


@contextlib.contextmanager
def raw_session(mode: str) -> Iterator[Any]:
    """A plain session for `monsession.testing.hooked_session`, variables initialized."""
    if mode == "graph":
        with tf.compat.v1.Session() as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            yield sess
    else:
        sess = monsession.EagerSession()
        try:
            yield sess
        finally:
            sess.close()


@pytest.mark.parametrize("mode", MODES)
def test_runs_in_a_hooked_session(mode: str) -> None:
    with mode_context(mode):
        program = make_program(mode)
        hook = RecordingHook(program.loss, patience=3, every_n_steps=2)
        hook.begin()
        with raw_session(mode) as sess:
            hooked = monsession.testing.hooked_session(sess, [hook])
            while not hooked.should_stop():
                hooked.run(program.step)
    assert len(hook.requests) == hook.stopped_step == STOP_STEP
    assert (hook.best, hook.best_step) == (BEST, BEST_STEP)
    evaluations = sorted(hook.fetched())
    first = [1] if mode == "eager" else []  # "loss" is checked at the first run.
    assert evaluations == [*first, *range(2, STOP_STEP + 1, 2)]


def test_evaluates_at_multiples_of_the_global_step_when_it_does_not_start_at_zero() -> None:
    with mode_context("eager"):
        program = make_program("eager")
        program.global_step.assign(7)
        read_at: list[int] = []

        def score() -> Any:
            read_at.append(int(program.global_step.numpy()))
            return program.score_variable.read_value()

        hook = EarlyStoppingHook(score, patience=100, mode="max", every_n_steps=5)
        with monsession.MonitoredSession(hooks=[hook]) as sess:
            for _ in range(14):
                sess.run(program.step)
    assert read_at == [8, 10, 15, 20]


def test_each_evaluation_resynchronizes_with_the_global_step() -> None:
    with mode_context("eager"):
        program = make_program("eager")
        read_at: list[int] = []

        def score() -> Any:
            read_at.append(int(program.global_step.numpy()))
            return program.score_variable.read_value()

        hook = EarlyStoppingHook(score, patience=100, mode="max", every_n_steps=5)
        with monsession.MonitoredSession(hooks=[hook]) as sess:
            for _ in range(5):
                sess.run(program.step)
            program.global_step.assign_add(3)  # Steps the hook did not see.
            while program.global_step.numpy() < 22:
                sess.run(program.step)
    # The evaluation due by the session's count (step 10) comes at step 13:
    # the step service corrects its count when the hook's fetch reads the
    # device. The next evaluations are back at multiples of 5.
    assert read_at == [1, 5, 13, 15, 20]


def test_begin_resets_the_hook_for_the_next_session() -> None:
    hook = EarlyStoppingHook("loss", patience=3, every_n_steps=2)
    for _ in range(2):
        with mode_context("eager"):
            program = make_program("eager")
            assert train(program, [hook]) == STOP_STEP
        assert (hook.stopped_step, hook.best, hook.best_step) == (STOP_STEP, BEST, BEST_STEP)


def _program_without_global_step(mode: str) -> tuple[Any, Any]:
    """The plateau program without a global step: (step, monitor)."""
    if mode == "graph":
        weight = tf.compat.v1.get_variable("w", initializer=5.0)
        loss = tf.maximum(tf.square(weight), 1.0, name="loss")
        return tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss), loss
    weight = tf.Variable(5.0)

    @tf.function
    def step() -> dict[str, Any]:
        with tf.GradientTape() as tape:
            loss = tf.maximum(tf.square(weight), 1.0)
        weight.assign_sub(0.1 * tape.gradient(loss, weight))
        return {"loss": loss}

    return step, "loss"


@pytest.mark.parametrize("mode", MODES)
def test_without_global_step_counts_runs(mode: str) -> None:
    with mode_context(mode):
        step, monitor = _program_without_global_step(mode)
        hook = EarlyStoppingHook(monitor, patience=3, every_n_steps=2)
        runs = 0
        with monsession.MonitoredSession(hooks=[hook]) as sess:
            while not sess.should_stop() and runs < SAFETY_LAST_STEP:
                sess.run(step)
                runs += 1
    assert runs == hook.stopped_step == STOP_STEP
    assert (hook.best, hook.best_step) == (BEST, BEST_STEP)


def test_logs_the_stop_on_tensorflows_logger(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="tensorflow")
    with mode_context("eager"):
        program = make_program("eager")
        train(program, [EarlyStoppingHook("loss", patience=3, every_n_steps=2)])
    records = [r for r in caplog.records if r.module == "_early_stopping"]
    assert [r.levelname for r in records] == ["DEBUG"] * 8 + ["INFO"]
    assert records[-1].getMessage() == (
        "Early stopping at global step 16: loss did not improve by more than 0 in 3 "
        "evaluations (every 2 steps); best: 1 at global step 10."
    )
    assert records[6].getMessage() == "loss = 1 at global step 14: no improvement (2 of 3)."


def test_logs_a_baseline_that_was_never_beaten(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="tensorflow")
    with mode_context("graph"):
        program = make_program("graph")
        train(program, [EarlyStoppingHook("loss", patience=2, every_n_steps=3, baseline=0.5)])
    assert [r.getMessage() for r in caplog.records if r.module == "_early_stopping"] == [
        "Early stopping at global step 6: loss did not improve by more than 0 in 2 "
        "evaluations (every 3 steps); best: none beat baseline 0.5."
    ]


# Bad input.


def _graph_tensor(dtype: Any, shape: list[int]) -> Any:
    with tf.Graph().as_default():
        return tf.zeros(shape, dtype=dtype, name="metric")


@pytest.mark.parametrize(
    ("arguments", "error", "message"),
    [
        ({"monitor": 3}, TypeError, "EarlyStoppingHook: monitor must be a scalar Tensor"),
        ({"monitor": ""}, ValueError, "EarlyStoppingHook: monitor must not be an empty string"),
        (
            {"monitor": _graph_tensor(tf.float32, [3])},
            ValueError,
            "EarlyStoppingHook: monitor must be a scalar; 'metric:0' has shape [3].",
        ),
        (
            {"monitor": _graph_tensor(tf.string, [])},
            TypeError,
            "EarlyStoppingHook: monitor must be a scalar numeric tensor; 'metric:0' has dtype "
            "string.",
        ),
        ({"patience": 0}, ValueError, "EarlyStoppingHook: patience must be an int >= 1, got 0."),
        ({"patience": 1.5}, TypeError, "EarlyStoppingHook: patience must be an int >= 1"),
        ({"patience": True}, TypeError, "EarlyStoppingHook: patience must be an int >= 1"),
        ({"min_delta": -0.1}, ValueError, "EarlyStoppingHook: min_delta must be >= 0, got -0.1."),
        ({"min_delta": "0"}, TypeError, "EarlyStoppingHook: min_delta must be a real number"),
        ({"min_delta": float("nan")}, ValueError, "EarlyStoppingHook: min_delta must be finite"),
        (
            {"mode": "auto"},
            ValueError,
            "EarlyStoppingHook: mode must be 'min' or 'max', got 'auto'.",
        ),
        ({"every_n_steps": 0}, ValueError, "EarlyStoppingHook: every_n_steps must be an int >= 1"),
        ({"every_n_steps": None}, TypeError, "EarlyStoppingHook: every_n_steps must be an int"),
        ({"baseline": float("inf")}, ValueError, "EarlyStoppingHook: baseline must be finite"),
        ({"baseline": "1"}, TypeError, "EarlyStoppingHook: baseline must be a real number"),
    ],
)
def test_bad_arguments_fail_at_construction(
    arguments: dict[str, Any], error: type[Exception], message: str
) -> None:
    arguments = {"monitor": "loss", **arguments}
    with pytest.raises(error) as info:
        EarlyStoppingHook(**arguments)
    assert str(info.value).startswith(message)


def test_eager_tensor_monitor_fails_at_construction() -> None:
    with pytest.raises(TypeError, match="cannot be a tensor computed outside the step"):
        EarlyStoppingHook(tf.constant(1.0))


@pytest.mark.parametrize(
    ("monitor", "error", "message"),
    [
        (lambda: 1.0, TypeError, "EarlyStoppingHook: a callable monitor only works in eager mode"),
        (
            "no_such_tensor",
            ValueError,
            "EarlyStoppingHook: monitor 'no_such_tensor' names no tensor of the graph",
        ),
    ],
)
def test_graph_mode_monitor_errors_when_the_session_is_created(
    monitor: Any, error: type[Exception], message: str
) -> None:
    with mode_context("graph"):
        program = make_program("graph")
        hook = EarlyStoppingHook(monitor)
        with pytest.raises(error, match=message) as info:
            train(program, [hook])
    if isinstance(monitor, str):
        assert isinstance(info.value, monsession.plugins.TensorNotFoundError)


def test_graph_tensor_of_unknown_shape_is_checked_at_the_first_step() -> None:
    with mode_context("graph"):
        program = make_program("graph")
        vector = tf.compat.v1.placeholder_with_default(tf.zeros([2]), shape=None, name="vector")
        hook = RecordingHook("vector", every_n_steps=1000)
        with pytest.raises(ValueError, match=r"the value of 'vector' has shape \[2\]"):
            train(program, [hook])
    assert len(hook.requests) == 1
    assert hook.requests[1] is vector


@pytest.mark.parametrize(
    ("monitor", "error", "message"),
    [
        ("los", ValueError, r"EarlyStoppingHook fetches 'los', but the step returned no entry"),
        ("flag", TypeError, "monitor must be a scalar numeric tensor; the value of 'flag' has"),
        ("vector", ValueError, r"the value of 'vector' has shape \[2\]"),
    ],
)
def test_eager_bad_entry_fails_at_the_first_step(
    monitor: str, error: type[Exception], message: str
) -> None:
    with mode_context("eager"):
        program = make_program("eager")

        def step() -> dict[str, Any]:
            outputs = program.step()
            return {**outputs, "flag": tf.constant(True), "vector": tf.zeros([2])}

        hook = EarlyStoppingHook(monitor, every_n_steps=1000)
        runs = 0
        with pytest.raises(error, match=message):
            with monsession.MonitoredSession(hooks=[hook]) as sess:
                while True:
                    runs += 1
                    sess.run(step)
    assert runs == 1
