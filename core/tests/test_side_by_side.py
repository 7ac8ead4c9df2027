"""The same graph program under `tf.compat.v1.train` and under monsession.

Each scenario builds one program, runs it once with TensorFlow's classes and
once with ours, and compares the full hook call trace and the values returned.
"""

from __future__ import annotations

import types

import numpy as np
import pytest
import tensorflow as tf

import monsession

TF = tf.compat.v1.train


def _api(module):
    """The names a scenario uses, from TensorFlow or from monsession."""
    names = [
        "MonitoredSession",
        "SingularMonitoredSession",
        "MonitoredTrainingSession",
        "ChiefSessionCreator",
        "Scaffold",
        "SessionRunHook",
        "SessionRunArgs",
        "StopAtStepHook",
        "FeedFnHook",
        "FinalOpsHook",
    ]
    return types.SimpleNamespace(**{name: getattr(module, name) for name in names})


APIS = {"tensorflow": _api(TF), "monsession": _api(monsession)}


def _value(x):
    if isinstance(x, dict):
        return {k: _value(v) for k, v in sorted(x.items())}
    if isinstance(x, (list, tuple)):
        return [_value(v) for v in x]
    if isinstance(x, (np.ndarray, np.generic, float, int)):
        return np.round(np.asarray(x, dtype=np.float64), 5).tolist()
    return x


def make_tracer(api, trace, name, *, fetch=None, feed=None, stop_at=None, raise_at=None):
    """A scripted hook that records every call it gets."""

    class Tracer(api.SessionRunHook):
        def __init__(self):
            self.calls = 0

        def begin(self):
            trace.append((name, "begin"))

        def after_create_session(self, session, coord):
            step = session.run(tf.compat.v1.train.get_global_step())
            trace.append((name, "after_create_session", int(step), coord is not None))

        def before_run(self, run_context):
            self.calls += 1
            trace.append((name, "before_run", self.calls))
            if raise_at is not None and self.calls == raise_at[0]:
                raise raise_at[1]
            if fetch is None and feed is None:
                return None
            return api.SessionRunArgs(fetches=fetch, feed_dict=feed() if feed else None)

        def after_run(self, run_context, run_values):
            trace.append((name, "after_run", self.calls, _value(run_values.results)))
            if stop_at is not None and self.calls >= stop_at:
                run_context.request_stop()

        def end(self, session):
            step = session.run(tf.compat.v1.train.get_global_step())
            trace.append((name, "end", int(step)))

    return Tracer()


def build_program():
    """A tiny linear model trained with SGD; the learning rate is fed."""
    global_step = tf.compat.v1.train.get_or_create_global_step()
    w = tf.compat.v1.get_variable("w", initializer=tf.constant([1.0, -2.0]))
    lr = tf.compat.v1.placeholder_with_default(0.01, [], name="lr")
    x = tf.constant([[1.0, 2.0], [3.0, 4.0]])
    loss = tf.reduce_mean(tf.square(tf.linalg.matvec(x, w) - 1.0))
    train = tf.compat.v1.train.GradientDescentOptimizer(lr).minimize(loss, global_step=global_step)
    return types.SimpleNamespace(global_step=global_step, w=w, lr=lr, loss=loss, train=train)


def run_both(scenario):
    """Runs `scenario(api, program, trace)` for both APIs; returns both traces."""
    results = {}
    for label, api in APIS.items():
        with tf.Graph().as_default():
            trace: list = []
            program = build_program()
            outcome = scenario(api, program, trace)
            results[label] = (trace, _value(outcome))
    return results["tensorflow"], results["monsession"]


def test_plain_loop_with_stop_at_step_and_fetching_hooks():
    def scenario(api, p, trace):
        hooks = [
            make_tracer(api, trace, "a", fetch={"loss": p.loss, "lr": p.lr}),
            api.StopAtStepHook(last_step=4),
            make_tracer(api, trace, "b"),
        ]
        returned = []
        with api.MonitoredSession(hooks=hooks) as sess:
            while not sess.should_stop():
                returned.append(sess.run([p.train, p.loss]))
        return returned

    theirs, ours = run_both(scenario)
    assert ours == theirs
    assert len(ours[1]) == 4


def test_feeds_from_hooks_and_caller_are_merged():
    def scenario(api, p, trace):
        lr_hook = make_tracer(api, trace, "lr", fetch=p.lr, feed=lambda: {p.lr: 0.05})
        hooks = [lr_hook, api.FeedFnHook(dict), make_tracer(api, trace, "loss", fetch=p.loss)]
        out = []
        with api.MonitoredSession(hooks=hooks) as sess:
            for _ in range(3):
                out.append(sess.run(p.loss))
                out.append(sess.run(p.train))
        return out

    theirs, ours = run_both(scenario)
    assert ours == theirs


def test_request_stop_from_a_hook_and_final_ops():
    def scenario(api, p, trace):
        final = api.FinalOpsHook({"w": p.w, "step": p.global_step})
        hooks = [make_tracer(api, trace, "stopper", stop_at=3), final]
        with api.MonitoredSession(hooks=hooks) as sess:
            while not sess.should_stop():
                sess.run(p.train)
        return final.final_ops_values

    theirs, ours = run_both(scenario)
    assert ours == theirs
    assert ours[1]["step"] == 3.0


def test_recovery_from_aborted_error_restores_latest_checkpoint(tmp_path):
    def scenario(api, p, trace):
        directory = tmp_path / api.MonitoredSession.__module__.split(".")[0]
        directory.mkdir()
        directory = str(directory)
        scaffold = api.Scaffold()
        saver_holder = {}

        class SaveAtTwo(api.SessionRunHook):
            def after_run(self, run_context, run_values):
                step = run_context.session.run(p.global_step)
                if step == 2:
                    saver_holder["path"] = scaffold.saver.save(
                        run_context.session, directory + "/model.ckpt", global_step=step
                    )

        aborted = tf.errors.AbortedError(None, None, "injected preemption")
        hooks = [
            make_tracer(api, trace, "t", fetch=p.loss, raise_at=(4, aborted)),
            SaveAtTwo(),
            api.StopAtStepHook(last_step=5),
        ]
        creator = api.ChiefSessionCreator(scaffold=scaffold, checkpoint_dir=directory)
        steps = []
        with api.MonitoredSession(session_creator=creator, hooks=hooks) as sess:
            while not sess.should_stop():
                steps.append(sess.run([p.train, p.loss])[1])
        return steps

    theirs, ours = run_both(scenario)
    assert ours == theirs
    # after_create_session ran twice: at step 0 and after restoring step 2.
    creations = [entry for entry in ours[0] if entry[1] == "after_create_session"]
    assert [entry[2] for entry in creations] == [0, 2]


def test_end_of_data_out_of_range_ends_the_with_block_cleanly():
    def scenario(api, p, trace):
        dataset = tf.compat.v1.data.make_one_shot_iterator(tf.data.Dataset.range(3))
        next_element = dataset.get_next()
        hooks = [make_tracer(api, trace, "t", fetch=p.loss)]
        seen = []
        with api.MonitoredSession(hooks=hooks) as sess:
            while not sess.should_stop():
                seen.append(sess.run([next_element, p.train])[0])
        return seen

    theirs, ours = run_both(scenario)
    assert ours == theirs
    assert ours[1] == [0.0, 1.0, 2.0]
    assert ours[0][-1][:2] == ("t", "end")  # end() ran: the exit was clean.


def test_a_regular_error_skips_end_and_propagates():
    def scenario(api, p, trace):
        hooks = [make_tracer(api, trace, "t", raise_at=(2, ValueError("boom")))]
        sess = api.MonitoredSession(hooks=hooks)
        with pytest.raises(ValueError, match="boom"):
            with sess:
                while True:
                    sess.run(p.train)
        return sess.should_stop()

    theirs, ours = run_both(scenario)
    assert ours == theirs
    assert not any(entry[1] == "end" for entry in ours[0])


def test_run_step_fn_with_hooks_and_request_stop():
    def scenario(api, p, trace):
        hooks = [make_tracer(api, trace, "t", fetch=p.loss)]
        results = []

        def step_fn(step_context):
            raw = step_context.session.run(p.global_step)
            value = step_context.run_with_hooks(p.train)
            if raw >= 2:
                step_context.request_stop()
            return raw, value

        with api.MonitoredSession(hooks=hooks) as sess:
            while not sess.should_stop():
                results.append(sess.run_step_fn(step_fn))
        return results

    theirs, ours = run_both(scenario)
    assert ours == theirs


def test_singular_monitored_session_and_training_session_without_defaults(tmp_path):
    def scenario(api, p, trace):
        out = []
        with api.SingularMonitoredSession(hooks=[make_tracer(api, trace, "s")]) as sess:
            out.append(sess.run(p.train))
            out.append(sess.raw_session().run(p.global_step))
        training = api.MonitoredTrainingSession(
            hooks=[make_tracer(api, trace, "user")],
            chief_only_hooks=[make_tracer(api, trace, "chief")],
            log_step_count_steps=None,
            save_summaries_steps=None,
        )
        with training as sess:
            for _ in range(2):
                out.append(sess.run([p.train, p.loss])[1])
        return out

    theirs, ours = run_both(scenario)
    assert ours == theirs
