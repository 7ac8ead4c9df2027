"""SummarySaverHook in eager mode: the step's own tf.summary calls, gated per step."""

from __future__ import annotations

import threading
import time

import pytest
import tensorflow as tf
from summary_testing import (
    FakeClock,
    eager_program,
    session_start_steps,
    steps_of,
    summaries,
    tag_steps,
)

import monsession
from monsession_hooks_summary import SummarySaverHook, SummaryWriterCache


def _train(program, hooks, steps, clock=None, secs_per_step=0.0):
    with monsession.MonitoredSession(
        session_creator=monsession.ChiefSessionCreator(scaffold=program.scaffold()),
        hooks=hooks,
    ) as session:
        for _ in range(steps):
            session.run(program.step)
            if clock is not None:
                clock.advance(secs_per_step)


def test_records_on_trigger_steps_only_without_retracing(tmp_path):
    program = eager_program()
    _train(program, [SummarySaverHook(save_steps=3, output_dir=str(tmp_path))], 10)
    assert tag_steps(tmp_path) == {"loss": [1, 4, 7, 10]}
    assert program.traces == [1]
    # The values are the step's own: loss = 16 * 0.64 ** (step - 1).
    assert [value for _, _, value in summaries(tmp_path)] == [
        round(16.0 * 0.64 ** (step - 1), 5) for step in (1, 4, 7, 10)
    ]


def test_save_secs(tmp_path, monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(time, "time", clock)
    program = eager_program()
    hook = SummarySaverHook(save_secs=9.0, output_dir=str(tmp_path))
    _train(program, [hook], 8, clock=clock, secs_per_step=3.1)
    assert steps_of(tmp_path, "loss") == [1, 4, 7]
    assert program.traces == [1]


def test_session_start_comes_before_the_first_summaries(tmp_path):
    """TensorBoard drops data it saw before a START at or below its step."""
    program = eager_program()
    _train(program, [SummarySaverHook(save_steps=2, output_dir=str(tmp_path))], 3)
    assert session_start_steps(tmp_path) == [1]
    assert tag_steps(tmp_path)["loss"] == [1, 3]  # Nothing purged by the START.


def test_summaries_without_step_use_the_global_step(tmp_path):
    program = eager_program(default_step=True)
    _train(program, [SummarySaverHook(save_steps=2, output_dir=str(tmp_path))], 4)
    assert steps_of(tmp_path, "loss_default_step") == [1, 3]


def test_a_step_traced_in_one_session_obeys_the_next(tmp_path, caplog):
    program = eager_program()
    with caplog.at_level("WARNING", logger="tensorflow"):
        _train(program, [SummarySaverHook(save_steps=2, output_dir=str(tmp_path))], 3)
        _train(program, [SummarySaverHook(save_steps=3, output_dir=str(tmp_path))], 4)
    # Second session: the step goes on from 3 (first step 4, then 7).
    assert steps_of(tmp_path, "loss") == [1, 3, 4, 7]
    assert session_start_steps(tmp_path) == [1, 4]
    assert program.traces == [1]
    assert not [r for r in caplog.records if "was traced" in r.getMessage()]


def test_a_step_traced_in_a_session_writing_elsewhere_is_reported(tmp_path, caplog):
    program = eager_program()
    first, second, third = tmp_path / "first", tmp_path / "second", tmp_path / "third"
    with caplog.at_level("WARNING", logger="tensorflow"):
        for directory in (first, second, third):
            _train(program, [SummarySaverHook(save_steps=1, output_dir=str(directory))], 2)
    # TensorFlow keeps the first writer in the trace: the later sessions'
    # summaries do not reach their directories, and each says where they go.
    assert steps_of(first, "loss")[:2] == [1, 2]
    assert steps_of(second, "loss") == steps_of(third, "loss") == []
    warned = [r.getMessage() for r in caplog.records if "was traced" in r.getMessage()]
    assert len(warned) == 2
    for message, directory in zip(warned, (second, third), strict=True):
        assert "during an earlier session" in message
        assert f"wrote summaries to {first}:" in message and f"not to {directory}." in message


def test_end_restores_the_summary_state_and_stops_recording(tmp_path):
    step_before = tf.summary.experimental.get_step()
    program = eager_program()
    _train(program, [SummarySaverHook(save_steps=1, output_dir=str(tmp_path))], 2)
    assert tf.summary.experimental.get_step() is step_before
    with tf.summary.record_if(True):
        assert not tf.summary.scalar("outside", 1.0, step=0)  # No default writer.
    program.step()  # Traced with the hook's writer, but recording is off now.
    SummaryWriterCache.get(str(tmp_path)).flush()
    assert steps_of(tmp_path, "loss") == [1, 2]


def test_a_failed_session_leaves_no_summary_state_and_its_summaries_on_disk(tmp_path):
    step_before = tf.summary.experimental.get_step()
    program = eager_program()
    hook = SummarySaverHook(save_steps=1, output_dir=str(tmp_path / "failed"))
    with pytest.raises(ZeroDivisionError):
        with monsession.MonitoredSession(hooks=[hook]) as session:
            session.run(program.step)
            raise ZeroDivisionError("the loop failed")
    # on_failure() (not TensorFlow's: its hooks' end() is not called) closed the recording.
    assert tf.summary.experimental.get_step() is step_before
    assert steps_of(tmp_path / "failed", "loss") == [1]
    _train(program, [SummarySaverHook(save_steps=1, output_dir=str(tmp_path / "next"))], 1)
    assert tf.summary.experimental.get_step() is step_before


def test_a_session_that_fails_to_start_leaves_no_summary_state(tmp_path):
    step_before = tf.summary.experimental.get_step()
    eager_program()

    class FailsToStart(monsession.SessionRunHook):
        def after_create_session(self, session, coord):
            raise RuntimeError("cannot start")

    hooks = [FailsToStart(), SummarySaverHook(save_steps=1, output_dir=str(tmp_path))]
    with pytest.raises(RuntimeError, match="cannot start"):
        monsession.MonitoredSession(hooks=hooks)
    assert tf.summary.experimental.get_step() is step_before


def test_plain_python_step(tmp_path):
    """An eager step that is not a tf.function is gated the same way."""
    tf.compat.v1.reset_default_graph()
    global_step = monsession.get_or_create_global_step()

    def step():
        global_step.assign_add(1)
        tf.summary.scalar("value", 2.0 * tf.cast(global_step, tf.float32), step=global_step)

    with monsession.MonitoredSession(
        hooks=[SummarySaverHook(save_steps=2, output_dir=str(tmp_path))]
    ) as session:
        for _ in range(5):
            session.run(step)
    assert summaries(tmp_path) == [(1, "value", 2.0), (3, "value", 6.0), (5, "value", 10.0)]


def test_summary_op_is_rejected_in_eager_mode(tmp_path):
    tf.compat.v1.reset_default_graph()
    monsession.get_or_create_global_step()
    hook = SummarySaverHook(save_steps=1, output_dir=str(tmp_path), summary_op=tf.constant(b""))
    with pytest.raises(ValueError, match="summary_op is a graph-mode argument"):
        hook.begin()


def test_file_writer_is_a_type_error_in_eager_mode(tmp_path):
    with tf.Graph().as_default():
        writer = tf.compat.v1.summary.FileWriter(str(tmp_path))
    tf.compat.v1.reset_default_graph()
    monsession.get_or_create_global_step()
    hook = SummarySaverHook(save_steps=1, summary_writer=writer)
    with pytest.raises(TypeError, match=r"in eager mode summary_writer must be a tf\.summary"):
        hook.begin()
    writer.close()


def test_explicit_tf_summary_writer(tmp_path):
    program = eager_program()
    writer = tf.summary.create_file_writer(str(tmp_path))
    _train(program, [SummarySaverHook(save_steps=2, summary_writer=writer)], 3)
    writer.close()
    assert steps_of(tmp_path, "loss") == [1, 3]


def test_no_scaffold_or_summary_op_needed_but_timer_and_output_still_are():
    tf.compat.v1.reset_default_graph()
    with pytest.raises(ValueError, match="exactly one of save_steps and save_secs"):
        SummarySaverHook(output_dir="d")
    with pytest.raises(ValueError, match="one of output_dir or summary_writer"):
        SummarySaverHook(save_steps=1)


def _in_new_thread(function):
    """Runs `function` in a thread of its own (fresh summary state); returns its result."""
    results = []
    thread = threading.Thread(target=lambda: results.append(function()))
    thread.start()
    thread.join()
    assert results, "the thread failed"
    return results[0]


@pytest.mark.parametrize("traced_before", [True, False])
def test_a_step_traced_before_the_session_is_reported(tmp_path, caplog, traced_before):
    def train():
        tf.compat.v1.reset_default_graph()
        global_step = monsession.get_or_create_global_step()

        @tf.function
        def step():
            global_step.assign_add(1)
            tf.summary.scalar("loss", 1.0, step=global_step)
            return {}

        if traced_before:
            step()  # Traced here, without a summary writer.
        hooks = [SummarySaverHook(save_steps=1, output_dir=str(tmp_path))]
        with monsession.MonitoredSession(hooks=hooks) as session:
            session.run(step)
        return steps_of(tmp_path, "loss")

    with caplog.at_level("WARNING", logger="tensorflow"):
        recorded = _in_new_thread(train)
    warned = [r.getMessage() for r in caplog.records if "was traced before" in r.getMessage()]
    assert recorded == ([] if traced_before else [1])
    assert len(warned) == (1 if traced_before else 0)
    if traced_before:
        assert "'step'" in warned[0] and "record nothing" in warned[0]


def _quiet_step():
    """An eager step that writes no tf.summary."""
    global_step = monsession.get_or_create_global_step()
    return tf.function(lambda: {"step": global_step.assign_add(1)})


def _empty_warnings(caplog):
    return [r.getMessage() for r in caplog.records if "recorded no summary" in r.getMessage()]


def test_a_users_saver_warns_once_when_the_step_writes_no_summary(tmp_path, caplog):
    tf.compat.v1.reset_default_graph()
    step = _quiet_step()
    hook = SummarySaverHook(save_steps=2, output_dir=str(tmp_path))
    with caplog.at_level("WARNING", logger="tensorflow"):
        with monsession.MonitoredSession(hooks=[hook]) as session:
            for _ in range(5):
                session.run(step)
    assert _empty_warnings(caplog) == [
        "SummarySaverHook: the step recorded no summary at global step 1: nothing in it calls "
        "tf.summary (under model.fit, Keras's train_step writes none), so the event file in "
        f"{tmp_path} gets none. Call tf.summary.scalar(...) (or another tf.summary function) "
        "inside the step, e.g. in your model's train_step; or, under model.fit, use "
        "keras.callbacks.TensorBoard instead."
    ]


def test_the_default_saver_of_monitored_training_session_does_not_warn(tmp_path, caplog):
    """The program asked for no summaries: as in graph mode, nothing is said."""
    tf.compat.v1.reset_default_graph()
    step = _quiet_step()
    with caplog.at_level("WARNING", logger="tensorflow"):
        with monsession.MonitoredTrainingSession(
            checkpoint_dir=str(tmp_path), save_summaries_steps=2
        ) as session:
            for _ in range(5):
                session.run(step)
    assert _empty_warnings(caplog) == []
