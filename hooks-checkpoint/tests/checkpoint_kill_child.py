"""Child process of the SIGKILL test: trains and saves a checkpoint every step, forever.

Usage: python checkpoint_kill_child.py CHECKPOINT_DIR. Two loops run at once
in two threads (one TensorFlow import for both): graph mode with synchronous
saves into CHECKPOINT_DIR/graph and eager mode, a Keras 3 model saved in the
background (the default), into CHECKPOINT_DIR/eager-async. Every step sets
each variable to the new global step everywhere, so a loaded checkpoint is
consistent iff all its values equal its global step. Prints
"<mode> SAVING <step>" / "<mode> SAVED <step>" around every save (SAVED once
the checkpoint is complete).
"""

from __future__ import annotations

import os
import sys
import threading

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras
import tensorflow as tf

import monsession
from monsession_hooks_checkpoint import CheckpointSaverHook, CheckpointSaverListener

SHAPE = [1024, 4096]  # 16 MiB of float32 per variable.
COUNT = 4


_PRINT_LOCK = threading.Lock()


class Announce(CheckpointSaverListener):
    def __init__(self, mode):
        self.mode = mode

    def _say(self, what, step):
        with _PRINT_LOCK:
            print(f"{self.mode} {what} {step}", flush=True)

    def before_save(self, session, global_step_value):
        self._say("SAVING", global_step_value)

    def after_save(self, session, global_step_value):
        self._say("SAVED", global_step_value)


def graph_main(checkpoint_dir: str) -> None:
    with tf.Graph().as_default():
        global_step = monsession.get_or_create_global_step()
        weights = [
            tf.compat.v1.get_variable(f"w{i}", SHAPE, initializer=tf.zeros_initializer())
            for i in range(COUNT)
        ]
        next_step = global_step + 1
        value = tf.fill(SHAPE, tf.cast(next_step, tf.float32))
        with tf.control_dependencies([w.assign(value) for w in weights]):
            train_op = tf.compat.v1.assign(global_step, next_step)
        hook = CheckpointSaverHook(checkpoint_dir, save_steps=1, listeners=[Announce("graph")])
        with monsession.MonitoredSession(
            session_creator=monsession.ChiefSessionCreator(checkpoint_dir=checkpoint_dir),
            hooks=[hook],
        ) as sess:
            while True:
                sess.run(train_op)


def eager_main(checkpoint_dir: str) -> None:
    global_step = monsession.get_or_create_global_step()
    layers = {
        f"w{i}": keras.layers.Dense(SHAPE[1], use_bias=False, kernel_initializer="zeros")
        for i in range(COUNT)
    }
    for layer in layers.values():
        layer.build((None, SHAPE[0]))

    @tf.function
    def step():
        next_step = global_step + 1
        for layer in layers.values():
            layer.kernel.assign(tf.fill(SHAPE, tf.cast(next_step, tf.float32)))
        global_step.assign(next_step)
        return {}

    checkpoint = tf.train.Checkpoint(step=global_step, **layers)
    hook = CheckpointSaverHook(
        checkpoint_dir, save_steps=1, saver=checkpoint, listeners=[Announce("eager-async")]
    )
    with monsession.MonitoredSession(
        session_creator=monsession.ChiefSessionCreator(
            scaffold=monsession.Scaffold(saver=checkpoint), checkpoint_dir=checkpoint_dir
        ),
        hooks=[hook],
    ) as sess:
        while True:
            sess.run(step)


if __name__ == "__main__":
    root = sys.argv[1]
    graph_thread = threading.Thread(
        target=graph_main, args=(os.path.join(root, "graph"),), daemon=True
    )
    graph_thread.start()
    eager_main(os.path.join(root, "eager-async"))
