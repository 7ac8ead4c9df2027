"""The cost of the damaged-checkpoint check at session creation.

At session creation the chief restores the newest readable checkpoint of its
directory (core's `_checkpoint_files.py`): each candidate's files and index
are checked, then the restore reads each tensor once (TensorFlow verifies
each tensor's checksum) and falls back to the next candidate when the data
is damaged. This measures, for a small and a ~100 MB checkpoint, in graph
and eager mode:

* ``check``: the up-front check of the latest checkpoint (files, index);
* ``read_back``: reading every tensor back, which the check did before each
  restore until the restore itself found damaged data (now only after a
  failed restore, or in eager mode for objects not created yet);
* ``restore``: the restore alone (graph: `Saver.restore` into a new session;
  eager: `tf.train.Checkpoint.restore`);
* ``create``: the chief's whole `ChiefSessionCreator(checkpoint_dir=...)
  .create_session()`, and ``create_unchecked``: the same creator given the
  checkpoint's path (`checkpoint_filename_with_path`), which restores it
  without any check, i.e. what the check adds to a start.

Variants are interleaved, in rotating order, over several rounds; the files
are in the page cache (written just before, and read by every round), as for
a restart on the same machine. Medians, and ratios of medians.

    python benchmarks/bench_restore_check.py [--rounds 7] [--megabytes 100]

Writes benchmarks/results/restore_check.json.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf

import monsession
from monsession._durability import _checkpoint_files

RESULTS = pathlib.Path(__file__).parent / "results" / "restore_check.json"
VARIABLES = 4
SMALL_MEGABYTES = 0.1


def _shape(megabytes: float) -> list[int]:
    side = max(1, int((megabytes * 2**20 / VARIABLES / 4) ** 0.5))
    return [side, side]


def _graph_model(shape: list[int]) -> None:
    monsession.get_or_create_global_step()
    for index in range(VARIABLES):
        tf.compat.v1.get_variable(f"w{index}", initializer=tf.ones(shape))


def _eager_state(shape: list[int]) -> tf.train.Checkpoint:
    weights = {f"w{index}": tf.Variable(tf.ones(shape)) for index in range(VARIABLES)}
    return tf.train.Checkpoint(step=tf.Variable(0, dtype=tf.int64), **weights)


def _save(mode: str, directory: str, shape: list[int]) -> str:
    """Writes one checkpoint into `directory`; returns its prefix."""
    if mode == "graph":
        with tf.Graph().as_default():
            _graph_model(shape)
            saver = tf.compat.v1.train.Saver()
            with tf.compat.v1.Session() as session:
                session.run(tf.compat.v1.global_variables_initializer())
                return saver.save(session, os.path.join(directory, "model.ckpt"), global_step=1)
    manager = tf.train.CheckpointManager(_eager_state(shape), directory, max_to_keep=1)
    return manager.save(checkpoint_number=1)


def _timed(action: Callable[[], Any], prepare: Callable[[], Any] | None = None) -> float:
    """Seconds `action` takes; `prepare` (untimed) builds what it needs."""
    if prepare is not None:
        prepare()
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def _common_variants(
    directory: str,
    prefix: str,
    restore: Callable[[], float],
    create: Callable[..., float],
) -> dict[str, Callable[[], float]]:
    check = _checkpoint_files.unreadable_reason
    return {
        "check": lambda: _timed(lambda: check(prefix, read_tensors=False)),
        "read_back": lambda: _timed(lambda: check(prefix)),
        "restore": restore,
        "create": lambda: create(checkpoint_dir=directory),
        "create_unchecked": lambda: create(checkpoint_filename_with_path=prefix),
    }


def _graph_variants(
    directory: str, prefix: str, shape: list[int]
) -> dict[str, Callable[[], float]]:
    def restore() -> float:
        with tf.Graph().as_default():
            _graph_model(shape)
            saver = tf.compat.v1.train.Saver()
            with tf.compat.v1.Session() as session:
                return _timed(lambda: saver.restore(session, prefix))

    def create(**where: str) -> float:
        with tf.Graph().as_default():
            _graph_model(shape)
            creator = monsession.ChiefSessionCreator(**where)
            started = time.perf_counter()
            session = creator.create_session()
            seconds = time.perf_counter() - started
            session.close()
            return seconds

    return _common_variants(directory, prefix, restore, create)


def _eager_variants(
    directory: str, prefix: str, shape: list[int]
) -> dict[str, Callable[[], float]]:
    def restore() -> float:
        state = _eager_state(shape)
        return _timed(lambda: state.restore(prefix).assert_consumed())

    def create(**where: str) -> float:
        scaffold = monsession.Scaffold(saver=_eager_state(shape))
        creator = monsession.ChiefSessionCreator(scaffold=scaffold, **where)
        return _timed(creator.create_session)

    return _common_variants(directory, prefix, restore, create)


def _ms(values: list[float]) -> float:
    return round(statistics.median(values) * 1000, 2)


def _measure(mode: str, megabytes: float, rounds: int) -> dict[str, Any]:
    shape = _shape(megabytes)
    with tempfile.TemporaryDirectory(prefix="monsession-bench-restore-") as directory:
        prefix = _save(mode, directory, shape)
        make = _graph_variants if mode == "graph" else _eager_variants
        variants = make(directory, prefix, shape)
        names = list(variants)
        for name in names:  # Untimed warm-up: page cache, TensorFlow's first-call costs.
            variants[name]()
        samples: dict[str, list[float]] = {name: [] for name in names}
        for round_index in range(rounds):
            shift = round_index % len(names)
            for name in names[shift:] + names[:shift]:
                samples[name].append(variants[name]())
        size = sum(
            os.path.getsize(os.path.join(directory, name))
            for name in os.listdir(directory)
            if name.startswith(os.path.basename(prefix))
        )
    medians = {name: _ms(values) for name, values in samples.items()}
    return {
        "checkpoint_mb": round(size / 2**20, 2),
        "median_ms": medians,
        "check / restore": round(medians["check"] / medians["restore"], 2),
        "read_back / restore": round(medians["read_back"] / medians["restore"], 2),
        "create / create_unchecked": round(medians["create"] / medians["create_unchecked"], 2),
        "added_by_check_ms": round(medians["create"] - medians["create_unchecked"], 2),
    }


def run(rounds: int = 7, megabytes: float = 100) -> dict[str, Any]:
    """Measures every variant; returns the results (also written by `main`)."""
    results: dict[str, Any] = {"rounds": rounds}
    for size, mb in (("small", SMALL_MEGABYTES), ("large", megabytes)):
        for mode in ("graph", "eager"):
            results[f"{mode}/{size}"] = _measure(mode, mb, rounds)
    results["tensorflow"] = tf.__version__
    results["cpus"] = os.cpu_count()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--megabytes", type=float, default=100)
    args = parser.parse_args()
    results = run(args.rounds, args.megabytes)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
