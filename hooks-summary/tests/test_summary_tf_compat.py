"""Every private TensorFlow symbol of the family, exercised: a removal fails here by name."""

from __future__ import annotations

import pytest
import tensorflow as tf
from summary_testing import raw_events, session_start_steps

from monsession_hooks_summary import _tf_compat


def test_local_variable_ignores_the_strategy_scope():
    strategy = tf.distribute.MirroredStrategy(["CPU:0"])
    with strategy.scope():
        distributed = tf.Variable(False)
        switch = _tf_compat.local_variable(False, name="switch")
    assert type(distributed) is not type(switch)
    assert isinstance(switch, tf.Variable)
    assert not switch.trainable
    switch.assign(True)
    assert bool(switch.numpy())


def test_import_event_writes_a_session_log(tmp_path):
    writer = tf.summary.create_file_writer(str(tmp_path))
    event = tf.compat.v1.Event(
        wall_time=1.0,
        step=7,
        session_log=tf.compat.v1.SessionLog(status=tf.compat.v1.SessionLog.START),
    )
    with writer.as_default():
        _tf_compat.import_event(tf.constant(event.SerializeToString()))
    writer.close()
    assert session_start_steps(tmp_path) == [7]
    assert [e.wall_time for e in raw_events(tmp_path) if e.HasField("session_log")] == [1.0]


def test_a_missing_symbol_is_named_in_the_error():
    with pytest.raises(_tf_compat.TensorFlowAPIMissingError) as raised:
        _tf_compat._private("tensorflow.python.ops.summary_ops_v2", "gone", "a test")
    message = str(raised.value)
    assert "tensorflow.python.ops.summary_ops_v2.gone (a test)" in message
    assert tf.__version__ in message


def test_is_noop_writer_tells_the_noop_writer_from_a_file_writer(tmp_path):
    assert _tf_compat.is_noop_writer(tf.summary.create_noop_writer())
    assert not _tf_compat.is_noop_writer(tf.summary.create_file_writer(str(tmp_path)))


def test_default_writer_is_the_innermost_writer_context(tmp_path):
    outer = tf.summary.create_file_writer(str(tmp_path / "outer"))
    inner = tf.summary.create_file_writer(str(tmp_path / "inner"))
    assert _tf_compat.default_writer() is None
    with outer.as_default():
        with inner.as_default():
            assert _tf_compat.default_writer() is inner
        assert _tf_compat.default_writer() is outer
    assert _tf_compat.default_writer() is None
