"""Child process of the signal tests: trains phase after phase, each stopped by a signal.

Usage: python signal_child.py PHASE [PHASE ...]. A phase is ``<mode>-<kind>``:
mode ``graph`` or ``eager`` (fresh state each phase), and kind

* ``user``: a SIGTERM handler installed before the session prints and returns;
* ``for-loop``: the same, and the loop never checks `should_stop()`;
* ``off``: the same with `stop_on_signals=False`; the phase ends by itself
  after `OFF_STEPS` steps;
* ``sigint-caught``: SIGINT's default handler; the child catches the
  `KeyboardInterrupt` outside the `with` block;
* ``sigint``: the same, not caught (ends the process);
* ``sigterm``: SIGTERM's default disposition (ends the process).

Each phase trains with a `MonitoredSession` whose hook prints
``END <phase> <global step>`` in `end()`, prints ``RAN <phase> <n>`` after
every step, ``READY <phase>`` after `READY_AFTER` steps (the parent then
sends the signal), ``AFTER-WITH <phase>`` once the `with` block is left and
``DONE <phase>`` at the end of the phase.
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

_phase = ""


def say(*words):
    print(*words, flush=True)


class PrintEnd(monsession.SessionRunHook):
    def __init__(self, global_step):
        self._global_step = global_step

    def end(self, session):
        say("END", _phase, int(session.run(self._global_step)))

    def on_failure(self, session, error):
        say("FAILURE", _phase, type(error).__name__)


def _user_handler(signum, frame):
    # Not print(): the signal may land inside a print() of the main code, and
    # sys.stdout cannot be entered twice. One write() of a line is safe.
    os.write(sys.stdout.fileno(), f"USER-HANDLER {_phase} {signum}\n".encode())


def _program(mode):
    global_step = monsession.get_or_create_global_step()
    if mode == "graph":
        weight = tf.compat.v1.get_variable("w", initializer=4.0)
        with tf.control_dependencies([weight.assign_sub(0.1 * weight)]):
            return global_step, tf.compat.v1.assign_add(global_step, 1)
    weight = tf.Variable(4.0)

    @tf.function
    def step():
        weight.assign_sub(0.1 * weight)
        global_step.assign_add(1)
        return {"weight": weight.read_value()}

    return global_step, step


def _train(sess, step, kind):
    limit = OFF_STEPS if kind == "off" else MAX_STEPS
    for ran in range(1, limit + 1):
        if kind != "for-loop" and sess.should_stop():
            return
        sess.run(step)
        say("RAN", _phase, ran)
        if ran == READY_AFTER:
            say("READY", _phase)
        time.sleep(0.01)  # A step of some length: the signal lands anywhere.


def run_phase(phase):
    global _phase
    _phase = phase
    mode, kind = phase.split("-", 1)
    if kind in ("user", "for-loop", "off"):
        signal.signal(signal.SIGTERM, _user_handler)
    else:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    tf.compat.v1.reset_default_graph()
    graph = tf.Graph() if mode == "graph" else None
    caught = (KeyboardInterrupt,) if kind == "sigint-caught" else ()
    try:
        with graph.as_default() if graph is not None else contextlib.nullcontext():
            global_step, step = _program(mode)
            with monsession.MonitoredSession(
                hooks=[PrintEnd(global_step)], stop_on_signals=False if kind == "off" else None
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
    for name in sys.argv[1:]:
        run_phase(name)
