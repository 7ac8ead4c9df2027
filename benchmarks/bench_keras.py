"""Per-step overhead of the two Keras bridges, each as a ratio to the loop without it.

Same small Keras model (32 -> 32 -> 1, batches of 64, SGD) throughout.

* The monsession loop (`KerasCallbacksHook`): a `tf.function` step run by a
  `monsession.MonitoredSession`, ``loop`` without hooks, ``loop_callbacks``
  with `KerasCallbacksHook([EarlyStopping(), ReduceLROnPlateau()], logs=())`
  (epoch callbacks, epoch logs given by the loop: nothing is fetched per
  step), and ``loop_callbacks_logs`` with
  `KerasCallbacksHook([TerminateOnNaN()])` (batch logs: the loss is fetched
  and read to the host after every step, as `fit` does for it).
* `model.fit` (`HooksCallback`): ``fit`` without callbacks, ``fit_hooks_idle``
  with a `HooksCallback` holding one hook that acts on no step (the
  bridge's own cost), and ``fit_hooks_standard`` with `StopAtStepHook`,
  `StepCounterHook(every_n_steps=100)` and
  `LoggingTensorHook(["loss"], every_n_iter=100)`.

A sample runs `steps` steps (one `fit(epochs=1, steps_per_epoch=steps)`
call for the fit variants, on a repeated `tf.data` dataset, so `fit`'s own
per-call setup is in every fit variant alike). Variants are interleaved in
rotating order over several rounds; each sample ends by waiting for the
device. Ratios are the median over rounds of a variant's time divided by
its baseline's time in the same round.

    python benchmarks/bench_keras.py [--steps 200] [--rounds 15]

Writes benchmarks/results/keras.json.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import pathlib
import statistics
import time
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras
import numpy as np
import tensorflow as tf

import monsession
from monsession.hooks import LoggingTensorHook, StepCounterHook, StopAtStepHook
from monsession_hooks_keras import HooksCallback, KerasCallbacksHook

RESULTS = pathlib.Path(__file__).parent / "results" / "keras.json"
LOOP_VARIANTS = ("loop", "loop_callbacks", "loop_callbacks_logs")
FIT_VARIANTS = ("fit", "fit_hooks_idle", "fit_hooks_standard")
VARIANTS = LOOP_VARIANTS + FIT_VARIANTS
BASELINE = {
    "loop_callbacks": "loop",
    "loop_callbacks_logs": "loop",
    "fit_hooks_idle": "fit",
    "fit_hooks_standard": "fit",
}
WARMUP_STEPS = 30


class IdleHook(monsession.SessionRunHook):
    """A hook called around every step that asks for nothing."""

    def before_run(self, run_context: Any) -> Any:
        return None

    def after_run(self, run_context: Any, run_values: Any) -> None:
        pass


def make_model() -> Any:
    keras.utils.set_random_seed(1)
    model = keras.Sequential(
        [keras.Input((32,)), keras.layers.Dense(32, activation="relu"), keras.layers.Dense(1)]
    )
    model.compile(optimizer=keras.optimizers.SGD(0.001), loss="mse")
    return model


def data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(2)
    x = rng.normal(size=(64, 32)).astype(np.float32)
    y = rng.normal(size=(64, 1)).astype(np.float32)
    return x, y


class LoopRunner:
    """A monsession loop over the same `tf.function` step, with one variant's hooks."""

    def __init__(self, variant: str) -> None:
        tf.compat.v1.reset_default_graph()
        self.model = model = make_model()
        global_step = monsession.get_or_create_global_step()
        x, y = (tf.constant(a) for a in data())

        @tf.function
        def step() -> Any:
            with tf.GradientTape() as tape:
                loss = model.compute_loss(x=x, y=y, y_pred=model(x, training=True))
            grads = tape.gradient(loss, model.trainable_variables)
            model.optimizer.apply(grads, model.trainable_variables)
            global_step.assign_add(1)
            return {"loss": loss}

        hooks: list[Any] = []
        if variant == "loop_callbacks":
            callbacks = [keras.callbacks.EarlyStopping(), keras.callbacks.ReduceLROnPlateau()]
            hooks = [KerasCallbacksHook(callbacks, model, logs=())]
        elif variant == "loop_callbacks_logs":
            hooks = [KerasCallbacksHook([keras.callbacks.TerminateOnNaN()], model)]
        self.global_step = global_step
        self.step = step
        self.session = monsession.MonitoredSession(hooks=hooks)

    def sample(self, steps: int) -> float:
        run, step = self.session.run, self.step
        start = time.perf_counter()
        for _ in range(steps):
            run(step)
        self.global_step.numpy()  # Wait for the device before stopping the clock.
        return (time.perf_counter() - start) / steps

    def close(self) -> None:
        self.session.close()


class FitRunner:
    """`model.fit` for `steps` steps per sample, with one variant's callback."""

    def __init__(self, variant: str) -> None:
        tf.compat.v1.reset_default_graph()
        self.model = make_model()
        self.dataset = tf.data.Dataset.from_tensors(data()).repeat()
        self.variant = variant

    def callbacks(self) -> list[Any]:
        if self.variant == "fit_hooks_idle":
            return [HooksCallback([IdleHook()])]
        if self.variant == "fit_hooks_standard":
            return [
                HooksCallback(
                    [
                        StopAtStepHook(last_step=10**9),
                        StepCounterHook(every_n_steps=100),
                        LoggingTensorHook(["loss"], every_n_iter=100),
                    ]
                )
            ]
        return []

    def sample(self, steps: int) -> float:
        callbacks = self.callbacks()
        start = time.perf_counter()
        self.model.fit(
            self.dataset,
            epochs=1,
            steps_per_epoch=steps,
            verbose=0,
            shuffle=False,
            callbacks=callbacks,
        )
        self.model.optimizer.iterations.numpy()
        return (time.perf_counter() - start) / steps

    def close(self) -> None:
        pass


def run(steps: int, rounds: int) -> dict[str, Any]:
    """Measures every variant, interleaved; returns the results."""
    logging.getLogger("tensorflow").setLevel(logging.ERROR)  # The hooks' log lines.
    runners: dict[str, Any] = {
        **{variant: LoopRunner(variant) for variant in LOOP_VARIANTS},
        **{variant: FitRunner(variant) for variant in FIT_VARIANTS},
    }
    try:
        for runner in runners.values():
            runner.sample(WARMUP_STEPS)
        samples: dict[str, list[float]] = {variant: [] for variant in VARIANTS}
        for round_index in range(rounds):
            shift = round_index % len(VARIANTS)
            for variant in VARIANTS[shift:] + VARIANTS[:shift]:
                samples[variant].append(runners[variant].sample(steps))
    finally:
        for runner in runners.values():
            runner.close()
    medians = {variant: statistics.median(values) for variant, values in samples.items()}
    ratios = {
        f"{variant} / {base}": round(
            statistics.median(a / b for a, b in zip(samples[variant], samples[base], strict=True)),
            3,
        )
        for variant, base in BASELINE.items()
    }
    return {
        "steps_per_sample": steps,
        "rounds": rounds,
        "tensorflow": tf.__version__,
        "keras": keras.__version__,
        "cpus": os.cpu_count(),
        "median_step_us": {k: round(v * 1e6, 1) for k, v in medians.items()},
        "ratios": ratios,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200, help="steps per sample")
    parser.add_argument("--rounds", type=int, default=15, help="interleaved rounds")
    args = parser.parse_args()
    result = run(args.steps, args.rounds)
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
