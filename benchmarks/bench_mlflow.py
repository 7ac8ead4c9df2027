"""What `MlflowHook` costs a small eager loop, on a real SQLite store, in one run.

Variants, each its own monitored session on its own copy of the same step
(the tiny regression model of bench_debug), all open together:

* ``session``: no tracking;
* ``idle``: an `MlflowHook` with nothing due in the measured steps
  (``every_n_steps`` beyond them): the per-step cost of the idle hook;
* ``every_10``: logging ``loss`` and the step rate every 10 steps, sent at
  once (``exactly_once=False``) by the hook's background thread;
* ``every_1``: the same, every step;
* ``every_10_held``: every 10 steps, the default ``exactly_once=True``
  (without checkpoints the rows wait in the hook until the end).

Single steps (``steps_per_execution=1``) and ``"auto"``: with ``"auto"``
the loop without tracking runs fused blocks as long as the session allows,
and the logging points end fused blocks (the global step is read after
each run there, to count the steps a run executed). Variants are
interleaved, in rotating order, over several rounds; each sample ends by
waiting for the device; medians of the per-step time are compared with
``session`` of the same setting.

Also reports the installed size of what the family adds to core and
TensorFlow (its distribution's dependencies, read from the environment).

    python benchmarks/bench_mlflow.py [--steps 300] [--rounds 21]

Writes benchmarks/results/mlflow.json.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import pathlib
import re
import statistics
import tempfile
import time
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

import tensorflow as tf

import monsession
from monsession_hooks_mlflow import MlflowHook

RESULTS = pathlib.Path(__file__).parent / "results" / "mlflow.json"
VARIANTS = ("session", "idle", "every_10", "every_1", "every_10_held")
SETTINGS = {"single": 1, "auto": "auto"}
# (variant, setting) -> the most its ratio to `session` may be; idle: µs per step.
TARGETS = {("every_10", "single"): 1.05}
IDLE_TARGET_US = 2.0
WARMUP_STEPS = 50


def make_step() -> Any:
    """A small regression step returning {"loss": ...} (a fresh default graph's global step)."""
    tf.compat.v1.reset_default_graph()
    global_step = monsession.get_or_create_global_step()
    x = tf.random.normal([64, 32], seed=1)
    y = tf.random.normal([64, 1], seed=2)
    w1 = tf.Variable(tf.random.normal([32, 32], seed=3) * 0.1)
    w2 = tf.Variable(tf.random.normal([32, 1], seed=4) * 0.1)

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            hidden = tf.nn.relu(tf.matmul(x, w1))
            loss = tf.reduce_mean(tf.square(tf.matmul(hidden, w2) - y))
        grads = tape.gradient(loss, [w1, w2])
        w1.assign_sub(0.01 * grads[0])
        w2.assign_sub(0.01 * grads[1])
        global_step.assign_add(1)
        return {"loss": loss}

    return step, global_step


def hooks_of(variant: str, uri: str) -> list[Any]:
    if variant == "session":
        return []
    every = {"idle": 10**9, "every_10": 10, "every_1": 1, "every_10_held": 10}[variant]
    hook = MlflowHook(
        "loss",
        every_n_steps=every,
        tracking_uri=uri,
        run_name=variant,
        exactly_once=variant == "every_10_held",
    )
    return [hook]


class Runner:
    """One variant under one setting: an open session, run `steps` steps per sample."""

    def __init__(self, variant: str, setting: str, uri: str) -> None:
        self.fused = setting == "auto"
        self.step, self.global_step = make_step()
        hooks = hooks_of(variant, uri)
        self.hook = hooks[0] if hooks else None
        self.session = monsession.MonitoredSession(
            hooks=hooks, steps_per_execution=SETTINGS[setting]
        )
        if variant == "idle":
            # Its first run logs (a first trigger): past it before measuring.
            self.session.run(self.step)
        self.sample(WARMUP_STEPS)

    def sample(self, steps: int) -> float:
        """Seconds per step over at least `steps` steps, ending once the device is done.

        Single steps: one run each. ``"auto"``: a run may execute many steps
        (up to the next logging point), so runs go on until the global step
        has advanced by `steps`, read after each run.
        """
        first = int(self.global_step.numpy())
        start = time.perf_counter()
        if self.fused:
            while int(self.global_step.numpy()) < first + steps:
                self.session.run(self.step)
        else:
            for _ in range(steps):
                self.session.run(self.step)
        done = int(self.global_step.numpy())
        return (time.perf_counter() - start) / (done - first)

    def close(self) -> None:
        self.session.close()


def dependency_megabytes() -> dict[str, Any]:
    """Installed size of the distributions the family brings beyond core and TensorFlow."""

    def closure(names: list[str]) -> set[str]:
        seen: set[str] = set()
        todo = list(names)
        while todo:
            name = re.split(r"[\s;<>=!~\[(]", todo.pop(), maxsplit=1)[0].lower()
            name = name.replace("_", "-")
            if not name or name in seen:
                continue
            try:
                dist = importlib.metadata.distribution(name)
            except importlib.metadata.PackageNotFoundError:
                continue
            seen.add(name)
            todo += [r for r in dist.requires or [] if "extra ==" not in r]
        return seen

    base = closure(["monsession-core", "tensorflow-cpu", "tensorflow"])
    added = sorted(closure(["monsession-hooks-mlflow"]) - base - {"monsession-hooks-mlflow"})
    total = 0
    for name in added:
        for file in importlib.metadata.distribution(name).files or []:
            path = file.locate()
            if os.path.isfile(path):
                total += os.path.getsize(path)
    return {"distributions": added, "megabytes": round(total / 1e6, 1)}


def run(steps: int = 300, rounds: int = 21) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as directory:
        uri = "sqlite:///" + os.path.join(directory, "mlflow.db")
        runners = {
            (variant, setting): Runner(variant, setting, uri)
            for setting in SETTINGS
            for variant in VARIANTS
        }
        samples: dict[tuple[str, str], list[float]] = {key: [] for key in runners}
        keys = list(runners)
        for index in range(rounds):
            for key in keys[index % len(keys) :] + keys[: index % len(keys)]:
                samples[key].append(runners[key].sample(steps))
        for runner in runners.values():
            runner.close()
    median_us = {
        f"{variant}/{setting}": round(statistics.median(samples[(variant, setting)]) * 1e6, 2)
        for variant, setting in runners
    }
    ratios = {
        f"{variant}/{setting} / session/{setting}": round(
            median_us[f"{variant}/{setting}"] / median_us[f"session/{setting}"], 3
        )
        for variant, setting in runners
        if variant != "session"
    }
    idle_us = {
        setting: round(median_us[f"idle/{setting}"] - median_us[f"session/{setting}"], 2)
        for setting in SETTINGS
    }
    targets = {
        f"{variant}/{setting} / session/{setting}": {
            "target": limit,
            "measured": ratios[f"{variant}/{setting} / session/{setting}"],
            "met": ratios[f"{variant}/{setting} / session/{setting}"] <= limit,
        }
        for (variant, setting), limit in TARGETS.items()
    }
    targets["idle/single: added per step (µs)"] = {
        "target": IDLE_TARGET_US,
        "measured": idle_us["single"],
        "met": idle_us["single"] <= IDLE_TARGET_US,
    }
    return {
        "steps": steps,
        "rounds": rounds,
        "median_step_us": median_us,
        "min_step_us": {f"{v}/{s}": round(min(samples[(v, s)]) * 1e6, 2) for v, s in samples},
        "ratios": ratios,
        "idle_added_us": idle_us,
        "targets": targets,
        "dependencies": dependency_megabytes(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=21)
    args = parser.parse_args()
    tf.get_logger().setLevel("ERROR")
    results = run(args.steps, args.rounds)
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=1) + "\n")
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
