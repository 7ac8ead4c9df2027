"""Per-step overhead of `NanTensorHook` on a small eager loop, in one run.

Variants, each calling its own copy of the same `tf.function` step:

* ``raw``: a plain Python loop;
* ``raw_read_every_step``: the same loop reading the loss to the host after
  every call (``step()["loss"].numpy()``): the floor of any hook fetching it;
* ``raw_flag_every_step``: the same loop checking every step by hand (a
  finite-flag ANDed on the device in the step, read after each call): the
  floor of any every-step check;
* ``raw_flag_every_100``: the same hand-written flag, read every 100 steps
  (what the issue calls checking by hand "for a few µs");
* ``session``: `monsession.MonitoredSession` with no hooks (the session's own cost);
* ``session_flag_every_step`` and ``session_flag_every_100``: that session
  running the step with the hand-written flag, read by the loop after every
  step or every 100 steps: what the flag and its reads cost under the
  session, the floor of a hook doing the same;
* ``session_flag_outputs_every_100``: the same flag read every 100 steps
  (from its variable), the step returning its outputs as ``sess.run(step)``
  does (the flag alone, above, spares unpacking them): the floor of a check
  that leaves the step's outputs to the caller, as ``watch`` does;
* ``hook_fetch_every_step``: that session with the least a hook fetching the
  loss every step does (``before_run`` returns ``SessionRunArgs("loss")``,
  ``after_run`` keeps the value; no ``next_action``);
* ``hook_fetch_planned_every_step``: the same hook with a ``next_action``
  answering "every step", as every hook of monsession's families has: what
  the session's planning for such a hook adds;
* ``nan_every_step``: with ``NanTensorHook("loss")``, which fetches the loss
  after every step, as TensorFlow's hook does;
* ``nan_every_step_watch``: the same hook with the step wrapped by
  ``hook.watch``: the step checks its loss on the device and the hook reads
  one flag after every step;
* ``nan_every_100``: with ``NanTensorHook("loss", check_every_n_steps=100)`` and
  the step wrapped by ``hook.watch``: the flag is read every 100 steps.

The targets (issue 38) are ratios to ``session``: every step <= 1.10 (sync)
and <= 1.5 (async); every 100 steps <= 1.03 in both. ``added_us_per_step``
holds the µs per step that fetching the loss adds: the minimal hook (planning
or not) and ``NanTensorHook("loss")`` over ``session``, the host read over
``raw``.

Two executor settings: ``sync`` (TensorFlow's default on CPU: each op finishes
before the call returns) and ``async`` (`set_synchronous_execution(False)`:
calls return at once and a host read waits for the device, as with a GPU
stream). Variants are interleaved, in rotating order, over several rounds;
each sample ends by waiting for the device. Medians of the per-step time are
compared as ratios to ``raw`` (minimums are recorded too, as a check on
noise from other processes).

    python benchmarks/bench_debug.py [--steps 100] [--rounds 41]

Writes benchmarks/results/debug.json.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import pathlib
import statistics
import time
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf

import monsession
from monsession_hooks_debug import NanTensorHook

RESULTS = pathlib.Path(__file__).parent / "results" / "debug.json"
VARIANTS = (
    "raw",
    "raw_read_every_step",
    "raw_flag_every_step",
    "raw_flag_every_100",
    "session",
    "session_flag_every_step",
    "session_flag_every_100",
    "session_flag_outputs_every_100",
    "hook_fetch_every_step",
    "hook_fetch_planned_every_step",
    "nan_every_step",
    "nan_every_step_watch",
    "nan_every_100",
)
# Ratio to the session without the hook: (variant, executor) -> the most it may be.
TARGETS = {
    ("nan_every_step", "sync"): 1.10,
    ("nan_every_step", "async"): 1.5,
    ("nan_every_step_watch", "sync"): 1.10,
    ("nan_every_step_watch", "async"): 1.5,
    ("nan_every_100", "sync"): 1.03,
    ("nan_every_100", "async"): 1.03,
}
EXECUTORS = ("sync", "async")
WARMUP_STEPS = 50


def make_step() -> tuple[Any, Any]:
    """A small regression step returning {"loss": ...}, and a variable to sync on."""
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


def hand_written_flag_check(step: Any, every: int, run: Any = None, outputs: bool = False) -> Any:
    """Checking by hand: a loop that ANDs `loss == loss` into a device flag
    inside the step and reads the flag after every `every` calls (each call
    with 1: the floor of any every-step check). `run` calls the step (by
    default the loop calls it itself). The step returns the flag, or with
    `outputs` the step's outputs (the flag is then read from its variable)."""
    finite = tf.Variable(True, trainable=False)
    calls = itertools.count(1)

    @tf.function(autograph=False)
    def checked() -> Any:
        results = step()
        loss = results["loss"]
        after = tf.logical_and(finite.read_value(), tf.equal(loss, loss))
        finite.assign(after, read_value=False)
        return results if outputs else after

    def call() -> None:
        returned = checked() if run is None else run(checked)
        if next(calls) % every == 0 and not (finite if outputs else returned).numpy():
            raise FloatingPointError("NaN loss")

    return call


class FetchLoss(monsession.SessionRunHook):
    """The least a hook fetching the loss every step does: asks for it and keeps it."""

    def __init__(self) -> None:
        self.loss: Any = None

    def before_run(self, run_context: Any) -> Any:
        return monsession.SessionRunArgs("loss")

    def after_run(self, run_context: Any, run_values: Any) -> None:
        self.loss = run_values.results


class FetchLossPlanned(FetchLoss):
    """`FetchLoss`, planning ahead: it acts on every step."""

    def next_action(self, global_step: int) -> Any:
        return EVERY_STEP


EVERY_STEP = monsession.NextAction(steps=1)


def with_hook(variant: str, step: Any) -> tuple[list[Any], Any]:
    """The hooks of a session variant and the step it runs (watched, or not)."""
    if variant == "hook_fetch_every_step":
        return [FetchLoss()], step
    if variant == "hook_fetch_planned_every_step":
        return [FetchLossPlanned()], step
    if variant == "nan_every_step":
        return [NanTensorHook("loss")], step
    every = {"nan_every_step_watch": 1, "nan_every_100": 100}.get(variant)
    if every is None:
        return [], step
    hook = NanTensorHook("loss", check_every_n_steps=every)
    return [hook], hook.watch(step)


class Runner:
    """One variant: a step callable, run `steps` times per sample."""

    def __init__(self, variant: str, step: Any, global_step: Any) -> None:
        self.global_step = global_step
        self.session: Any = None
        if variant == "raw":
            self.call = step
            return
        if variant == "raw_read_every_step":
            self.call = lambda: step()["loss"].numpy()
            return
        every = 1 if variant.endswith("_flag_every_step") else 100
        if variant.startswith("raw_flag_"):
            self.call = hand_written_flag_check(step, every)
            return
        hooks, run_step = with_hook(variant, step)
        self.session = monsession.MonitoredSession(hooks=hooks)
        session = self.session
        if variant.startswith("session_flag_"):
            outputs = "_outputs_" in variant
            self.call = hand_written_flag_check(step, every, session.run, outputs)
            return

        def call() -> Any:
            return session.run(run_step)

        self.call = call

    def sample(self, steps: int) -> float:
        call = self.call
        start = time.perf_counter()
        for _ in range(steps):
            call()
        self.global_step.numpy()  # Wait for the device before stopping the clock.
        return (time.perf_counter() - start) / steps

    def close(self) -> None:
        if self.session is not None:
            self.session.close()


def measure(executor: str, steps: int, rounds: int) -> dict[str, list[float]]:
    tf.config.experimental.set_synchronous_execution(executor == "sync")
    # Each variant its own copy of the step and global step: a session that
    # shares its global step with others sees it jump and reads it every run.
    runners = {variant: Runner(variant, *make_step()) for variant in VARIANTS}
    try:
        for runner in runners.values():
            runner.sample(WARMUP_STEPS)
        samples: dict[str, list[float]] = {variant: [] for variant in VARIANTS}
        for round_index in range(rounds):
            shift = round_index % len(VARIANTS)
            for variant in VARIANTS[shift:] + VARIANTS[:shift]:
                samples[variant].append(runners[variant].sample(steps))
        return samples
    finally:
        for runner in runners.values():
            runner.close()
        tf.config.experimental.set_synchronous_execution(True)


def run(steps: int, rounds: int) -> dict[str, Any]:
    """Measures every variant with both executors; returns the results."""
    result: dict[str, Any] = {
        "steps_per_sample": steps,
        "rounds": rounds,
        "tensorflow": tf.__version__,
        "cpus": os.cpu_count(),
        "executors": {},
    }
    for executor in EXECUTORS:
        samples = measure(executor, steps, rounds)
        medians = {variant: statistics.median(values) for variant, values in samples.items()}
        raw = medians["raw"]
        result["executors"][executor] = {
            "median_step_us": {k: round(v * 1e6, 2) for k, v in medians.items()},
            "min_step_us": {k: round(min(v) * 1e6, 2) for k, v in samples.items()},
            "ratio_to_raw": {k: round(v / raw, 3) for k, v in medians.items()},
            "added_us_per_step": {
                variant: round((medians[variant] - medians[base]) * 1e6, 2)
                for variant, base in (
                    ("hook_fetch_every_step", "session"),
                    ("hook_fetch_planned_every_step", "session"),
                    ("nan_every_step", "session"),
                    ("raw_read_every_step", "raw"),
                )
            },
            "nan_hook_overhead_over_session": {
                "every_step": round(medians["nan_every_step"] / medians["session"], 3),
                "every_step_watch": round(medians["nan_every_step_watch"] / medians["session"], 3),
                "every_100": round(medians["nan_every_100"] / medians["session"], 3),
                **{
                    f"hand_written_{variant}": round(medians[variant] / medians["session"], 3)
                    for variant in (
                        "session_flag_every_step",
                        "session_flag_every_100",
                        "session_flag_outputs_every_100",
                    )
                },
            },
        }
    result["targets"] = [
        {
            "variant": variant,
            "executor": executor,
            "ratio_to_session": (
                ratio := round(
                    result["executors"][executor]["median_step_us"][variant]
                    / result["executors"][executor]["median_step_us"]["session"],
                    3,
                )
            ),
            "target": target,
            "met": ratio <= target,
        }
        for (variant, executor), target in TARGETS.items()
    ]
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100, help="steps per sample")
    parser.add_argument("--rounds", type=int, default=41, help="interleaved rounds")
    args = parser.parse_args()
    result = run(args.steps, args.rounds)
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
