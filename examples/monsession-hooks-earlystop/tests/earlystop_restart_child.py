"""Child of the early-stopping restart test: graph and eager mode in two threads.

Usage: python earlystop_restart_child.py ROOT STOP_AT. The loss of global
step s is ``max(10 - s, 4)``: it improves until step 6, then stays flat.
`EarlyStoppingHook(every_n_steps=2, patience=4)` evaluates it; a saving hook
after it writes a checkpoint every 5 steps, with the hooks' state written
first through the `HookStateWriter` the session hands it (`use_hook_state`),
as `CheckpointSaverHook` does.
A loop that reaches global step STOP_AT prints "<mode> READY" and waits
forever (the test kills it there); otherwise it trains until the hook stops
it and prints "<mode> STOPPED <json>" with the hook's results.
"""

from __future__ import annotations

import json
import os
import sys
import threading

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf
from monsession_hooks_earlystop import EarlyStoppingHook

import monsession

SAFETY_LAST_STEP = 40
_PRINT_LOCK = threading.Lock()
_FOREVER = threading.Event()
TABLE = [max(10.0 - step, 4.0) for step in range(SAFETY_LAST_STEP + 2)]


def _say(*words: str) -> None:
    with _PRINT_LOCK:
        print(*words, flush=True)


class SaveEvery5(monsession.SessionRunHook):
    """Writes a checkpoint every 5 global steps, the hooks' state first."""

    def __init__(self, directory: str, save: object) -> None:
        self._directory = directory
        self._save = save
        self._hook_state: monsession.plugins.HookStateWriter | None = None

    def use_hook_state(self, hook_state: monsession.plugins.HookStateWriter) -> None:
        self._hook_state = hook_state

    def after_run(self, run_context, run_values):  # type: ignore[no-untyped-def]
        step = run_context.global_step_after(lambda step: step % 5 == 0)
        if step is None:
            return
        prefix = os.path.join(self._directory, f"model.ckpt-{step}")
        assert self._hook_state is not None
        self._hook_state.save(prefix)
        self._save(run_context.session, step)


def _train(mode: str, sess: object, hook: EarlyStoppingHook, step: object, stop_at: int) -> None:
    while not sess.should_stop():
        if int(monsession.plugins.read_global_step(sess.raw_session())) == stop_at:
            _say(mode, "READY")
            _FOREVER.wait()
        sess.run(step)
    results = {"stopped": hook.stopped_step, "best": hook.best, "best_step": hook.best_step}
    _say(mode, "STOPPED", json.dumps(results))


def graph_main(directory: str, stop_at: int) -> None:
    with tf.Graph().as_default():
        global_step = monsession.get_or_create_global_step()
        new_step = global_step + 1  # One read, before the assignment.
        loss = tf.gather(tf.constant(TABLE), new_step, name="loss")
        train_op = global_step.assign(new_step)
        saver = tf.compat.v1.train.Saver()
        base = os.path.join(directory, "model.ckpt")
        hook = EarlyStoppingHook(loss, patience=4, every_n_steps=2)
        saving = SaveEvery5(directory, lambda s, step: saver.save(s, base, global_step=step))
        stop = monsession.StopAtStepHook(last_step=SAFETY_LAST_STEP)
        scaffold = monsession.Scaffold(saver=saver)
        with monsession.SingularMonitoredSession(
            hooks=[stop, hook, saving], scaffold=scaffold, checkpoint_dir=directory
        ) as sess:
            _train("graph", sess, hook, train_op, stop_at)


def eager_main(directory: str, stop_at: int) -> None:
    global_step = monsession.get_or_create_global_step()
    table = tf.constant(TABLE)

    @tf.function
    def step():
        new_step = global_step + 1
        global_step.assign(new_step)
        return {"loss": tf.gather(table, new_step)}

    checkpoint = tf.train.Checkpoint(step=global_step)
    manager = tf.train.CheckpointManager(
        checkpoint, directory, max_to_keep=None, checkpoint_name="model.ckpt"
    )
    hook = EarlyStoppingHook("loss", patience=4, every_n_steps=2)
    saving = SaveEvery5(directory, lambda s, step: manager.save(checkpoint_number=step))
    stop = monsession.StopAtStepHook(last_step=SAFETY_LAST_STEP)
    with monsession.SingularMonitoredSession(
        hooks=[stop, hook, saving],
        scaffold=monsession.Scaffold(saver=checkpoint),
        checkpoint_dir=directory,
    ) as sess:
        _train("eager", sess, hook, step, stop_at)


def main() -> None:
    root, stop_at = sys.argv[1], int(sys.argv[2])
    graph = threading.Thread(
        target=graph_main, args=(os.path.join(root, "graph"), stop_at), daemon=True
    )
    graph.start()
    eager_main(os.path.join(root, "eager"), stop_at)
    graph.join()


if __name__ == "__main__":
    main()
