"""The debug family keeps TensorFlow's contract: its error class, and proxies that forward."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import monsession
from monsession_hooks_debug import HookTimingHook, NanLossDuringTrainingError, NanTensorHook


def test_code_that_catches_tensorflows_nan_loss_error_catches_ours():
    assert issubclass(NanLossDuringTrainingError, tf.compat.v1.train.NanLossDuringTrainingError)
    with tf.Graph().as_default():
        global_step = monsession.get_or_create_global_step()
        loss = tf.where(global_step >= 2, np.float32("nan"), 1.0)
        with tf.control_dependencies([loss]):
            train = global_step.assign_add(1)
        steps = 0
        with pytest.raises(tf.compat.v1.train.NanLossDuringTrainingError) as raised:
            with monsession.MonitoredSession(hooks=[NanTensorHook(loss)]) as session:
                while not session.should_stop():
                    session.run(train)
                    steps += 1
    assert isinstance(raised.value, NanLossDuringTrainingError)
    assert raised.value.step == 3
    assert steps == 2


class Extras(monsession.SessionRunHook):
    """A hook with monsession's optional methods."""

    def __init__(self):
        self.calls = []

    def on_failure(self, session, error):
        self.calls.append(("on_failure", str(error)))

    def state_dict(self):
        return {"calls": len(self.calls)}

    def load_state_dict(self, state):
        self.calls.append(("load_state_dict", state))

    def next_action(self, global_step):
        return monsession.NextAction(steps=10)


def test_a_timed_proxy_forwards_the_optional_methods_the_hook_overrides():
    hook = Extras()
    proxy, reporter = HookTimingHook.wrap([hook])
    for name in ("on_failure", "state_dict", "load_state_dict", "next_action"):
        assert monsession.plugins.hook_overrides(proxy, name), name
    for name in ("epoch_begin", "epoch_end", "before_run", "after_run"):
        assert not monsession.plugins.hook_overrides(proxy, name), name
    assert proxy.next_action(0) == monsession.NextAction(steps=10)
    with tf.Graph().as_default():
        global_step = monsession.get_or_create_global_step()
        train = global_step.assign_add(1)
        with pytest.raises(ValueError, match="broken"):
            with monsession.MonitoredSession(hooks=[proxy, reporter]) as session:
                session.run(train)
                raise ValueError("broken")
    assert hook.calls == [("on_failure", "broken")]
