"""Fused steps: `steps_per_execution="auto"` against hand-written fused loops, in one run.

Per-step time of the small model of `bench_core`, variants interleaved:

* `raw`: a Python loop calling the `tf.function` step;
* `fused100`: a hand-written `tf.function` running the step 100 times per call
  (the ideal: no hooks, no summaries, no checkpoints);
* `monsession/single` and `monsession/auto`: `MonitoredTrainingSession` with
  the standard set (summaries and step counter every 100 steps, checkpoints
  every 1000, `LoggingTensorHook` every 100, `StopAtStepHook`) and
  `steps_per_execution` 1 or `"auto"`;
* `orbit`: TensorFlow Model Garden's Orbit (`StandardTrainer` with
  `steps_per_loop=100`, checkpoints every 1000 steps, summaries every 100),
  when `import orbit` works (package `tf-models-official`, installed
  without its dependencies, plus `tf-keras`), else reported as unavailable.

    python benchmarks/bench_fused.py [--steps 1000] [--rounds 11]

Writes benchmarks/results/fused.json.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import pathlib
import tempfile
import time
from collections.abc import Callable
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import bench_core
import tensorflow as tf

import monsession
from monsession import hooks as ms_hooks

RESULTS = pathlib.Path(__file__).parent / "results" / "fused.json"
EVERY = 100
BLOCK = 100  # Steps per call of the hand-written fused loop and of Orbit.


def standard_session(model: bench_core.EagerModel, directory: str, steps: int, spe: Any) -> Any:
    """The issue's standard set, stopping after `steps` steps."""
    return monsession.MonitoredTrainingSession(
        checkpoint_dir=directory,
        scaffold=monsession.Scaffold(saver=model.checkpoint),
        hooks=[
            monsession.StopAtStepHook(num_steps=steps),
            ms_hooks.LoggingTensorHook({"loss": "loss"}, every_n_iter=EVERY),
        ],
        save_summaries_steps=EVERY,
        save_checkpoint_steps=1000,
        save_checkpoint_secs=None,
        log_step_count_steps=EVERY,
        steps_per_execution=spe,
    )


def session_sampler(
    model: bench_core.EagerModel, directory: str, steps: int, spe: Any
) -> Callable[[], float]:
    def sample() -> float:
        with standard_session(model, directory, steps, spe) as session:
            start = time.perf_counter()
            while not session.should_stop():
                session.run(model.step)
            model.wait()
            return (time.perf_counter() - start) / steps

    return sample


def fused_sampler(model: bench_core.EagerModel, steps: int) -> Callable[[], float]:
    step = model.step

    @tf.function
    def hundred_steps() -> None:
        for _ in tf.range(BLOCK):
            step()

    hundred_steps()

    def sample() -> float:
        start = time.perf_counter()
        for _ in range(steps // BLOCK):
            hundred_steps()
        model.wait()
        return (time.perf_counter() - start) / steps

    return sample


def orbit_sampler(
    model: bench_core.EagerModel, directory: str, steps: int
) -> Callable[[], float] | None:
    """Orbit with checkpoints and summaries, or `None` when Orbit does not import."""
    try:
        import orbit
    except ImportError:
        return None
    step = model.step

    class Trainer(orbit.StandardTrainer):  # type: ignore[misc]
        def __init__(self) -> None:
            dataset = tf.data.Dataset.range(1).repeat()
            options = orbit.StandardTrainerOptions(use_tf_while_loop=True)
            super().__init__(train_dataset=dataset, options=options)
            self.loss = tf.keras.metrics.Mean("loss")

        def train_loop_begin(self) -> None:
            self.loss.reset_state()

        def train_step(self, iterator: Any) -> None:
            next(iterator)
            self.loss.update_state(step()["loss"])

        def train_loop_end(self) -> dict[str, Any]:
            return {"loss": self.loss.result()}

    manager = tf.train.CheckpointManager(model.checkpoint, directory, max_to_keep=5)
    controller = orbit.Controller(
        trainer=Trainer(),
        global_step=model.global_step,
        steps_per_loop=BLOCK,
        checkpoint_manager=manager,
        summary_dir=directory,
        summary_interval=EVERY,
    )

    def sample() -> float:
        start_step = int(model.global_step.numpy())
        start = time.perf_counter()
        controller.train(steps=start_step + steps)
        model.wait()
        return (time.perf_counter() - start) / steps

    return sample


def run(steps: int, rounds: int) -> dict[str, Any]:
    """Measures every variant; returns the results (also written by `main`)."""
    logging.getLogger("tensorflow").setLevel(logging.WARNING)
    logging.getLogger("absl").setLevel(logging.WARNING)
    # The step is traced first inside a recording session, as training code
    # should: its tf.summary call then records on the summary hook's steps.
    with tempfile.TemporaryDirectory() as root, bench_core.eager_model() as model:
        samplers: dict[str, Callable[[], float]] = {
            "raw": bench_core.eager_sampler(model, None, root, steps),
            "fused100": fused_sampler(model, steps),
            "monsession/single": session_sampler(model, os.path.join(root, "single"), steps, 1),
            "monsession/auto": session_sampler(model, os.path.join(root, "auto"), steps, "auto"),
        }
        orbit = orbit_sampler(model, os.path.join(root, "orbit"), steps)
        if orbit is not None:
            samplers["orbit"] = orbit
        for sample in samplers.values():  # Warm up: traces, first checkpoints.
            sample()
        samples = bench_core.interleave(samplers, rounds)
    ratios = {
        f"{name} / {base}": bench_core.paired_ratio(samples, name, base)
        for name in samplers
        for base in ("raw", "fused100")
        if name != base
    }
    return {
        "steps": steps,
        "rounds": rounds,
        "orbit": "measured" if orbit is not None else "not installed (import orbit failed)",
        "median_us_per_step": bench_core.medians_us(samples),
        "ratios": ratios,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=11)
    args = parser.parse_args()
    result = run(args.steps, args.rounds)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
