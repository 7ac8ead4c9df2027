"""MonitoredSession in graph mode: merging, stopping, closing, bad input."""

from __future__ import annotations

import collections
import threading

import pytest
import tensorflow as tf

import monsession
from monsession._session._monitored_session import _HookedSession


class Request(monsession.SessionRunHook):
    """Returns a fixed request from before_run and records what comes back."""

    def __init__(self, request=None, stop=False):
        self.request = request
        self.stop = stop
        self.values = []
        self.contexts = []

    def before_run(self, run_context):
        self.contexts.append(run_context)
        return self.request

    def after_run(self, run_context, run_values):
        self.values.append(run_values)
        if self.stop:
            run_context.request_stop()


@pytest.fixture
def ops(graph):
    a = tf.constant(1.0)
    b = tf.compat.v1.placeholder_with_default(2.0, [], name="b")
    c = tf.compat.v1.placeholder(tf.float32, [], name="c")
    return a, b, c, a + b


def test_hook_fetches_are_keyed_per_hook(ops):
    a, b, _, total = ops
    first, second, idle = (
        Request(monsession.SessionRunArgs([a])),
        Request(monsession.SessionRunArgs({"b": b})),
        Request(None),
    )
    with monsession.MonitoredSession(hooks=[first, second, idle]) as sess:
        assert sess.run(total) == 3.0
    assert first.values[0].results == [1.0]
    assert second.values[0].results == {"b": 2.0}
    assert idle.values[0].results is None
    assert first.contexts[0].original_args == monsession.SessionRunArgs(total)


def test_feeds_merge_and_conflicts(ops):
    _, b, c, total = ops
    total_plus_c = total + c
    with monsession.MonitoredSession(
        hooks=[Request(monsession.SessionRunArgs(None, {b: 10.0}))]
    ) as sess:
        user_feeds = {c: 1.0}
        assert sess.run(total_plus_c, feed_dict=user_feeds) == 12.0
        assert user_feeds == {c: 1.0}, "the caller's feed_dict must not change"
        with pytest.raises(RuntimeError, match="Same tensor is fed by a SessionRunHook and user"):
            sess.run(total, feed_dict={b: 1.0})
    two_hooks = [Request(monsession.SessionRunArgs(None, {b: 1.0})) for _ in range(2)]
    with monsession.MonitoredSession(hooks=two_hooks) as sess:
        with pytest.raises(RuntimeError, match="Same tensor is fed by two hooks"):
            sess.run(total)


def test_run_options_are_merged_and_metadata_collected(ops):
    _, _, _, total = ops
    opts = [
        # Timeouts no run reaches, even on a loaded machine: only their merge is tested.
        tf.compat.v1.RunOptions(
            trace_level=tf.compat.v1.RunOptions.SOFTWARE_TRACE, timeout_in_ms=600_000
        ),
        tf.compat.v1.RunOptions(
            trace_level=tf.compat.v1.RunOptions.FULL_TRACE, timeout_in_ms=300_000
        ),
    ]
    hooks = [Request(monsession.SessionRunArgs(None, None, o)) for o in opts]
    with monsession.MonitoredSession(hooks=hooks) as sess:
        sess.run(total)
    seen = hooks[0].values[0]
    assert seen.options.trace_level == tf.compat.v1.RunOptions.FULL_TRACE
    assert seen.options.timeout_in_ms == 600_000
    assert seen.run_metadata.step_stats.dev_stats, "FULL_TRACE must fill run_metadata"
    assert hooks[1].values[0].options is seen.options


def test_without_options_hooks_see_empty_protos(ops):
    _, _, _, total = ops
    hook = Request()
    with monsession.MonitoredSession(hooks=[hook]) as sess:
        sess.run(total)
        sess.run(total)
    assert hook.values[0].options == tf.compat.v1.RunOptions()
    assert hook.values[0].run_metadata == tf.compat.v1.RunMetadata()


def test_same_fetch_structure_is_prepared_once(ops):
    a, b, _, total = ops
    hook = Request(monsession.SessionRunArgs({"a": a}))
    with monsession.MonitoredSession(hooks=[hook]) as sess:
        hooked = sess._sess._sess._sess
        assert isinstance(hooked, _HookedSession)
        for _ in range(5):
            sess.run(total)
        assert len(hooked.backend._runner._callables) == 1
        hook.request = monsession.SessionRunArgs({"a": a, "b": b})
        sess.run(total)
        assert len(hooked.backend._runner._callables) == 2
        assert hook.values[-1].results == {"a": 1.0, "b": 2.0}


def test_fetch_structures_keep_session_run_semantics(ops):
    a, b, _, total = ops
    pair = collections.namedtuple("pair", "x y")
    variable = tf.compat.v1.get_variable("v", initializer=4.0)
    shared = Request(monsession.SessionRunArgs({"a": a, "again": [a, total]}))
    odd = Request(monsession.SessionRunArgs((pair(a, "b:0"), variable, total.op)))
    with monsession.MonitoredSession(hooks=[shared, odd]) as sess:
        for _ in range(2):
            assert sess.run([total, {"b": b}]) == [3.0, {"b": 2.0}]
    assert shared.values[-1].results == {"a": 1.0, "again": [1.0, 3.0]}
    assert odd.values[-1].results == (pair(1.0, 2.0), 4.0, None)


def test_errors_of_a_prepared_step_read_as_those_of_session_run(graph):
    value = tf.compat.v1.placeholder_with_default(1.0, [])
    checked = tf.debugging.check_numerics(tf.math.log(value - 2.0), "log of a negative")
    with tf.compat.v1.Session() as plain:
        with pytest.raises(tf.errors.InvalidArgumentError) as expected:
            plain.run(checked)
    with monsession.MonitoredSession(hooks=[Request(monsession.SessionRunArgs(value))]) as sess:
        with pytest.raises(tf.errors.InvalidArgumentError) as raised:
            sess.run(checked)
    assert str(raised.value) == str(expected.value)
    assert raised.value.op is not None and raised.value.op.name == expected.value.op.name


def test_should_stop_and_run_after_stop_or_close(ops):
    _, _, _, total = ops
    sess = monsession.MonitoredSession(hooks=[Request(stop=True)])
    assert not sess.should_stop()
    sess.run(total)
    assert sess.should_stop()
    with pytest.raises(RuntimeError, match="Run called even after should_stop requested"):
        sess.run(total)
    sess.close()
    assert sess.should_stop()
    with pytest.raises(RuntimeError, match=r"MonitoredSession.run\(\) called after close"):
        sess.run(total)
    with pytest.raises(RuntimeError, match="Session is already closed"):
        sess.close()


def test_hook_returning_something_else_is_named(ops):
    _, _, _, total = ops

    class Sloppy(monsession.SessionRunHook):
        def before_run(self, run_context):
            return [total]

    with monsession.MonitoredSession(hooks=[Sloppy()]) as sess:
        with pytest.raises(
            TypeError, match=r"Sloppy.before_run\(\) returned .*SessionRunArgs or None"
        ):
            sess.run(total)


def test_tensorflow_session_run_args_are_accepted(ops):
    a, _, _, total = ops
    hook = Request(tf.compat.v1.train.SessionRunArgs(a))
    with monsession.MonitoredSession(hooks=[hook]) as sess:
        sess.run(total)
    assert hook.values[0].results == 1.0


def test_objects_that_are_not_hooks_are_rejected_at_construction(graph):
    with pytest.raises(
        TypeError, match=r"^MonitoredSession: hooks\[1\] is 'oops' of type str, which lacks begin"
    ):
        monsession.MonitoredSession(hooks=[monsession.SessionRunHook(), "oops"])


def test_step_fn_signature_is_checked(ops):
    _, _, _, total = ops
    with monsession.MonitoredSession() as sess:
        with pytest.raises(ValueError, match="`step_fn` may either have one `step_context`"):
            sess.run_step_fn(lambda ctx: None)
        assert sess.run_step_fn(lambda step_context: step_context.session.run(total)) == 3.0


def test_end_is_called_on_clean_exit_only(graph):
    calls = []

    class End(monsession.SessionRunHook):
        def end(self, session):
            calls.append(session)

    with monsession.MonitoredSession(hooks=[End()]) as sess:
        raw = sess._tf_sess()
    assert calls == [raw]
    with pytest.raises(KeyError):
        with monsession.MonitoredSession(hooks=[End()]):
            raise KeyError("not clean")
    assert len(calls) == 1


def test_graph_is_finalized_during_and_unfinalized_after(graph):
    tf.constant(0)
    with monsession.MonitoredSession() as sess:
        assert graph.finalized
        assert sess.graph is graph
    assert not graph.finalized
    assert sess.graph is None


def test_stop_grace_period_bounds_the_wait_for_threads(graph):
    tf.constant(0)
    release = threading.Event()
    sess = monsession.MonitoredSession(stop_grace_period_secs=0.2)
    coord = sess._coordinated_creator.coord
    worker = threading.Thread(target=release.wait, args=(30,), daemon=True)
    coord.register_thread(worker)
    worker.start()
    sess.close()  # Returns after the grace period although the thread lives on.
    assert worker.is_alive()
    release.set()


def test_recovery_when_creating_the_session_is_preempted(graph):
    global_step = monsession.get_or_create_global_step()
    attempts = []

    def init_fn(scaffold, session):
        attempts.append(1)
        if len(attempts) == 1:
            raise tf.errors.UnavailableError(None, None, "worker gone")

    scaffold = monsession.Scaffold(init_fn=init_fn)
    creator = monsession.ChiefSessionCreator(scaffold=scaffold)
    with monsession.MonitoredSession(session_creator=creator) as sess:
        assert sess.run(global_step) == 0
    assert len(attempts) == 2


def test_singular_session_does_not_recover(graph):
    class Abort(monsession.SessionRunHook):
        def before_run(self, run_context):
            raise tf.errors.AbortedError(None, None, "Abort")

    tf.constant(0)
    with pytest.raises(tf.errors.AbortedError):
        with monsession.SingularMonitoredSession(hooks=[Abort()]) as sess:
            assert isinstance(sess.raw_session(), tf.compat.v1.Session)
            sess.run(tf.compat.v1.get_default_graph().get_operations()[0].outputs[0])
    assert sess.raw_session() is None


def test_chief_restores_from_checkpoint_dir_and_file(graph, tmp_path):
    global_step = monsession.get_or_create_global_step()
    increment = global_step.assign_add(5)
    scaffold = monsession.Scaffold()
    with monsession.SingularMonitoredSession(scaffold=scaffold) as sess:
        sess.run(increment)
        path = scaffold.saver.save(sess.raw_session(), str(tmp_path / "model.ckpt"), global_step=5)
    with monsession.MonitoredSession(
        monsession.ChiefSessionCreator(scaffold, checkpoint_dir=str(tmp_path))
    ) as sess:
        assert sess.run(global_step) == 5
    with monsession.SingularMonitoredSession(checkpoint_filename_with_path=path) as sess:
        assert sess.run(global_step) == 5


class _Ends(monsession.SessionRunHook):
    def __init__(self):
        self.ends = []

    def end(self, session):
        self.ends.append(session)


def test_hooks_end_once_when_a_session_is_closed_twice(ops):
    """TensorFlow calls `end(None)` again on a second close; monsession's hooks end once."""
    _, _, _, total = ops
    hook = _Ends()
    sess = monsession.MonitoredSession(hooks=[hook])
    sess.run(total)
    sess.close()
    with pytest.raises(RuntimeError, match="Session is already closed"):
        sess.close()
    assert len(hook.ends) == 1 and hook.ends[0] is not None
