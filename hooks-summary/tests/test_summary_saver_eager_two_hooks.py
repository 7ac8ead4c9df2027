"""Two SummarySaverHooks in one eager session: the newest records, both end cleanly.

Hooks end in list order, so the older hook's recording closes first; the
summary state (default writer, default step, recording condition) must come
back to what it was before the session, whatever the order.
"""

from __future__ import annotations

import tensorflow as tf
from summary_testing import eager_program, session_start_steps, steps_of

import monsession
from monsession_hooks_summary import SummarySaverHook, SummaryWriterCache


def _no_default_writer() -> bool:
    with tf.summary.record_if(True):
        return not tf.summary.scalar("outside", 1.0, step=0)


def test_two_hooks_end_in_list_order_and_restore_the_summary_state(tmp_path):
    step_before = tf.summary.experimental.get_step()
    program = eager_program()
    older = SummarySaverHook(save_steps=3, output_dir=str(tmp_path / "older"))
    newer = SummarySaverHook(save_steps=2, output_dir=str(tmp_path / "newer"))
    with monsession.MonitoredSession(
        session_creator=monsession.ChiefSessionCreator(scaffold=program.scaffold()),
        hooks=[older, newer],
    ) as session:
        for _ in range(5):
            session.run(program.step)
    # `older` ended first, then `newer`: the state from before the session is back.
    assert tf.summary.experimental.get_step() is step_before
    assert _no_default_writer()
    # The hook that opened last decides what the step records, and gets it.
    assert steps_of(tmp_path / "newer", "loss") == [1, 3, 5]
    assert steps_of(tmp_path / "older", "loss") == []
    assert session_start_steps(tmp_path / "older") == session_start_steps(tmp_path / "newer")
    assert session_start_steps(tmp_path / "newer") == [1]
    assert program.traces == [1]


def test_user_hook_beside_the_default_one_of_monitored_training_session(tmp_path):
    """The issue-16 crash: `'NoneType' object has no attribute 'flush'` on close."""
    program = eager_program()
    user = SummarySaverHook(save_steps=2, output_dir=str(tmp_path / "user"))
    with monsession.MonitoredTrainingSession(
        checkpoint_dir=str(tmp_path),
        scaffold=program.scaffold(),
        hooks=[user],
        save_checkpoint_secs=None,
    ) as session:
        for _ in range(5):
            session.run(program.step)
    assert _no_default_writer()
    assert steps_of(tmp_path / "user", "loss") == [1, 3, 5]
    SummaryWriterCache.get(str(tmp_path)).flush()
    assert steps_of(tmp_path, "loss") == []  # The default hook waited.
    assert session_start_steps(tmp_path) == [1]  # The default saver's (none of the counter).
    assert program.traces == [1]
