"""Bad input fails at construction, naming the owner, the argument and what was expected."""

from __future__ import annotations

import math
import os
import re

import numpy as np
import pytest
import tensorflow as tf

import monsession

SESSIONS = ["MonitoredSession", "SingularMonitoredSession", "MonitoredTrainingSession"]


class _DuckHook:
    """A hook that is no SessionRunHook subclass but has the five methods."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def begin(self):
        self.calls.append("begin")

    def after_create_session(self, session, coord):
        self.calls.append("after_create_session")

    def before_run(self, run_context):
        self.calls.append("before_run")

    def after_run(self, run_context, run_values):
        self.calls.append("after_run")

    def end(self, session):
        self.calls.append("end")


class _NoEnd:
    def begin(self):
        pass

    def after_create_session(self, session, coord):
        pass

    def before_run(self, run_context):
        pass

    def after_run(self, run_context, run_values):
        pass


def _make(owner: str, argument: str, hooks):
    extra = {"log_step_count_steps": None} if owner == "MonitoredTrainingSession" else {}
    return getattr(monsession, owner)(**{argument: hooks}, **extra)


def _arguments():
    for owner in SESSIONS:
        yield owner, "hooks"
    yield "MonitoredTrainingSession", "chief_only_hooks"


# Each case: the hooks (two good ones first, so the index is the user's), the
# error pattern after "<owner>: ".
BAD_HOOKS = [
    pytest.param(
        lambda: [
            monsession.StopAtStepHook(1),
            monsession.StopAtStepHook(2),
            monsession.StopAtStepHook,
        ],
        r"{arg}\[2\] is the class StopAtStepHook, not an instance; "
        r"did you mean StopAtStepHook\(...\)\?",
        id="class",
    ),
    pytest.param(
        lambda: [monsession.StopAtStepHook(1), tf.compat.v1.train.StopAtStepHook],
        r"{arg}\[1\] is the class StopAtStepHook, not an instance; did you mean",
        id="tf-class",
    ),
    pytest.param(
        lambda: [monsession.StopAtStepHook(1), None],
        r"{arg}\[1\] is None; expected a SessionRunHook instance",
        id="none",
    ),
    pytest.param(
        lambda: [object()],
        r"{arg}\[0\] is <object object at .*> of type object, which lacks begin, "
        r"after_create_session, before_run, after_run, end; expected a SessionRunHook",
        id="object",
    ),
    pytest.param(
        lambda: [monsession.StopAtStepHook(1), _NoEnd()],
        r"{arg}\[1\] is .*_NoEnd.*, which lacks end; expected a SessionRunHook instance",
        id="duck-without-end",
    ),
    pytest.param(
        lambda: [int],
        r"{arg}\[0\] is the class int; expected a SessionRunHook instance",
        id="other-class",
    ),
    pytest.param(
        lambda: monsession.StopAtStepHook(1),
        r"{arg} must be a list of SessionRunHook instances, got .*StopAtStepHook.*; "
        r"did you mean {arg}=\[StopAtStepHook\(...\)\]\?",
        id="single-hook",
    ),
    pytest.param(
        lambda: "StopAtStepHook",
        r"{arg} must be a list of SessionRunHook instances, got 'StopAtStepHook' of type str\.",
        id="string",
    ),
]


@pytest.mark.parametrize(("owner", "argument"), list(_arguments()))
@pytest.mark.parametrize(("hooks", "pattern"), BAD_HOOKS)
def test_bad_hooks_raise_type_error_naming_the_argument_and_index(
    graph, owner, argument, hooks, pattern
):
    tf.constant(0)  # Nothing to do with the error: the session never gets that far.
    with pytest.raises(TypeError, match=f"^{owner}: " + pattern.format(arg=argument)):
        _make(owner, argument, hooks())
    assert not graph.finalized  # Nothing ran: no hook's begin(), no session.


@pytest.mark.parametrize("mode", ["graph", "eager"])
def test_tensorflow_and_duck_typed_hooks_are_accepted_and_called(mode):
    duck = _DuckHook()
    context = tf.Graph().as_default() if mode == "graph" else _FreshEager()
    with context:
        step = monsession.get_or_create_global_step()
        if mode == "graph":
            run = tf.compat.v1.assign_add(step, 1)
        else:
            run = tf.function(lambda: step.assign_add(1))
        hooks = (
            (duck, tf.compat.v1.train.StopAtStepHook(last_step=2)) if mode == "graph" else (duck,)
        )
        with monsession.MonitoredSession(hooks=iter(hooks)) as sess:
            sess.run(run)
            sess.run(run)
            stopped = sess.should_stop()
    assert duck.calls == [
        "begin",
        "after_create_session",
        "before_run",
        "after_run",
        "before_run",
        "after_run",
        "end",
    ]
    assert stopped == (mode == "graph")


class _FreshEager:
    def __enter__(self):
        tf.compat.v1.reset_default_graph()

    def __exit__(self, *exc):
        tf.compat.v1.reset_default_graph()


# --- MonitoredTrainingSession's schedule arguments --------------------------------------

STEP_ARGUMENTS = ["save_checkpoint_steps", "save_summaries_steps", "log_step_count_steps"]
SECS_ARGUMENTS = ["save_checkpoint_secs", "save_summaries_secs"]


def _schedule_cases():
    for name in STEP_ARGUMENTS:
        for value, error in [
            (-1, ValueError),
            ("10", TypeError),
            (True, TypeError),
            (2.5, TypeError),
            (b"1", TypeError),
        ]:
            yield pytest.param(name, value, error, "int number of steps", id=f"{name}={value!r}")
    for name in SECS_ARGUMENTS:
        for value, error in [
            (-0.5, ValueError),
            ("60", TypeError),
            (False, TypeError),
            (math.nan, ValueError),
        ]:
            yield pytest.param(name, value, error, "number of seconds", id=f"{name}={value!r}")


@pytest.mark.parametrize(("name", "value", "error", "unit"), list(_schedule_cases()))
def test_training_session_schedule_arguments(graph, tmp_path, name, value, error, unit):
    expected = f"None or 0 (off), or a positive {unit}"
    got = re.escape(repr(value))
    pattern = (
        f"^MonitoredTrainingSession: invalid {name}={got}( of type \\w+)?; "
        f"expected {re.escape(expected)}\\."
    )
    with pytest.raises(error, match=pattern):
        monsession.MonitoredTrainingSession(checkpoint_dir=str(tmp_path), **{name: value})
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("steps_name", "secs_name"),
    [
        ("save_checkpoint_steps", "save_checkpoint_secs"),
        ("save_summaries_steps", "save_summaries_secs"),
    ],
)
def test_training_session_refuses_both_of_a_schedule(graph, steps_name, secs_name):
    # TensorFlow raises too (its hook's timer refuses both), with no argument named.
    with pytest.raises(
        ValueError,
        match=f"^MonitoredTrainingSession: give only one of {steps_name} and {secs_name}; "
        f"got {steps_name}=10 and {secs_name}=5. Set the other to None.",
    ):
        monsession.MonitoredTrainingSession(**{steps_name: 10, secs_name: 5})


@pytest.mark.parametrize("value", [None, 0, 0.0, np.int64(0)])
@pytest.mark.parametrize("name", STEP_ARGUMENTS + SECS_ARGUMENTS)
def test_training_session_keeps_tensorflow_off_values(graph, name, value):
    """None and 0 turn a default hook off, as in TensorFlow; they are not errors."""
    if "steps" in name and isinstance(value, float):
        value = 0  # Steps are ints.
    monsession.get_or_create_global_step()
    with monsession.MonitoredTrainingSession(checkpoint_dir=None, **{name: value}) as sess:
        assert not sess.should_stop()


def test_training_session_accepts_numpy_ints(graph):
    step = monsession.get_or_create_global_step()
    train = tf.compat.v1.assign_add(step, 1)
    with monsession.MonitoredTrainingSession(log_step_count_steps=np.int64(5)) as sess:
        sess.run(train)


# --- Directories ------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["graph", "eager"])
@pytest.mark.parametrize("argument", ["checkpoint_dir", "summary_dir"])
@pytest.mark.parametrize("under", [False, True], ids=["file", "under-file"])
def test_training_session_directory_that_is_a_file(tmp_path, mode, argument, under):
    existing = tmp_path / "a-file"
    existing.write_text("keep me")
    path = existing / "sub" if under else existing
    where = f"lies under the file {re.escape(repr(str(existing)))}" if under else "is a file"
    context = tf.Graph().as_default() if mode == "graph" else _FreshEager()
    with (
        context,
        pytest.raises(
            ValueError,
            match=f"^MonitoredTrainingSession: {argument} {re.escape(repr(str(path)))} {where}; "
            "expected a directory.",
        ),
    ):
        monsession.MonitoredTrainingSession(**{argument: str(path)})
    assert existing.read_text() == "keep me"


def test_singular_session_checkpoint_dir_that_is_a_file(graph, tmp_path):
    path = tmp_path / "a-file"
    path.write_text("")
    with pytest.raises(
        ValueError, match=r"^SingularMonitoredSession: checkpoint_dir '.*a-file' is a file"
    ):
        monsession.SingularMonitoredSession(checkpoint_dir=str(path))


def test_read_only_checkpoint_dir_is_fine_without_saving(graph):
    """Restoring only (no saver hook): an unwritable directory is not an error."""
    monsession.get_or_create_global_step()
    with monsession.SingularMonitoredSession(checkpoint_dir="/proc/self"):
        pass


# --- The helpers themselves -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "error", "pattern"),
    [
        (
            {},
            ValueError,
            "exactly one of every_steps and every_secs must be given; got every_steps=None",
        ),
        (
            {"every_secs": 1, "every_steps": 1},
            ValueError,
            "exactly one of every_steps and every_secs must be given, not both",
        ),
        (
            {"every_steps": -1},
            ValueError,
            "invalid every_steps=-1; expected a non-negative int number of steps",
        ),
        (
            {"every_secs": -0.5},
            ValueError,
            "invalid every_secs=-0.5; expected a non-negative number of seconds",
        ),
        ({"every_steps": "3"}, TypeError, "invalid every_steps='3' of type str; expected"),
        ({"every_steps": True}, TypeError, "invalid every_steps=True of type bool; expected"),
        ({"every_steps": 1.5}, TypeError, "invalid every_steps=1.5 of type float; expected"),
        ({"every_secs": math.nan}, ValueError, "invalid every_secs=nan; expected"),
    ],
)
def test_timer_bad_arguments(kwargs, error, pattern):
    with pytest.raises(error, match="^SecondOrStepTimer: " + pattern):
        monsession.SecondOrStepTimer(**kwargs)


def test_timer_accepts_zero_as_tensorflow_does():
    timer = monsession.SecondOrStepTimer(every_steps=0)
    timer.update_last_triggered_step(3)
    assert not timer.should_trigger_for_step(3)
    assert timer.should_trigger_for_step(4)


def test_check_schedule_at_most_one():
    monsession.plugins.check_schedule("Hook", "n_steps", None, "n_secs", None, allow_neither=True)
    with pytest.raises(
        ValueError,
        match=r"^Hook: at most one of n_steps and n_secs may be given; "
        r"got n_steps=1 and n_secs=2\.0",
    ):
        monsession.plugins.check_schedule("Hook", "n_steps", 1, "n_secs", 2.0, allow_neither=True)
    with pytest.raises(
        ValueError, match=r"^Hook: invalid n_secs=0; expected a positive number of seconds\."
    ):
        monsession.plugins.check_schedule("Hook", "n_steps", None, "n_secs", 0)


def test_check_directory(tmp_path):
    missing = tmp_path / "a" / "b"
    monsession.plugins.check_directory("Hook", "output_dir", missing)
    assert not (tmp_path / "a").exists()  # Checked, not created.
    assert os.listdir(tmp_path) == []  # The write probe leaves nothing behind.
    monsession.plugins.check_directory(
        "Hook", "output_dir", "gs://bucket/dir"
    )  # Remote: not checked.
    # /proc/self is a directory where nobody, not even root, can create files.
    with pytest.raises(PermissionError, match=r"^Hook: cannot write to output_dir '/proc/self': "):
        monsession.plugins.check_directory("Hook", "output_dir", "/proc/self")
    with pytest.raises(
        PermissionError,
        match=r"^Hook: cannot create output_dir '/proc/self/x/y': cannot write to '/proc/self'",
    ):
        monsession.plugins.check_directory("Hook", "output_dir", "/proc/self/x/y")
    monsession.plugins.check_directory("Hook", "output_dir", "/proc/self", writable=False)
    with pytest.raises(TypeError, match=r"^Hook: output_dir must be a directory path, got None"):
        monsession.plugins.check_directory("Hook", "output_dir", None)
    with pytest.raises(ValueError, match=r"^Hook: output_dir must be a directory path, got ''"):
        monsession.plugins.check_directory("Hook", "output_dir", "")


# --- Session creators, sessions and control hooks --------------------------------------------


def _file(tmp_path):
    path = tmp_path / "a-file"
    path.write_text("keep me")
    return path


CREATOR_CASES = [
    (
        {"scaffold": "scaffold"},
        TypeError,
        r"scaffold must be a monsession\.Scaffold \(or None\), got 'scaffold' of type str",
    ),
    ({"scaffold": monsession.Scaffold}, TypeError, r"scaffold must be .*got the class Scaffold"),
    ({"master": None}, TypeError, r"master must be a string .*got None of type NoneType"),
    (
        {"config": {"allow_soft_placement": True}},
        TypeError,
        r"config must be a tf\.compat\.v1\.ConfigProto",
    ),
]


@pytest.mark.parametrize(
    "owner",
    [
        "ChiefSessionCreator",
        "WorkerSessionCreator",
        "SingularMonitoredSession",
        "MonitoredTrainingSession",
    ],
)
@pytest.mark.parametrize(("kwargs", "error", "pattern"), CREATOR_CASES)
def test_creator_arguments_of_the_wrong_type(graph, owner, kwargs, error, pattern):
    with pytest.raises(error, match=f"^{owner}: {pattern}"):
        getattr(monsession, owner)(**kwargs)


@pytest.mark.parametrize("owner", ["ChiefSessionCreator", "SingularMonitoredSession"])
@pytest.mark.parametrize("under", [False, True], ids=["file", "under-file"])
def test_chief_creator_checkpoint_dir_that_is_a_file(graph, tmp_path, owner, under):
    path = _file(tmp_path)
    directory = path / "train" if under else path
    where = "lies under the file" if under else "is a file"
    with pytest.raises(ValueError, match=f"^{owner}: checkpoint_dir '.*' {where}"):
        getattr(monsession, owner)(checkpoint_dir=str(directory))
    assert path.read_text() == "keep me"


@pytest.mark.parametrize("owner", ["ChiefSessionCreator", "SingularMonitoredSession"])
@pytest.mark.parametrize(
    ("value", "error"), [(3, TypeError), (["model.ckpt-1"], TypeError), ("", ValueError)]
)
def test_checkpoint_filename_with_path_of_the_wrong_type(graph, owner, value, error):
    with pytest.raises(
        error, match=f"^{owner}: checkpoint_filename_with_path must be a checkpoint path"
    ):
        getattr(monsession, owner)(checkpoint_filename_with_path=value)


def test_creators_accept_tensorflow_inputs(graph, tmp_path):
    """Paths, ConfigProto and TensorFlow's own Scaffold keep working."""
    monsession.get_or_create_global_step()
    config = tf.compat.v1.ConfigProto(allow_soft_placement=True)
    creator = monsession.ChiefSessionCreator(
        scaffold=tf.compat.v1.train.Scaffold(), config=config, checkpoint_dir=tmp_path / "missing"
    )
    with monsession.MonitoredSession(session_creator=creator) as session:
        assert session.run(tf.compat.v1.train.get_global_step()) == 0
    monsession.WorkerSessionCreator(max_wait_secs=0)


@pytest.mark.parametrize(
    ("value", "error"),
    [("10", TypeError), (None, TypeError), (-1, ValueError), (math.nan, ValueError)],
)
@pytest.mark.parametrize("owner", ["WorkerSessionCreator", "MonitoredTrainingSession"])
def test_max_wait_secs(graph, owner, value, error):
    with pytest.raises(error, match=f"^{owner}: invalid max_wait_secs="):
        getattr(monsession, owner)(max_wait_secs=value)


@pytest.mark.parametrize(
    ("value", "error"), [("120", TypeError), (None, TypeError), (-1, ValueError)]
)
@pytest.mark.parametrize("owner", SESSIONS)
def test_stop_grace_period_secs(graph, owner, value, error):
    with pytest.raises(error, match=f"^{owner}: invalid stop_grace_period_secs="):
        getattr(monsession, owner)(stop_grace_period_secs=value)


@pytest.mark.parametrize(
    ("creator", "pattern"),
    [
        (monsession.ChiefSessionCreator, r"got the class ChiefSessionCreator, not an instance"),
        ("master", r"got 'master' of type str"),
    ],
)
def test_monitored_session_refuses_a_bad_session_creator(graph, creator, pattern):
    with pytest.raises(
        TypeError,
        match=r"^MonitoredSession: session_creator must be a SessionCreator instance .*" + pattern,
    ):
        monsession.MonitoredSession(session_creator=creator)


@pytest.mark.parametrize("argument", ["is_chief", "save_graph_def"])
@pytest.mark.parametrize("value", ["False", None, 2])
def test_training_session_flags_must_be_bools(graph, argument, value):
    with pytest.raises(
        TypeError,
        match=f"^MonitoredTrainingSession: {argument} must be a bool, got {re.escape(repr(value))}",
    ):
        monsession.MonitoredTrainingSession(**{argument: value})


def test_training_session_accepts_numpy_bool_flags(graph):
    monsession.get_or_create_global_step()
    with monsession.MonitoredTrainingSession(is_chief=np.bool_(True), save_graph_def=0) as session:
        assert not session.should_stop()


@pytest.mark.parametrize(
    ("value", "error", "pattern"),
    [
        ("3", TypeError, r"invalid wait_until_step='3' of type str"),
        (None, TypeError, r"invalid wait_until_step=None of type NoneType"),
        (2.5, TypeError, r"invalid wait_until_step=2\.5 of type float"),
        (-1, ValueError, r"invalid wait_until_step=-1; expected a non-negative int global step"),
    ],
)
def test_global_step_waiter_hook_bad_wait_until_step(value, error, pattern):
    with pytest.raises(error, match="^GlobalStepWaiterHook: " + pattern):
        monsession.GlobalStepWaiterHook(wait_until_step=value)


def test_global_step_waiter_hook_zero_starts_at_once(graph):
    monsession.get_or_create_global_step()
    one = tf.constant(1)
    waiter = monsession.GlobalStepWaiterHook(wait_until_step=np.int64(0))
    with monsession.MonitoredSession(hooks=[waiter]) as session:
        session.run(one)
    assert waiter._worker_is_started


@pytest.mark.parametrize(
    ("final_ops", "held"),
    [
        (3, "3 of type int"),
        ([None], "None of type NoneType"),
        ({"w": 1.5}, "1.5 of type float"),
        (tf.Variable, "the class|of type type"),
    ],
)
def test_final_ops_hook_bad_final_ops(graph, final_ops, held):
    with pytest.raises(
        TypeError, match=r"^FinalOpsHook: final_ops must be a tensor, .*; it holds "
    ):
        monsession.FinalOpsHook(final_ops)


@pytest.mark.parametrize("feed", [[1.0], "x", 3])
def test_final_ops_hook_bad_feed_dict(graph, feed):
    with pytest.raises(
        TypeError, match=r"^FinalOpsHook: final_ops_feed_dict must be a dict .* or None, got "
    ):
        monsession.FinalOpsHook(tf.constant(1.0), final_ops_feed_dict=feed)


def test_final_ops_hook_accepts_tensorflow_fetches(graph):
    step = monsession.get_or_create_global_step()
    value = tf.compat.v1.placeholder(tf.float32, [])
    doubled = value * 2
    hook = monsession.FinalOpsHook(
        {"step": step, "name": doubled.name, "doubled": [doubled]}, final_ops_feed_dict={value: 2.0}
    )
    with monsession.MonitoredSession(hooks=[hook]):
        pass
    values = hook.final_ops_values
    assert [values["step"], values["name"], values["doubled"][0]] == [0, 4.0, 4.0]


def test_stop_at_step_hook_messages_name_the_hook():
    with pytest.raises(
        ValueError,
        match=r"^StopAtStepHook: One of num_steps or last_step must be specified; "
        r"got num_steps=None and last_step=None\.",
    ):
        monsession.StopAtStepHook()
    with pytest.raises(
        ValueError,
        match=r"^StopAtStepHook: Only one of num_steps or last_step can be specified; "
        r"got num_steps=1 and last_step=2\.",
    ):
        monsession.StopAtStepHook(num_steps=1, last_step=2)


@pytest.mark.parametrize("value", ["False", None, 2, 0.0])
def test_check_flag(value):
    monsession.plugins.check_flag("Hook", "at_end", True)
    monsession.plugins.check_flag("Hook", "at_end", np.bool_(False))
    monsession.plugins.check_flag("Hook", "at_end", 1)
    with pytest.raises(
        TypeError, match=f"^Hook: at_end must be a bool, got {re.escape(repr(value))} of type"
    ):
        monsession.plugins.check_flag("Hook", "at_end", value)


@pytest.mark.parametrize(
    ("make", "equivalent"),
    [
        (lambda: tf.compat.v1.train.StopAtStepHook(last_step=3), "monsession.StopAtStepHook"),
        (
            lambda: tf.compat.v1.train.LoggingTensorHook(["loss"], every_n_iter=1),
            "monsession.hooks.LoggingTensorHook (pip install monsession-hooks-logging)",
        ),
        (
            lambda: tf.compat.v1.train.CheckpointSaverHook("/tmp/unused", save_steps=1),
            "monsession.hooks.CheckpointSaverHook (pip install monsession-hooks-checkpoint)",
        ),
    ],
    ids=["StopAtStepHook", "LoggingTensorHook", "CheckpointSaverHook"],
)
def test_tensorflows_own_hooks_in_an_eager_session_are_refused_naming_ours(make, equivalent):
    """At construction, before TensorFlow's hook fails at its first step with a raw error."""
    tf.compat.v1.reset_default_graph()
    hook = make()
    for create in (
        lambda: monsession.MonitoredSession(hooks=[monsession.FinalOpsHook([]), hook]),
        lambda: monsession.MonitoredTrainingSession(hooks=[hook]),
    ):
        with pytest.raises(TypeError) as raised:
            create()
        message = str(raised.value)
        name = type(hook).__name__
        assert f"is tf.compat.v1.train.{name} ({name}), TensorFlow's own hook" in message
        assert f"Use {equivalent} instead" in message
    tf.compat.v1.reset_default_graph()


def test_tensorflows_own_hooks_still_run_in_graph_mode():
    with tf.Graph().as_default():
        step = monsession.get_or_create_global_step()
        train_op = step.assign_add(1)
        with monsession.MonitoredSession(
            hooks=[tf.compat.v1.train.StopAtStepHook(last_step=2)]
        ) as sess:
            while not sess.should_stop():
                done = sess.run(train_op)
    assert done == 2
