"""`EarlyStoppingHook` is a `tf.compat.v1.train.SessionRunHook`: TensorFlow's session runs it.

Under TensorFlow's `MonitoredTrainingSession` (graph mode) the hook reads the
global step through the session (`monsession.plugins.as_run_context`) and stops the
plateau program at the same step as under monsession's session.
"""

from __future__ import annotations

import tensorflow as tf
from earlystop_testing import SAFETY_LAST_STEP, STOP_STEP, graph_program, train
from monsession_hooks_earlystop import EarlyStoppingHook

TF = tf.compat.v1.train


def _stop_step_under_tensorflow() -> int:
    with tf.Graph().as_default():
        program = graph_program()
        hook = EarlyStoppingHook(program.loss, patience=3, every_n_steps=2)
        final = TF.FinalOpsHook(program.global_step)
        with TF.MonitoredTrainingSession(
            hooks=[hook, TF.StopAtStepHook(last_step=SAFETY_LAST_STEP), final],
            log_step_count_steps=None,
            save_summaries_steps=None,
        ) as session:
            while not session.should_stop():
                session.run(program.step)
        return int(final.final_ops_values)


def test_tensorflows_session_stops_where_ours_does():
    with tf.Graph().as_default():
        program = graph_program()
        ours = train(program, [EarlyStoppingHook(program.loss, patience=3, every_n_steps=2)])
    assert ours == STOP_STEP
    assert _stop_step_under_tensorflow() == ours
