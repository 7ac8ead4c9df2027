"""SummarySaverHook in graph mode, side by side with tf.compat.v1.train.SummarySaverHook."""

from __future__ import annotations

import time

import pytest
import tensorflow as tf
from summary_testing import (
    FakeClock,
    graph_program,
    session_start_steps,
    steps_of,
    summaries,
    tag_steps,
)

import monsession
import monsession.testing
from monsession_hooks_summary import SummarySaverHook

TF = tf.compat.v1.train


def _run(api, hook_factory, logdir, steps, clock=None, secs_per_step=0.0):
    """Builds the program in a fresh graph and runs it under `api`'s session."""
    with tf.Graph().as_default():
        program = graph_program()
        hook = hook_factory(program, logdir)
        with api.MonitoredSession(hooks=[hook]) as session:
            for _ in range(steps):
                session.run(program.train_op)
                if clock is not None:
                    clock.advance(secs_per_step)
    return summaries(logdir), session_start_steps(logdir)


def _by_summary_op(api, **timer):
    return lambda program, logdir: api.SummarySaverHook(
        output_dir=str(logdir), summary_op=program.summary_op, **timer
    )


def test_save_steps_matches_tensorflow(tmp_path):
    ours = _run(monsession, _by_summary_op(monsession.hooks, save_steps=3), tmp_path / "ours", 10)
    theirs = _run(TF, _by_summary_op(TF, save_steps=3), tmp_path / "tf", 10)
    assert ours == theirs
    written, starts = ours
    assert starts == [1]
    assert sorted({step for step, _, _ in written}) == [1, 4, 7, 10]
    # The summary op ran on trigger steps only: its counter is 1, 2, 3, 4.
    assert [(step, value) for step, tag, value in written if tag == "fetches"] == [
        (1, 1.0),
        (4, 2.0),
        (7, 3.0),
        (10, 4.0),
    ]


def test_save_secs_matches_tensorflow(tmp_path, monkeypatch):
    results = []
    for api, name in ((monsession.hooks, "ours"), (TF, "tf")):
        clock = FakeClock()
        monkeypatch.setattr(time, "time", clock)
        run = _run(
            monsession if api is monsession.hooks else TF,
            _by_summary_op(api, save_secs=9.0),
            tmp_path / name,
            8,
            clock=clock,
            secs_per_step=3.1,
        )
        results.append(run)
    assert results[0] == results[1]
    assert sorted({step for step, _, _ in results[0][0]}) == [1, 4, 7]


def test_scaffold_summary_op_is_used_and_read_by_tensorboard(tmp_path):
    with tf.Graph().as_default():
        program = graph_program()
        scaffold = monsession.Scaffold()
        hook = SummarySaverHook(save_steps=4, output_dir=str(tmp_path), scaffold=scaffold)
        with monsession.MonitoredSession(
            session_creator=monsession.ChiefSessionCreator(scaffold=scaffold), hooks=[hook]
        ) as session:
            for _ in range(9):
                session.run(program.train_op)
    steps = tag_steps(tmp_path)
    assert steps["loss"] == [1, 5, 9]
    assert steps["fetches"] == [1, 5, 9]


def test_list_of_summary_ops(tmp_path):
    with tf.Graph().as_default():
        program = graph_program()
        hook = SummarySaverHook(
            save_steps=8,
            output_dir=str(tmp_path),
            summary_op=[program.loss_summary, program.fetches_summary],
        )
        with monsession.MonitoredSession(hooks=[hook]) as session:
            for _ in range(10):
                session.run(program.train_op)
    assert steps_of(tmp_path, "loss") == [1, 9]
    assert [v for _, tag, v in summaries(tmp_path) if tag == "fetches"] == [1.0, 2.0]


def test_end_flushes_the_shared_writer(tmp_path):
    """The cached FileWriter stays open; only the hook's flush makes the events visible."""
    with tf.Graph().as_default():
        program = graph_program()
        hook = SummarySaverHook(
            save_steps=100, output_dir=str(tmp_path), summary_op=program.summary_op
        )
        hook.begin()
        with tf.compat.v1.Session() as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            monsession.testing.hooked_session(sess, [hook]).run(program.train_op)
            assert steps_of(tmp_path, "loss") == []
            hook.end(sess)
            assert steps_of(tmp_path, "loss") == [1]


def test_explicit_summary_writer(tmp_path):
    with tf.Graph().as_default():
        program = graph_program()
        writer = tf.compat.v1.summary.FileWriter(str(tmp_path))
        hook = SummarySaverHook(save_steps=2, summary_writer=writer, summary_op=program.summary_op)
        with monsession.MonitoredSession(hooks=[hook]) as session:
            for _ in range(3):
                session.run(program.train_op)
        writer.close()
    assert steps_of(tmp_path, "loss") == [1, 3]
    assert session_start_steps(tmp_path) == [1]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"output_dir": "d", "summary_op": "op"}, "exactly one of save_steps and save_secs"),
        (
            {"save_steps": 1, "save_secs": 1, "output_dir": "d", "summary_op": "op"},
            "exactly one of save_steps and save_secs",
        ),
        ({"save_steps": 1, "output_dir": "d"}, "Exactly one of scaffold or summary_op"),
        (
            {"save_steps": 1, "output_dir": "d", "scaffold": "s", "summary_op": "op"},
            "Exactly one of scaffold or summary_op",
        ),
        ({"save_steps": 1, "summary_op": "op"}, "one of output_dir or summary_writer"),
        (
            {"save_steps": -1, "output_dir": "d", "summary_op": "op"},
            "^SummarySaverHook: invalid save_steps=-1",
        ),
    ],
)
def test_bad_arguments_raise_value_error(kwargs, match):
    with tf.Graph().as_default(), pytest.raises(ValueError, match=match):
        SummarySaverHook(**kwargs)


def test_no_scaffold_nor_summary_op_is_rejected_again_in_graph_begin(tmp_path):
    """Built in eager mode (allowed there), then used in a graph: `begin` says why."""
    hook = SummarySaverHook(save_steps=1, output_dir=str(tmp_path))
    with tf.Graph().as_default():
        tf.compat.v1.train.get_or_create_global_step()
        with pytest.raises(ValueError, match="Exactly one of scaffold or summary_op"):
            hook.begin()


def test_eager_writer_in_graph_mode_is_a_type_error(tmp_path):
    writer = tf.summary.create_file_writer(str(tmp_path))
    with tf.Graph().as_default():
        program = graph_program()
        hook = SummarySaverHook(save_steps=1, summary_writer=writer, summary_op=program.summary_op)
        with pytest.raises(TypeError, match="in graph mode summary_writer must be"):
            hook.begin()


def test_missing_global_step_is_a_runtime_error(tmp_path):
    with tf.Graph().as_default():
        summary_op = tf.compat.v1.summary.scalar("x", tf.constant(1.0))
        hook = SummarySaverHook(save_steps=1, output_dir=str(tmp_path), summary_op=summary_op)
        with pytest.raises(RuntimeError, match="created to use SummarySaverHook"):
            hook.begin()
