"""The global-step helpers and `basic_train_loop`, side by side with `tf.compat.v1.train`.

The same program runs with TensorFlow's function and with monsession's; what
they create, return and raise is compared.
"""

from __future__ import annotations

import contextlib
import logging

import pytest
import tensorflow as tf

import monsession

TF = tf.compat.v1.train
_GLOBAL_STEP = tf.compat.v1.GraphKeys.GLOBAL_STEP


def _outcome(call):
    """What `call()` returned, or the type and message of what it raised."""
    try:
        return ("returned", call())
    except Exception as error:  # The outcome is what is compared.
        return (type(error).__name__, str(error))


def _describe(variable) -> dict:
    graph = variable.graph
    return {
        "name": variable.name,
        "dtype": variable.dtype,
        "shape": variable.shape.as_list(),
        "trainable": variable.trainable,
        "aggregation": variable.aggregation,
        "class": type(variable).__name__,
        "device": variable.device,
        "in_global_step": [v.name for v in graph.get_collection(_GLOBAL_STEP)],
        "in_global_variables": [v.name for v in tf.compat.v1.global_variables()],
        "in_trainable": [v.name for v in tf.compat.v1.trainable_variables()],
    }


@pytest.mark.parametrize("scoped", [False, True])
def test_create_global_step_makes_tensorflows_variable(scoped):
    made = {}
    for api in (TF, monsession):
        with tf.Graph().as_default():
            tf.compat.v1.get_variable("w", [])
            scope = tf.name_scope("tower") if scoped else contextlib.nullcontext()
            with scope:
                variable = api.create_global_step()
            made[api.__name__] = (
                _describe(variable),
                _outcome(api.create_global_step),
                api.get_or_create_global_step() is variable,
                TF.get_global_step() is variable and monsession.get_global_step() is variable,
            )
            with tf.compat.v1.Session() as session:
                session.run(tf.compat.v1.global_variables_initializer())
                made[api.__name__] += (api.global_step(session, variable),)
    assert made["monsession"] == made[TF.__name__]
    description, second, same, found, value = made["monsession"]
    assert description["name"] == "global_step:0"
    assert second == ("ValueError", '"global_step" already exists.')
    assert same and found and value == 0


# What get_global_step meets in real programs, each built in the graph it is called in.
_GRAPHS = {
    "none": lambda graph: None,
    "by name only": lambda graph: tf.Variable(0, dtype=tf.int64, name="global_step"),
    "float": lambda graph: graph.add_to_collection(_GLOBAL_STEP, tf.Variable(0.0)),
    "vector": lambda graph: graph.add_to_collection(
        _GLOBAL_STEP, tf.Variable([0, 0], dtype=tf.int64)
    ),
    "two": lambda graph: [
        graph.add_to_collection(_GLOBAL_STEP, tf.Variable(0, dtype=tf.int64)) for _ in range(2)
    ],
}


@pytest.mark.parametrize("case", ["none", "by name only", "float", "vector", "two"])
def test_get_global_step_finds_what_tensorflows_finds(case):
    seen = {}
    for api in (TF, monsession):
        with tf.Graph().as_default() as graph:
            _GRAPHS[case](graph)
            found = _outcome(lambda: api.get_global_step(graph))  # noqa: B023
            made = _outcome(lambda: api.get_or_create_global_step(graph))  # noqa: B023
        seen[api.__name__] = [
            ("returned", outcome[1].name) if getattr(outcome[1], "name", None) else outcome
            for outcome in (found, made)
        ]
    assert seen["monsession"] == seen[TF.__name__]


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[tuple[str, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append((record.levelname, record.getMessage()))


def test_get_global_step_logs_several_steps_as_tensorflow_does():
    logger = logging.getLogger("tensorflow")
    logged = {}
    for api in (TF, monsession):
        records = _Records()
        logger.addHandler(records)
        try:
            with tf.Graph().as_default() as graph:
                _GRAPHS["two"](graph)
                assert api.get_global_step(graph) is None
        finally:
            logger.removeHandler(records)
        logged[api.__name__] = records.lines
    assert logged["monsession"] == logged[TF.__name__]
    assert logged["monsession"] == [("ERROR", "Multiple tensors in global_step collection.")]


def test_assert_global_step_accepts_and_refuses_what_tensorflow_does():
    with tf.Graph().as_default():
        values = [
            tf.Variable(0, dtype=tf.int64),
            tf.Variable(0, dtype=tf.int32),
            tf.constant(3),
            tf.compat.v1.placeholder(tf.int64, shape=None),
            tf.Variable(0.0),
            tf.Variable([1, 2]),
            5,
            "global_step",
        ]
        for value in values:
            ours = _outcome(lambda: monsession.assert_global_step(value))  # noqa: B023
            assert ours == _outcome(lambda: TF.assert_global_step(value)), value  # noqa: B023


def test_global_step_in_eager_mode():
    variable = tf.Variable(7, dtype=tf.int64)
    assert monsession.global_step(None, variable) == TF.global_step(None, variable) == 7


class _Preempted:
    """A step function that raises one real `AbortedError` at its `at`-th call."""

    def __init__(self, at: int) -> None:
        self.at, self.calls = at, 0

    def __call__(self, session, train_op, *, trace):
        self.calls += 1
        if self.calls == self.at:
            raise tf.errors.AbortedError(None, None, "injected preemption")
        trace.append(int(session.run(train_op)))


def test_basic_train_loop_under_a_supervisor_as_tensorflows(tmp_path):
    traces = {}
    for api in (TF, monsession):
        trace: list[int] = []
        with tf.Graph().as_default():
            global_step = api.get_or_create_global_step()
            train_op = global_step.assign_add(1)
            supervisor = tf.compat.v1.train.Supervisor(logdir=None)
            step = _Preempted(at=3)

            def stop_at_five(session, train_op, *, trace, step=step, supervisor=supervisor):
                step(session, train_op, trace=trace)
                if trace and trace[-1] % 5 == 0:
                    supervisor.request_stop()

            api.basic_train_loop(supervisor, stop_at_five, args=[train_op], kwargs={"trace": trace})
        traces[api.__name__] = trace
    # The preempted session is left, a new one initializes the step again.
    assert traces["monsession"] == traces[TF.__name__] == [1, 2, 1, 2, 3, 4, 5]


class _EagerSupervisor:
    """A supervisor for eager mode: each managed session is a monsession session."""

    def __init__(self, last_step: int) -> None:
        self._last_step, self._session = last_step, None

    @contextlib.contextmanager
    def managed_session(self, master=""):
        hooks = [monsession.StopAtStepHook(last_step=self._last_step)]
        with monsession.MonitoredSession(hooks=hooks) as session:
            self._session = session
            yield session

    def should_stop(self) -> bool:
        return self._session.should_stop()


def test_basic_train_loop_in_eager_mode_with_a_supervisor_like_object():
    tf.compat.v1.reset_default_graph()  # A fresh global step.
    global_step = monsession.get_or_create_global_step()
    global_step.assign(0)
    trace: list[int] = []
    step = tf.function(lambda: global_step.assign_add(1))
    monsession.basic_train_loop(
        _EagerSupervisor(last_step=6),
        _Preempted(at=3),
        args=[step],
        kwargs={"trace": trace},
    )
    # The step before the preemption stays done: the eager variable lives on.
    assert trace == [1, 2, 3, 4, 5, 6]


def test_basic_train_loop_names_what_it_was_given_instead_of_a_supervisor():
    with pytest.raises(TypeError, match=r"supervisor must have a managed_session\(\) method"):
        monsession.basic_train_loop(object(), lambda session: None)
    with pytest.raises(TypeError, match="train_step_fn must be callable"):
        monsession.basic_train_loop(_EagerSupervisor(1), None)
