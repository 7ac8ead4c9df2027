"""A user hook beside `MonitoredTrainingSession`'s default hook of the same kind.

Graph mode keeps TensorFlow's behaviour, side by side with
`tf.compat.v1.train` on the same program: both hooks run and both save
(checkpoints twice, summaries and `global_step/sec` twice). monsession also
warns, once per process and kind, naming the arguments that turn the default
off. Runs in the `all` env (checkpoint and summary families together).
"""

from __future__ import annotations

import glob
import logging
import os

import pytest
import tensorflow as tf
from tensorboard.backend.event_processing import event_file_loader

import monsession
import monsession.testing
from monsession import plugins


@pytest.fixture(autouse=True)
def _fresh_warnings():
    """Each test sees the once-per-process warnings afresh."""
    plugins.reset_plugin_manager()
    yield
    plugins.reset_plugin_manager()


def _program(train):
    """A counter program; the step's global-step read comes before its increment."""
    global_step = tf.compat.v1.train.get_or_create_global_step()
    tf.compat.v1.summary.scalar("value", tf.cast(global_step, tf.float32) * 2.0)
    with tf.control_dependencies([monsession.testing.global_step_read_tensor()]):
        return global_step.assign_add(1)


def _user_hook(train, kind, directory, summary_op):
    if kind == "checkpoint":
        return train.CheckpointSaverHook(directory, save_steps=3)
    if kind == "summary":
        return train.SummarySaverHook(save_steps=2, output_dir=directory, summary_op=summary_op)
    return train.StepCounterHook(every_n_steps=2, output_dir=directory)


def _train(train, kind, directory, steps=7):
    """Runs `train.MonitoredTrainingSession` with its defaults and a user hook of `kind`."""
    with tf.Graph().as_default():
        train_op = _program(train)
        summary_op = tf.compat.v1.summary.merge_all()
        hook = _user_hook(train, kind, directory, summary_op)
        with train.MonitoredTrainingSession(
            checkpoint_dir=directory, hooks=[hook], log_step_count_steps=3
        ) as session:
            for _ in range(steps):
                session.run(train_op)
    tf.compat.v1.summary.FileWriterCache.clear()


def _checkpoints(directory):
    """The checkpoint files and the checkpoint state's list, by name."""
    files = sorted(os.path.basename(p) for p in glob.glob(os.path.join(directory, "*.index")))
    state = tf.train.get_checkpoint_state(directory)
    listed = [os.path.basename(path) for path in state.all_model_checkpoint_paths]
    steps = [
        int(tf.train.load_checkpoint(os.path.join(directory, name)).get_tensor("global_step"))
        for name in listed
    ]
    return files, listed, steps


def _events(directory):
    """(step, what) of every summary value and session log, in file order."""
    found = []
    for path in sorted(glob.glob(os.path.join(directory, "events.*"))):
        for event in event_file_loader.LegacyEventFileLoader(path).Load():
            if event.HasField("summary"):
                found += [(int(event.step), value.tag) for value in event.summary.value]
            elif event.HasField("session_log"):
                found.append((int(event.step), f"session_log:{event.session_log.status}"))
    return found


def _kind_warnings(caplog):
    return [
        record
        for record in caplog.records
        if record.name == "monsession" and "your hooks include a" in record.getMessage()
    ]


TURN_OFF = {
    "checkpoint": (
        "CheckpointSaverHook",
        "(save_checkpoint_secs=600)",
        "save_checkpoint_secs=None, save_checkpoint_steps=None",
    ),
    "summary": (
        "SummarySaverHook",
        "(save_summaries_steps=100)",
        "save_summaries_steps=None, save_summaries_secs=None",
    ),
    "step_counter": ("StepCounterHook", "(log_step_count_steps=3)", "log_step_count_steps=None"),
}


@pytest.mark.parametrize("kind", sorted(TURN_OFF))
def test_graph_mode_saves_what_tensorflow_saves_and_warns_once(tmp_path, caplog, kind):
    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    _train(tf.compat.v1.train, kind, theirs)
    with caplog.at_level(logging.WARNING, logger="monsession"):
        _train(monsession, kind, ours)
        _train(monsession, kind, str(tmp_path / "again"))
    if kind == "checkpoint":
        assert _checkpoints(ours) == _checkpoints(theirs)
    else:
        assert _events(ours) == _events(theirs)  # The same events, STARTs included.
    name, values, turn_off = TURN_OFF[kind]
    [warning] = _kind_warnings(caplog)
    assert warning.levelno == logging.WARNING
    assert warning.getMessage() == (
        f"MonitoredTrainingSession: your hooks include a {name} and the default {name} "
        f"{values} is on too; both run, as in TensorFlow, and save the same things twice. "
        f"To keep only yours, pass {turn_off}."
    )


def test_graph_mode_duplicates_are_what_the_issue_names(tmp_path):
    """The double saves are real: a second ckpt-0, a second global_step/sec at a step."""
    ours = str(tmp_path / "ours")
    _train(monsession, "checkpoint", ours)
    files, listed, steps = _checkpoints(ours)
    assert files == [
        "model.ckpt-0.index",
        "model.ckpt-3.index",
        "model.ckpt-6.index",
        "model.ckpt-7.index",
    ]
    assert steps == [int(name.split("-")[1]) for name in listed]
    _train(monsession, "step_counter", str(tmp_path / "rate"))
    rates = [step for step, tag in _events(tmp_path / "rate") if tag == "global_step/sec"]
    assert len(rates) > len(set(rates)), rates


def test_turning_the_default_off_as_the_warning_says_keeps_only_yours(tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="monsession"):
        with tf.Graph().as_default():
            train_op = _program(monsession)
            hook = monsession.SummarySaverHook(
                save_steps=2, output_dir=str(tmp_path), summary_op=tf.compat.v1.summary.merge_all()
            )
            with monsession.MonitoredTrainingSession(
                checkpoint_dir=str(tmp_path),
                hooks=[hook],
                save_summaries_steps=None,
                save_summaries_secs=None,
                log_step_count_steps=None,
                save_checkpoint_secs=None,
            ) as session:
                for _ in range(5):
                    session.run(train_op)
        tf.compat.v1.summary.FileWriterCache.clear()
    assert _kind_warnings(caplog) == []
    assert [step for step, tag in _events(tmp_path) if tag == "value"] == [1, 3, 5]


def test_eager_mode_user_checkpoint_hook_beside_the_default_one(tmp_path, caplog):
    tf.compat.v1.reset_default_graph()
    global_step = monsession.get_or_create_global_step()
    checkpoint = tf.train.Checkpoint(step=global_step)

    @tf.function
    def step():
        global_step.assign_add(1)

    user = monsession.CheckpointSaverHook(str(tmp_path), save_steps=2, saver=checkpoint)
    with caplog.at_level(logging.WARNING, logger="monsession"):
        with monsession.MonitoredTrainingSession(
            checkpoint_dir=str(tmp_path),
            scaffold=monsession.Scaffold(saver=checkpoint),
            hooks=[user],
            save_summaries_steps=None,
            log_step_count_steps=None,
        ) as session:
            for _ in range(3):
                session.run(step)
    [warning] = _kind_warnings(caplog)
    assert "pass save_checkpoint_secs=None, save_checkpoint_steps=None" in warning.getMessage()
    assert (
        tf.train.load_checkpoint(str(tmp_path)).get_tensor("step/.ATTRIBUTES/VARIABLE_VALUE") == 3
    )
