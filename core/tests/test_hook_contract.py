"""One hook contract: `SessionRunHook` declares every method monsession calls.

Every method has a no-op default; monsession calls a hook's optional
methods only when it overrides them (`hook_overrides`), for hooks derived
from our base, from TensorFlow's, or from neither. A context no monitored
session built (TensorFlow's, or one made by hand) still gives the step
service, read through the session as TensorFlow's hooks do.
"""

from __future__ import annotations

import logging

import pytest
import tensorflow as tf

import monsession
from monsession._api._dispatcher import HookDispatcher

OPTIONAL = (
    "next_action",
    "on_failure",
    "state_dict",
    "load_state_dict",
    "use_hook_state",
    "epoch_begin",
    "epoch_end",
)


def test_the_base_declares_every_method_monsession_calls_with_no_op_defaults():
    assert monsession.plugins.HOOK_METHOD_NAMES == (
        "begin",
        "after_create_session",
        "before_run",
        "after_run",
        "end",
        *OPTIONAL,
    )
    hook = monsession.SessionRunHook()
    context = monsession.SessionRunContext(monsession.SessionRunArgs(None), None)
    assert hook.begin() is None
    assert hook.after_create_session(None, None) is None
    assert hook.before_run(context) is None
    assert hook.after_run(context, monsession.SessionRunValues(None, None, None)) is None
    assert hook.end(None) is None
    assert hook.next_action(3) == monsession.NextAction(steps=1)
    assert hook.on_failure(None, ValueError()) is None
    assert hook.state_dict() is None
    assert hook.load_state_dict({"a": 1}) is None
    assert hook.use_hook_state(None) is None
    assert hook.epoch_begin(0) is None
    assert hook.epoch_end(0) is None
    for name in monsession.plugins.HOOK_METHOD_NAMES:
        assert getattr(monsession.SessionRunHook, name).__doc__, name


def test_tensorflows_five_methods_are_published_once_in_their_calling_order():
    theirs = tuple(
        name
        for name, value in vars(tf.compat.v1.train.SessionRunHook).items()
        if callable(value) and not name.startswith("_")
    )
    assert monsession.plugins.TF_HOOK_METHOD_NAMES == theirs
    assert monsession.plugins.HOOK_METHOD_NAMES[: len(theirs)] == theirs


class Ours(monsession.SessionRunHook):
    def on_failure(self, session, error):
        pass

    def epoch_end(self, epoch):
        return True


class Duck:
    """A hook that derives from no base class."""

    def begin(self):
        pass

    def after_create_session(self, session, coord):
        pass

    def before_run(self, run_context):
        return None

    def after_run(self, run_context, run_values):
        pass

    def end(self, session):
        pass

    def state_dict(self):
        return {}

    def load_state_dict(self, state):
        pass


def test_hook_overrides_tells_own_methods_from_the_base_defaults():
    ours, duck, theirs = Ours(), Duck(), tf.compat.v1.train.StopAtStepHook(last_step=3)
    assert monsession.plugins.hook_overrides(ours, "on_failure")
    assert monsession.plugins.hook_overrides(ours, "epoch_end")
    assert not monsession.plugins.hook_overrides(ours, "epoch_begin")
    assert not monsession.plugins.hook_overrides(ours, "before_run")
    assert monsession.plugins.hook_overrides(duck, "before_run")
    assert not monsession.plugins.hook_overrides(duck, "on_failure")
    assert monsession.plugins.hook_overrides(theirs, "after_run")
    assert not monsession.plugins.hook_overrides(theirs, "end")  # TensorFlow's base no-op.
    assert not monsession.plugins.hook_overrides(theirs, "next_action")
    ours.epoch_begin = lambda epoch: None  # A method set on the instance (a proxy) counts.
    assert monsession.plugins.hook_overrides(ours, "epoch_begin")


def test_hook_overrides_refuses_a_name_the_base_does_not_declare():
    with pytest.raises(ValueError, match="SessionRunHook declares no method 'on_epoch_end'"):
        monsession.plugins.hook_overrides(Ours(), "on_epoch_end")


class Stateful(monsession.SessionRunHook):
    def state_dict(self):
        return {"n": 1}

    def load_state_dict(self, state):
        pass


class HalfStateful(monsession.SessionRunHook):
    def state_dict(self):
        return {"n": 1}


def test_only_hooks_with_their_own_state_methods_have_saved_state():
    hooks = [
        monsession.SessionRunHook(),  # The base's "no state".
        Ours(),
        Stateful(),
        HalfStateful(),  # As before: a state that cannot be loaded back is not saved.
        Duck(),
        tf.compat.v1.train.StopAtStepHook(last_step=3),
    ]
    assert HookDispatcher(hooks, "MonitoredSession").state_keys == ["Stateful[0]", "Duck[0]"]


def test_state_key_is_declared_on_the_base_and_names_the_saved_state():
    assert monsession.SessionRunHook.state_key is None
    assert "state_key" not in monsession.plugins.HOOK_METHOD_NAMES

    class Keyed(Stateful):
        state_key = "mine"

    hooks = [Stateful(), Keyed(), Stateful()]
    keys = HookDispatcher(hooks, "MonitoredSession").state_keys
    assert keys == ["Stateful[0]", "mine", "Stateful[1]"]


def test_on_failure_and_epoch_end_reach_a_hook_that_derives_from_no_base():
    calls = []

    class DuckWithExtras(Duck):
        def on_failure(self, session, error):
            calls.append(("on_failure", str(error)))

        def epoch_end(self, epoch):
            calls.append(("epoch_end", epoch))

    @tf.function
    def step(x):
        return {}

    epochs = monsession.Epochs(tf.data.Dataset.range(2), num_epochs=1)
    with pytest.raises(ValueError, match="after the epoch"):
        with monsession.MonitoredSession(hooks=[DuckWithExtras()]) as sess:
            assert list(epochs.run(sess, step)) == [0]
            raise ValueError("after the epoch")
    assert calls == [("epoch_end", 0), ("on_failure", "after the epoch")]


def _graph_program():
    global_step = tf.compat.v1.train.get_or_create_global_step()
    increment = global_step.assign_add(1)
    session = tf.compat.v1.Session()
    session.run(tf.compat.v1.global_variables_initializer())
    return global_step, increment, session


CONTEXTS = {
    "monsession": monsession.SessionRunContext,
    "tensorflow": tf.compat.v1.train.SessionRunContext,
}


@pytest.mark.parametrize("context_class", list(CONTEXTS))
def test_a_context_made_by_hand_reads_the_global_step_through_the_session(context_class, graph):
    _, increment, session = _graph_program()
    session.run(increment)  # Step 1.
    made = CONTEXTS[context_class](monsession.SessionRunArgs(None), session)
    context = monsession.plugins.as_run_context(made)
    assert monsession.plugins.as_run_context(made) is context  # One view per context.
    assert context.global_step == 1
    assert (context.silent_steps, dict(context.silent_outputs)) == (0, {})
    session.run(increment)  # The run: step 2.
    assert context.global_step == 1  # The step before the run, as read first.
    assert context.global_step_after() == 2
    assert context.global_step_after(lambda step: step >= 3) is None
    context.request_stop()
    assert made.stop_requested and context.stop_requested


@pytest.mark.parametrize("context_class", list(CONTEXTS))
def test_core_hooks_run_with_a_context_made_by_hand(context_class, graph):
    _, increment, session = _graph_program()
    stop = monsession.StopAtStepHook(last_step=3)
    waiter = monsession.GlobalStepWaiterHook(wait_until_step=0)
    hooks = [stop, waiter]
    for hook in hooks:
        hook.begin()
        hook.after_create_session(session, None)
    stopped_at = None
    for _ in range(5):
        context = CONTEXTS[context_class](monsession.SessionRunArgs(None), session)
        for hook in hooks:
            hook.before_run(context)
        step = int(session.run(increment))
        for hook in hooks:
            hook.after_run(context, monsession.SessionRunValues(None, None, None))
        if context.stop_requested:
            stopped_at = step
            break
    assert stopped_at == 3


def test_a_monitored_context_is_returned_as_it_is(graph, caplog):
    _, increment, _ = _graph_program()
    seen = []

    class Probe(monsession.SessionRunHook):
        def before_run(self, run_context):
            seen.append(monsession.plugins.as_run_context(run_context) is run_context)

    with caplog.at_level(logging.WARNING), monsession.MonitoredSession(hooks=[Probe()]) as sess:
        sess.run(increment)
    assert seen == [True]


def test_a_hook_is_called_per_step_only_for_the_methods_it_overrides(program, monkeypatch):
    calls = []
    for base in (monsession.SessionRunHook, tf.compat.v1.train.SessionRunHook):
        for name in ("before_run", "after_run"):
            # The bases' defaults, recording: a hook that does not override a
            # method would reach them if it were called for it.
            monkeypatch.setattr(
                base, name, lambda self, *args, name=name: calls.append((type(self), name))
            )
    after_runs = []

    class AfterOnly(monsession.SessionRunHook):
        def after_run(self, run_context, run_values):
            after_runs.append(run_values.results)

    class TheirsBeforeOnly(tf.compat.v1.train.SessionRunHook):
        def before_run(self, run_context):
            return None

    hooks = [AfterOnly(), TheirsBeforeOnly(), monsession.SessionRunHook(), Ours()]
    with monsession.MonitoredSession(hooks=hooks) as sess:
        for _ in range(3):
            sess.run(program.step)
    assert calls == []
    assert after_runs == [None, None, None]
