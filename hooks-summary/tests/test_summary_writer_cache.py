"""SummaryWriterCache: one writer per directory, shared with TensorFlow's FileWriterCache."""

from __future__ import annotations

import tensorflow as tf
from summary_testing import event_files, graph_program, steps_of

import monsession
from monsession_hooks_summary import StepCounterHook, SummarySaverHook, SummaryWriterCache


def test_graph_mode_shares_tensorflows_file_writer_cache(tmp_path):
    with tf.Graph().as_default():
        ours = SummaryWriterCache.get(str(tmp_path))
        assert isinstance(ours, tf.compat.v1.summary.FileWriter)
        assert ours is tf.compat.v1.summary.FileWriterCache.get(str(tmp_path))
        assert ours is SummaryWriterCache.get(str(tmp_path))
        assert SummaryWriterCache.get(str(tmp_path / "other")) is not ours


def test_eager_mode_keeps_one_tf_summary_writer_per_directory(tmp_path):
    writer = SummaryWriterCache.get(tmp_path)
    assert isinstance(writer, tf.summary.SummaryWriter)
    assert SummaryWriterCache.get(str(tmp_path)) is writer
    assert SummaryWriterCache.get(tmp_path / "other") is not writer


def test_clear_closes_and_forgets_writers_of_both_modes(tmp_path):
    eager_writer = SummaryWriterCache.get(str(tmp_path / "eager"))
    with tf.Graph().as_default():
        graph_writer = SummaryWriterCache.get(str(tmp_path / "graph"))
    SummaryWriterCache.clear()
    assert SummaryWriterCache.get(str(tmp_path / "eager")) is not eager_writer
    with tf.Graph().as_default():
        assert SummaryWriterCache.get(str(tmp_path / "graph")) is not graph_writer
        assert tf.compat.v1.summary.FileWriterCache.get(str(tmp_path / "graph")) is not (
            graph_writer
        )


def test_hooks_and_tensorflow_code_write_one_event_file_per_directory(tmp_path):
    """Both hooks and any FileWriterCache user (e.g. a checkpoint saver) share one file."""
    with tf.Graph().as_default():
        program = graph_program()
        hooks = [
            StepCounterHook(every_n_steps=1, output_dir=str(tmp_path)),
            SummarySaverHook(save_steps=1, output_dir=str(tmp_path), summary_op=program.summary_op),
        ]
        with monsession.MonitoredSession(hooks=hooks) as session:
            for _ in range(2):
                session.run(program.train_op)
        tf.compat.v1.summary.FileWriterCache.get(str(tmp_path)).add_session_log(
            tf.compat.v1.SessionLog(status=tf.compat.v1.SessionLog.CHECKPOINT), 2
        )
        tf.compat.v1.summary.FileWriterCache.get(str(tmp_path)).flush()
    assert len(event_files(tmp_path)) == 1
    assert steps_of(tmp_path, "loss") == [1, 2]
    assert steps_of(tmp_path, "global_step/sec") == [2]
