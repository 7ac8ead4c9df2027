"""`monsession.plugins.settle(session)`: without a ClusterCoordinator it waits for nothing.

With one (ParameterServerStrategy) it joins the coordinator: the loopback
tests of examples/distributed (`test_parameter_server_training.py`) show it.
"""

from __future__ import annotations

from typing import Any

import pytest
import tensorflow as tf

import monsession


@pytest.fixture(autouse=True)
def fresh_global_step():
    tf.compat.v1.reset_default_graph()  # Eager mode's global step lives there.
    yield
    tf.compat.v1.reset_default_graph()


class _Settles(monsession.SessionRunHook):
    def __init__(self) -> None:
        self.steps: list[int] = []

    def after_run(self, run_context: Any, run_values: Any) -> None:
        monsession.plugins.settle(run_context.session)
        self.steps.append(run_context.global_step_after())

    def end(self, session: Any) -> None:
        monsession.plugins.settle(session)
        self.steps.append(monsession.plugins.read_global_step(session))


def test_settle_in_eager_mode_without_a_coordinator() -> None:
    hook = _Settles()
    with monsession.MonitoredSession(hooks=[hook]) as sess:
        assert sess.run(lambda: tf.constant(1.0)).numpy() == 1.0
        sess.run(lambda: tf.constant(2.0))
    assert hook.steps == [1, 2, 2]


def test_settle_in_graph_mode() -> None:
    with tf.Graph().as_default():
        monsession.get_or_create_global_step()
        step = tf.compat.v1.assign_add(monsession.get_global_step(), 1)
        hook = _Settles()
        with monsession.MonitoredSession(hooks=[hook]) as sess:
            sess.run(step)
        assert hook.steps == [1, 1]
