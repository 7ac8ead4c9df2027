"""Child process of the checkpoint signal tests: phases of training, each stopped by a signal.

Usage: python checkpoint_signal_child.py ROOT PHASE [PHASE ...]. A phase is
``<mode>-<kind>`` and trains with `MonitoredTrainingSession(checkpoint_dir=
ROOT/<phase>)` and its default checkpoint saver (every 600 seconds: only the
step-0 checkpoint is written before the signal). mode is ``graph`` or
``eager`` (fresh state each phase); kind is

* ``user``: a SIGTERM handler installed before the session prints the
  signal and the latest checkpoint it finds, and returns;
* ``off``: the same with `stop_on_signals=False`; the phase ends by itself
  after `OFF_STEPS` steps;
* ``sigint-caught``: SIGINT's default handler; the child catches the
  `KeyboardInterrupt` outside the `with` block;
* ``sigterm``: SIGTERM's default disposition (ends the process).

Prints ``RAN <phase> <n>`` after every step, ``READY <phase>`` after
`READY_AFTER` steps (the parent then sends the signal), and ``DONE <phase>``
at the end of the phase.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf

import monsession

READY_AFTER = 5
OFF_STEPS = READY_AFTER + 20
MAX_STEPS = 3000  # A stop that never comes fails the test instead of hanging it.
DECAY = 0.9  # Each step multiplies the weight by this: the weight tells the step.

_phase = ""
_checkpoint_dir = ""


def say(*words):
    print(*words, flush=True)


def _user_handler(signum, frame):
    # Not print(): the signal may land inside a print() of the main code, and
    # sys.stdout cannot be entered twice. One write() of a line is safe.
    latest = tf.train.latest_checkpoint(_checkpoint_dir)
    os.write(sys.stdout.fileno(), f"USER-HANDLER {_phase} {signum} {latest}\n".encode())


def _program(mode):
    """(global_step, step, scaffold): each step multiplies `w` by DECAY."""
    global_step = monsession.get_or_create_global_step()
    if mode == "graph":
        weight = tf.compat.v1.get_variable("w", initializer=1.0)
        with tf.control_dependencies([weight.assign(weight * DECAY)]):
            return global_step, tf.compat.v1.assign_add(global_step, 1), None
    weight = tf.Variable(1.0)

    @tf.function
    def step():
        weight.assign(weight * DECAY)
        global_step.assign_add(1)
        return {}

    checkpoint = tf.train.Checkpoint(step=global_step, w=weight)
    return global_step, step, monsession.Scaffold(saver=checkpoint)


def _train(sess, step, kind):
    limit = OFF_STEPS if kind == "off" else MAX_STEPS
    for ran in range(1, limit + 1):
        if sess.should_stop():
            return
        sess.run(step)
        say("RAN", _phase, ran)
        if ran == READY_AFTER:
            say("READY", _phase)
        time.sleep(0.01)  # A step of some length: the signal lands anywhere.


def run_phase(root, phase):
    global _phase, _checkpoint_dir
    _phase = phase
    _checkpoint_dir = os.path.join(root, phase)
    mode, kind = phase.split("-", 1)
    if kind in ("user", "off"):
        signal.signal(signal.SIGTERM, _user_handler)
    else:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    tf.compat.v1.reset_default_graph()
    graph = tf.Graph() if mode == "graph" else None
    caught = (KeyboardInterrupt,) if kind == "sigint-caught" else ()
    try:
        with graph.as_default() if graph is not None else contextlib.nullcontext():
            _, step, scaffold = _program(mode)
            with monsession.MonitoredTrainingSession(
                checkpoint_dir=_checkpoint_dir,
                scaffold=scaffold,
                save_summaries_steps=None,
                log_step_count_steps=None,
                stop_on_signals=kind != "off",
            ) as sess:
                _train(sess, step, kind)
            say("AFTER-WITH", phase)
    except caught as error:
        say("CAUGHT", phase, type(error).__name__)
    say("DONE", phase)


if __name__ == "__main__":
    # As a program run in a terminal: a child of a background job (a CI
    # runner's, say) inherits SIGINT ignored.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for name in sys.argv[2:]:
        run_phase(sys.argv[1], name)
