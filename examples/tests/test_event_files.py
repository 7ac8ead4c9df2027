"""Every family writes a directory's events into one file named with the process id."""

from __future__ import annotations

import os

import tensorflow as tf

import monsession


def test_default_hooks_share_one_event_file_named_with_the_process_id(tmp_path):
    tf.compat.v1.summary.FileWriterCache.clear()
    with tf.Graph().as_default():
        global_step = monsession.get_or_create_global_step()
        weight = tf.compat.v1.get_variable("w", initializer=1.0)
        tf.compat.v1.summary.scalar("w", weight)
        train_op = tf.group(weight.assign_sub(0.1), global_step.assign_add(1))
        with monsession.MonitoredTrainingSession(
            checkpoint_dir=str(tmp_path), save_summaries_steps=1, log_step_count_steps=1
        ) as session:
            for _ in range(3):
                session.run(train_op)
        assert monsession.plugins.event_file_writer(str(tmp_path)) is (
            tf.compat.v1.summary.FileWriterCache.get(str(tmp_path))
        )
    tf.compat.v1.summary.FileWriterCache.clear()
    events = [name for name in os.listdir(tmp_path) if "tfevents" in name]
    assert len(events) == 1, events
    assert events[0].endswith(f".{os.getpid()}")
