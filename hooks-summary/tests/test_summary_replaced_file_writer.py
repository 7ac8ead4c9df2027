"""A `FileWriter` replaced in TensorFlow's writer-cache module makes our writers too.

TensorFlow's own hook tests substitute a fake writer that way
(`writer_cache.FileWriter = FakeSummaryWriter`); the summary hooks then
write through the fake, as TensorFlow's hooks do.
"""

from __future__ import annotations

import types

import pytest
import tensorflow as tf
from tensorflow.python.summary.writer import writer, writer_cache

import monsession
import monsession.testing
from monsession_hooks_summary import StepCounterHook, SummarySaverHook


class FakeWriter:
    """Records what is written, keyed by the directory (as TensorFlow's fake writer does)."""

    written: dict[str, list[tuple[str, int]]] = {}

    def __init__(self, logdir, graph=None):
        self._logdir = logdir
        self.written[logdir] = []

    def add_summary(self, summary, global_step=None):
        summary_proto = (
            tf.compat.v1.Summary.FromString(summary) if isinstance(summary, bytes) else summary
        )
        for value in summary_proto.value:
            self.written[self._logdir].append((value.tag, global_step))

    def add_session_log(self, session_log, global_step=None):
        self.written[self._logdir].append(("session_log", global_step))

    def add_graph(self, *args, **kwargs):
        pass

    def add_meta_graph(self, *args, **kwargs):
        pass

    def add_run_metadata(self, *args, **kwargs):
        pass

    def get_logdir(self):
        return self._logdir

    def flush(self):
        pass

    def close(self):
        pass


@pytest.fixture
def fake_writer(monkeypatch):
    tf.compat.v1.summary.FileWriterCache.clear()
    FakeWriter.written = {}
    monkeypatch.setattr(writer_cache, "FileWriter", FakeWriter)
    monkeypatch.setattr(writer, "FileWriter", FakeWriter)
    yield FakeWriter.written
    tf.compat.v1.summary.FileWriterCache.clear()


def _train(api, logdir, steps=6):
    with tf.Graph().as_default():
        global_step = monsession.get_or_create_global_step()
        weight = tf.compat.v1.get_variable("w", initializer=1.0)
        tf.compat.v1.summary.scalar("weight", weight)
        read = monsession.testing.global_step_read_tensor()
        with tf.control_dependencies([read]):
            train = tf.group(weight.assign_sub(0.1), global_step.assign_add(1))
        hooks = [
            api.SummarySaverHook(
                save_steps=2, output_dir=logdir, summary_op=tf.compat.v1.summary.merge_all()
            ),
            api.StepCounterHook(every_n_steps=2, output_dir=logdir),
        ]
        with api.MonitoredSession(hooks=hooks) as session:
            for _ in range(steps):
                session.run(train)


def test_our_hooks_write_through_the_replaced_writer_as_tensorflows_do(fake_writer, tmp_path):
    written = {}
    for name, api in [
        ("tensorflow", tf.compat.v1.train),
        (
            "monsession",
            types.SimpleNamespace(
                MonitoredSession=monsession.MonitoredSession,
                SummarySaverHook=SummarySaverHook,
                StepCounterHook=StepCounterHook,
            ),
        ),
    ]:
        logdir = str(tmp_path / name)
        _train(api, logdir)
        written[name] = sorted(fake_writer[logdir], key=lambda item: (item[1], item[0]))
    assert [tag for tag, _ in written["monsession"]].count("weight") == 3
    # The same events: the step counter writes no START on a fresh start, as TensorFlow's.
    assert written["monsession"] == written["tensorflow"]


def test_event_file_writer_uses_the_replaced_writer(fake_writer, tmp_path):
    with tf.Graph().as_default():
        assert isinstance(monsession.plugins.event_file_writer(str(tmp_path)), FakeWriter)
