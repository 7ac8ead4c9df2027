"""Child of the hook-state restart test: trains in graph and eager mode at once.

Usage: python hook_state_child.py ROOT PHASE STOP_AT. Two loops run in two
threads (one TensorFlow import): graph mode into ROOT/graph, eager mode into
ROOT/eager. Each uses a step counter, a summary saver and a checkpoint saver
(every 5 steps), then a logging tensor hook and a progress bar. Right after
the session is created each prints "<mode> STATE <json>" (every hook's
state, by class name). A loop that reaches global step STOP_AT prints
"<mode> READY" and waits forever (the test kills the process there); with
STOP_AT 0 each loop trains to step 20 and closes its session. Each line of
the logging tensor hook is printed as "<mode> LOG <line>".
"""

from __future__ import annotations

import io
import json
import logging
import os
import sys
import threading
from collections.abc import Callable

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf

import monsession
from monsession_hooks_checkpoint import CheckpointSaverHook
from monsession_hooks_logging import LoggingTensorHook, ProgressBarHook
from monsession_hooks_summary import StepCounterHook, SummarySaverHook

LAST_STEP = 20
_PRINT_LOCK = threading.Lock()
_FOREVER = threading.Event()


def _say(mode: str, *words: str) -> None:
    with _PRINT_LOCK:
        print(mode, *words, flush=True)


class _LogLines(logging.Handler):
    """Prints the logging tensor hook's lines, with the mode of the thread that logged."""

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if message.startswith("x = "):
            _say(threading.current_thread().name, "LOG", message)


def _hooks(
    directory: str,
    phase: str,
    logged: object,
    summary_op: object = None,
    scaffold: object = None,
) -> list[object]:
    summaries = os.path.join(directory, f"summaries-{phase}")
    return [
        StepCounterHook(every_n_steps=4, output_dir=summaries),
        SummarySaverHook(save_steps=3, output_dir=summaries, summary_op=summary_op),
        CheckpointSaverHook(directory, save_steps=5, scaffold=scaffold),
        LoggingTensorHook({"x": logged}, every_n_iter=3),
        ProgressBarHook(last_step=LAST_STEP, every_n_iter=2, file=io.StringIO()),
    ]


def _train(
    mode: str,
    sess: object,
    hooks: list[object],
    step: object,
    stop_at: int,
    sync: Callable[[], object] = lambda: None,
) -> None:
    """Trains; `sync` waits for the checkpoint written in the background, if any."""
    states = {type(hook).__name__: hook.state_dict() for hook in hooks}
    _say(mode, "STATE", json.dumps(states))
    while not sess.should_stop():
        reached = int(monsession.plugins.read_global_step(sess.raw_session()))
        if reached == stop_at:
            sync()  # The test kills between checkpoints: the last one is complete.
            _say(mode, "READY")
            _FOREVER.wait()
        if reached >= LAST_STEP:
            break
        sess.run(step)


def graph_main(directory: str, phase: str, stop_at: int) -> None:
    with tf.Graph().as_default():
        global_step = monsession.get_or_create_global_step()
        x = tf.compat.v1.get_variable("x", initializer=0.0)
        summary_op = tf.compat.v1.summary.scalar("value", x)
        train_op = tf.group(x.assign_add(1.0), global_step.assign_add(1))
        hooks = _hooks(directory, phase, x, summary_op)
        with monsession.SingularMonitoredSession(hooks=hooks, checkpoint_dir=directory) as sess:
            _train("graph", sess, hooks, train_op, stop_at)


def eager_main(directory: str, phase: str, stop_at: int) -> None:
    global_step = monsession.get_or_create_global_step()
    x = tf.Variable(0.0)

    @tf.function
    def step():
        x.assign_add(1.0)
        tf.summary.scalar("value", x, step=global_step + 1)
        global_step.assign_add(1)
        return {"x": x.read_value()}

    scaffold = monsession.Scaffold(saver=tf.train.Checkpoint(step=global_step, x=x))
    hooks = _hooks(directory, phase, "x", scaffold=scaffold)
    with monsession.SingularMonitoredSession(
        hooks=hooks, scaffold=scaffold, checkpoint_dir=directory
    ) as sess:
        _train("eager", sess, hooks, step, stop_at, sync=scaffold.saver.sync)


def main() -> None:
    root, phase, stop_at = sys.argv[1], sys.argv[2], int(sys.argv[3])
    logger = logging.getLogger("tensorflow")
    logger.setLevel(logging.INFO)
    logger.addHandler(_LogLines())
    threading.current_thread().name = "eager"
    graph = threading.Thread(
        target=graph_main,
        args=(os.path.join(root, "graph"), phase, stop_at),
        daemon=True,
        name="graph",
    )
    graph.start()
    eager_main(os.path.join(root, "eager"), phase, stop_at)
    graph.join()
    _say("both", "DONE")


if __name__ == "__main__":
    main()
