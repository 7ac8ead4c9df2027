"""Training stall of one checkpoint save of a ~100 MB model, in one run.

The stall is the time from the step that saves until training can go on: the
extra time (over the median of the other steps) of the `run()` that triggers
the save and of the two steps after it. Every step updates all the weights,
so copy-on-write costs that an asynchronous save moves into the next steps
are counted.

* Eager mode, a Keras 3 model: `CheckpointSaverHook` by default (the files
  written in the background) vs `async_save=False` (synchronous). After each
  save the benchmark waits, untimed, for the background write
  (`tf.train.Checkpoint.sync()`), so every save starts with nothing pending;
  the time that write took is reported too.
* Graph mode, side by side: monsession's `CheckpointSaverHook` vs
  `tf.compat.v1.train.CheckpointSaverHook` on the same program.

Variants are interleaved, in rotating order, over several rounds, each
starting after an untimed `os.sync()`; medians are compared as ratios.

    python benchmarks/bench_checkpoint.py [--rounds 4] [--saves 4] [--megabytes 100]

Writes benchmarks/results/checkpoint.json.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras
import tensorflow as tf

import monsession
from monsession_hooks_checkpoint import CheckpointSaverHook

RESULTS = pathlib.Path(__file__).parent / "results" / "checkpoint.json"
SAVE_STEPS = 10
VARIABLES = 4


def _shape(megabytes):
    side = int((megabytes * 2**20 / VARIABLES / 4) ** 0.5)
    return [side, side]


AFTER_SAVE = 3  # The saving step and the two after it.


def _stalls(durations, save_indices):
    affected = {i + k for i in save_indices for k in range(AFTER_SAVE)}
    normal = statistics.median(d for i, d in enumerate(durations) if i not in affected)
    return [sum(d - normal for d in durations[i : i + AFTER_SAVE]) for i in save_indices]


def eager_round(async_save, saves, shape):
    """Returns (stalls, background write times) in seconds."""
    tf.compat.v1.reset_default_graph()
    global_step = monsession.get_or_create_global_step()
    model = keras.Sequential(
        [keras.Input((shape[0],))]
        + [keras.layers.Dense(shape[1], use_bias=False) for _ in range(VARIABLES)]
    )
    weights = model.trainable_variables

    @tf.function
    def step():
        for weight in weights:
            weight.assign_add(tf.fill(shape, 1e-3))
        global_step.assign_add(1)
        return {}

    checkpoint = tf.train.Checkpoint(step=global_step, model=model)
    stalls, writes = [], []
    with tempfile.TemporaryDirectory() as directory:
        hook = CheckpointSaverHook(
            directory, save_steps=SAVE_STEPS, saver=checkpoint, async_save=async_save
        )
        with monsession.SingularMonitoredSession(hooks=[hook]) as session:
            # One warm-up save (traces the copy function, allocates host copies).
            for _ in range(SAVE_STEPS):
                session.run(step)
            checkpoint.sync()
            durations, save_indices = [], []
            for index in range(saves * SAVE_STEPS + AFTER_SAVE):
                start = time.perf_counter()
                session.run(step)
                durations.append(time.perf_counter() - start)
                if (index + 1) % SAVE_STEPS == 0 and len(save_indices) < saves:
                    save_indices.append(index)
                    saved_at = start
                if save_indices and index == save_indices[-1] + AFTER_SAVE - 1:
                    checkpoint.sync()  # Untimed: the next save starts with nothing pending.
                    writes.append(time.perf_counter() - saved_at)
            stalls = _stalls(durations, save_indices)
    return stalls, writes


def graph_round(variant, saves, shape):
    """Returns the stalls in seconds of one graph-mode session."""
    with tf.Graph().as_default():
        global_step = monsession.get_or_create_global_step()
        weights = [
            tf.compat.v1.get_variable(f"w{index}", shape, initializer=tf.zeros_initializer())
            for index in range(VARIABLES)
        ]
        with tf.control_dependencies([w.assign_add(tf.fill(shape, 1e-3)) for w in weights]):
            train_op = tf.compat.v1.assign_add(global_step, 1)
        hook_class = (
            CheckpointSaverHook
            if variant == "monsession"
            else tf.compat.v1.train.CheckpointSaverHook
        )
        session_class = (
            monsession.SingularMonitoredSession
            if variant == "monsession"
            else tf.compat.v1.train.SingularMonitoredSession
        )
        with tempfile.TemporaryDirectory() as directory:
            hook = hook_class(directory, save_steps=SAVE_STEPS)
            with session_class(hooks=[hook]) as session:
                for _ in range(SAVE_STEPS):
                    session.run(train_op)
                durations, save_indices = [], []
                for index in range(saves * SAVE_STEPS + AFTER_SAVE):
                    start = time.perf_counter()
                    session.run(train_op)
                    durations.append(time.perf_counter() - start)
                    if (index + 1) % SAVE_STEPS == 0 and len(save_indices) < saves:
                        save_indices.append(index)
                return _stalls(durations, save_indices)


def _ms(seconds):
    return round(1000 * statistics.median(seconds), 2)


def run(rounds, saves, megabytes):
    """Measures every variant; returns the results (also written by `main`)."""
    shape = _shape(megabytes)
    variants = {
        "eager/sync": lambda: eager_round(False, saves, shape),
        "eager/default": lambda: eager_round(None, saves, shape),
        "graph/monsession": lambda: (graph_round("monsession", saves, shape), []),
        "graph/tf": lambda: (graph_round("tensorflow", saves, shape), []),
    }
    names = list(variants)
    samples = {name: [] for name in names}
    async_writes = []
    for round_index in range(rounds):
        # Rotate the order, so no variant always follows the same one.
        shift = round_index % len(names)
        for name in names[shift:] + names[:shift]:
            os.sync()  # Untimed: what earlier variants wrote is on disk, not being written back.
            stalls, writes = variants[name]()
            samples[name] += stalls
            if name == "eager/default":
                async_writes += writes
    stall_ms = {name: _ms(values) for name, values in samples.items()}
    return {
        "variables_mb": round(VARIABLES * shape[0] * shape[1] * 4 / 2**20, 1),
        "rounds": rounds,
        "saves_per_round": saves,
        "median_stall_ms": stall_ms,
        "median_background_save_to_files_complete_ms": _ms(async_writes),
        "ratios": {
            "eager (Keras 3): default stall / sync stall": round(
                stall_ms["eager/default"] / stall_ms["eager/sync"], 3
            ),
            "graph: monsession / tf.compat.v1 CheckpointSaverHook stall": round(
                stall_ms["graph/monsession"] / stall_ms["graph/tf"], 3
            ),
        },
        "tensorflow": tf.__version__,
        "cpus": os.cpu_count(),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--saves", type=int, default=4, help="timed saves per round")
    parser.add_argument("--megabytes", type=float, default=100)
    args = parser.parse_args()
    results = run(args.rounds, args.saves, args.megabytes)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
