"""Graph mode, side by side with tf.compat.v1.train: same program, same files, same values."""

from __future__ import annotations

import glob
import os

import numpy as np
import pytest
import tensorflow as tf
from checkpoint_testing import (
    ONLY_CHECKPOINTS,
    CountingListener,
    checkpoint_session_logs,
    checkpoint_steps,
    counter_program,
    load_step,
    meta_files,
    meta_graph_defs,
)

import monsession
from monsession_hooks_checkpoint import CheckpointSaverHook


class TFListener(CountingListener, tf.compat.v1.train.CheckpointSaverListener):
    """The same counting listener, as TensorFlow's listener type."""


def _run_with(hook_class, listener, directory, session_class, steps=5):
    with tf.Graph().as_default():
        _, train_op, _ = counter_program()
        hook = hook_class(directory, save_steps=2, listeners=[listener])
        with session_class(hooks=[hook], checkpoint_dir=directory) as sess:
            for _ in range(steps):
                sess.run(train_op)


def _meta_graph_parts(meta_graph_def):
    info = meta_graph_def.meta_info_def
    return (
        meta_graph_def.saver_def,
        sorted(node.name for node in meta_graph_def.graph_def.node),
        sorted(meta_graph_def.collection_def),
        sorted(op.name for op in info.stripped_op_list.op),
        info.tensorflow_version,
    )


def _non_event_files(directory):
    return sorted(name for name in os.listdir(directory) if not name.startswith("events."))


def test_hook_writes_what_tensorflows_hook_writes(tmp_path):
    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    our_listener, their_listener = CountingListener(), TFListener()
    _run_with(CheckpointSaverHook, our_listener, ours, monsession.SingularMonitoredSession)
    _run_with(
        tf.compat.v1.train.CheckpointSaverHook,
        their_listener,
        theirs,
        tf.compat.v1.train.SingularMonitoredSession,
    )
    # Beside each checkpoint, ours also writes the hooks' state (monsession only).
    hook_states = [name for name in _non_event_files(ours) if name.endswith(".hooks.json")]
    assert hook_states == [f"model.ckpt-{step}.hooks.json" for step in (0, 2, 4, 5)]
    assert [name for name in _non_event_files(ours) if name not in hook_states] == _non_event_files(
        theirs
    )
    assert checkpoint_steps(ours) == checkpoint_steps(theirs) == [0, 2, 4, 5]
    assert our_listener.counts == their_listener.counts
    assert our_listener.saved_steps == their_listener.saved_steps == [0, 2, 4, 5]
    for step in checkpoint_steps(ours):
        mine = tf.train.load_checkpoint(os.path.join(ours, f"model.ckpt-{step}"))
        tfs = tf.train.load_checkpoint(os.path.join(theirs, f"model.ckpt-{step}"))
        assert mine.get_variable_to_shape_map() == tfs.get_variable_to_shape_map()
        for name in mine.get_variable_to_shape_map():
            np.testing.assert_array_equal(mine.get_tensor(name), tfs.get_tensor(name))
    # Same CHECKPOINT session logs (paths differ only by directory).
    assert [step for step, _ in checkpoint_session_logs(ours)] == [
        step for step, _ in checkpoint_session_logs(theirs)
    ]
    assert {os.path.basename(p) for _, p in checkpoint_session_logs(ours)} == {"model.ckpt"}
    # The same meta graphs in the event file (ours written through the public
    # tf.compat.v1.train.export_meta_graph; TensorFlow's hook uses its private
    # meta_graph module). Generated function names differ between two graphs
    # of one process, so the parts are compared, not the bytes.
    assert [_meta_graph_parts(m) for m in meta_graph_defs(ours)] == [
        _meta_graph_parts(m) for m in meta_graph_defs(theirs)
    ]
    with (
        open(os.path.join(ours, "checkpoint")) as mine,
        open(os.path.join(theirs, "checkpoint")) as tfs,
    ):
        assert [line.split(":")[0] for line in mine] == [line.split(":")[0] for line in tfs]


@pytest.mark.parametrize("save_graph_def", [True, False])
def test_monitored_training_session_file_expectations(tmp_path, save_graph_def):
    """TensorFlow's MonitoredTrainingSession tests for graph.pbtxt and .meta files."""
    logdir = str(tmp_path)
    with tf.Graph().as_default():
        gstep = monsession.get_or_create_global_step()
        new_gstep = tf.compat.v1.assign_add(gstep, 1)
        with monsession.MonitoredTrainingSession(
            is_chief=True,
            checkpoint_dir=logdir,
            save_checkpoint_steps=1,
            save_graph_def=save_graph_def,
        ) as session:
            assert ("graph.pbtxt" in os.listdir(logdir)) == save_graph_def
            assert len(meta_files(logdir)) == (1 if save_graph_def else 0)
            session.run(new_gstep)
            assert len(meta_files(logdir)) == (2 if save_graph_def else 0)


def test_monitored_training_session_saves_at_end_and_restores(tmp_path):
    logdir = str(tmp_path)
    with tf.Graph().as_default():
        gstep = monsession.get_or_create_global_step()
        do_step = tf.compat.v1.assign_add(gstep, 1)
        with monsession.MonitoredTrainingSession(is_chief=True, checkpoint_dir=logdir) as session:
            assert session.run(gstep) == 0
            assert session.run(do_step) == 1
            assert session.run(do_step) == 2
        assert checkpoint_steps(logdir) == [0, 2]  # At creation (600 s default) and at end().
        with monsession.MonitoredTrainingSession(is_chief=True, checkpoint_dir=logdir) as session:
            assert session.run(gstep) == 2


def test_monitored_training_session_save_checkpoint_steps(tmp_path):
    logdir = str(tmp_path)
    with tf.Graph().as_default():
        gstep = monsession.get_or_create_global_step()
        new_gstep = tf.compat.v1.assign_add(gstep, 1)
        with monsession.MonitoredTrainingSession(
            checkpoint_dir=logdir, save_checkpoint_steps=100
        ) as session:
            for _ in range(100):
                session.run(new_gstep)
        with monsession.MonitoredTrainingSession(checkpoint_dir=logdir) as session:
            assert session.run(gstep) == 100


@pytest.mark.parametrize("session_module", [monsession, tf.compat.v1.train])
def test_save_checkpoint_secs_zero_saves_nothing(tmp_path, session_module):
    logdir = str(tmp_path)
    with tf.Graph().as_default():
        gstep = monsession.get_or_create_global_step()
        do_step = tf.compat.v1.assign_add(gstep, 1)
        with session_module.MonitoredTrainingSession(
            checkpoint_dir=logdir, save_checkpoint_secs=0, **ONLY_CHECKPOINTS
        ) as session:
            session.run(do_step)
            session.run(do_step)
        assert tf.train.latest_checkpoint(logdir) is None
        assert not glob.glob(os.path.join(logdir, "model.ckpt*"))
        with monsession.MonitoredTrainingSession(checkpoint_dir=logdir) as session:
            assert session.run(gstep) == 0


def test_secs_schedule_matches_tensorflow(tmp_path):
    """save_checkpoint_secs=0.1 with a pause: both save the last state."""
    results = {}
    for name, module in (("ours", monsession), ("theirs", tf.compat.v1.train)):
        logdir = str(tmp_path / name)
        with tf.Graph().as_default():
            gstep = monsession.get_or_create_global_step()
            new_gstep = tf.compat.v1.assign_add(gstep, 1)
            # Every checkpoint kept: on a slow machine each step may save, and the
            # default max_to_keep=5 would then delete the start's.
            scaffold = module.Scaffold(saver=tf.compat.v1.train.Saver(max_to_keep=None))
            with module.MonitoredTrainingSession(
                checkpoint_dir=logdir,
                save_checkpoint_secs=0.1,
                scaffold=scaffold,
                **ONLY_CHECKPOINTS,
            ) as session:
                session.run(new_gstep)
                import time

                time.sleep(0.2)
                for _ in range(10):
                    session.run(new_gstep)
        results[name] = (load_step(logdir), checkpoint_steps(logdir))
    for name, (last, steps) in results.items():
        assert last == 11, name
        # The start, the first step after the pause and the end are saved by
        # both; any other step only when a step itself took 0.1 s, which on a
        # loaded machine happens to either session: not compared.
        assert {0, 2, 11} <= set(steps) <= set(range(12)), (name, steps)


class _OtherWorker(tf.compat.v1.train.SessionRunHook):
    """Advances the global step after the runs numbered in `runs` (1-based), as
    another worker of a between-graph cluster does between this one's runs."""

    def __init__(self, global_step, runs):
        self._step = tf.compat.v1.assign_add(global_step, 1)
        self._runs, self._count = set(runs), 0

    def after_run(self, run_context, run_values):
        self._count += 1
        if self._count in self._runs:
            run_context.session.run(self._step)


def _run_among_workers(session_module, directory, other_runs, master, runs=12):
    with tf.Graph().as_default():
        global_step = monsession.get_or_create_global_step()
        # The value both hooks fetch is read before this run's increment.
        with tf.control_dependencies([monsession.testing.global_step_read_tensor()]):
            train_op = tf.compat.v1.assign_add(global_step, 1)
        hook_class = (
            CheckpointSaverHook
            if session_module is monsession
            else session_module.CheckpointSaverHook
        )
        hooks = [_OtherWorker(global_step, other_runs), hook_class(directory, save_steps=6)]
        creator = session_module.ChiefSessionCreator(master=master, checkpoint_dir=directory)
        with session_module.MonitoredSession(session_creator=creator, hooks=hooks) as sess:
            for _ in range(runs):
                sess.run(train_op)
    return checkpoint_steps(directory)


@pytest.mark.parametrize(
    ("other_runs", "steps"),
    [
        # Another worker steps after every run: the runs are seen not to add
        # one each, and the variable is read after each of them.
        (range(1, 13), [0, 6, 12, 18, 24]),
        # One step of another worker, just before the save is due: the value
        # fetched is one more than expected, as if it were this run's own step.
        # Before, monsession saved at 7 (the global step 40 of a cluster's
        # chief became 41).
        ([4], [0, 6, 12, 13]),
    ],
)
def test_saves_on_tensorflows_steps_when_other_workers_advance_the_step(
    tmp_path, other_runs, steps
):
    """A TF1 between-graph chief: the global step moves between its runs.
    TensorFlow's hook (its `_steps_per_run` is 1000000, so its check on the
    fetched step always passes) reads the variable after every run and saves
    once it is a period past the last save; monsession must save on the same
    steps, with the same contents."""
    server = tf.distribute.Server.create_local_server()  # The chief's `master`.
    ours = _run_among_workers(monsession, str(tmp_path / "ours"), other_runs, server.target)
    theirs = _run_among_workers(
        tf.compat.v1.train, str(tmp_path / "theirs"), other_runs, server.target
    )
    assert theirs == steps
    assert ours == theirs
    for step in ours:
        assert load_step(str(tmp_path / "ours" / f"model.ckpt-{step}")) == step
