"""Child process of the disk tests: trains with MonitoredTrainingSession, saving every 5 steps.

Usage: python checkpoint_disk_child.py MODE CHECKPOINT_DIR LAST_STEP FSIZE_LIMIT HOLD [SESSION].
MODE is "graph" or "eager". SESSION is "mts" (MonitoredTrainingSession, the
default), "ms" (MonitoredSession with a CheckpointSaverHook) or "sms"
(SingularMonitoredSession with a CheckpointSaverHook). FSIZE_LIMIT > 0 sets
RLIMIT_FSIZE (bytes) with
SIGXFSZ ignored, so that a larger write fails with EFBIG. HOLD = 1 waits for
a line on stdin after the session is created. Every step sets the 4 MiB
variable to the new global step. Prints "RESTORED <step>" once the session
exists and "TRAINED <step>" after closing it.
"""

from __future__ import annotations

import os
import resource
import signal
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf

import monsession

SIZE = 1024 * 1024  # 4 MiB of float32.


def main() -> None:
    mode, directory, last_step, limit, hold = sys.argv[1:6]
    kind = sys.argv[6] if len(sys.argv) > 6 else "mts"
    if int(limit) > 0:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (int(limit), int(limit)))
    step = monsession.get_or_create_global_step()
    if mode == "graph":
        weights = tf.compat.v1.get_variable("w", initializer=tf.zeros([SIZE]))
        with tf.control_dependencies([step.assign_add(1)]):
            train = weights.assign(tf.fill([SIZE], tf.cast(step.read_value(), tf.float32)))
        scaffold = monsession.Scaffold()
    else:
        weights = tf.Variable(tf.zeros([SIZE]))

        @tf.function
        def train():
            weights.assign(tf.fill([SIZE], tf.cast(step.assign_add(1), tf.float32)))

        scaffold = monsession.Scaffold(saver=tf.train.Checkpoint(step=step, w=weights))
    stop = monsession.StopAtStepHook(last_step=int(last_step))
    if kind == "mts":
        session_context = monsession.MonitoredTrainingSession(
            checkpoint_dir=directory,
            scaffold=scaffold,
            save_checkpoint_steps=5,
            save_summaries_steps=None,
            log_step_count_steps=None,
            hooks=[stop],
        )
    else:
        hooks = [monsession.CheckpointSaverHook(directory, save_steps=5, scaffold=scaffold), stop]
        if kind == "ms":
            creator = monsession.ChiefSessionCreator(scaffold=scaffold, checkpoint_dir=directory)
            session_context = monsession.MonitoredSession(session_creator=creator, hooks=hooks)
        else:
            session_context = monsession.SingularMonitoredSession(
                hooks=hooks, scaffold=scaffold, checkpoint_dir=directory
            )
    with session_context as session:
        print("RESTORED", session.run(step) if mode == "graph" else int(step.numpy()), flush=True)
        if hold == "1":
            sys.stdin.readline()
        while not session.should_stop():
            session.run(train)
    print(
        "TRAINED", int(tf.train.load_checkpoint(directory).get_tensor(_step_key(mode))), flush=True
    )


def _step_key(mode: str) -> str:
    return "global_step" if mode == "graph" else "step/.ATTRIBUTES/VARIABLE_VALUE"


if __name__ == "__main__":
    if sys.argv[1] == "graph":
        with tf.Graph().as_default():
            main()
    else:
        main()
