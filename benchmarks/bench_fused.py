"""Fused steps: `steps_per_execution="auto"` against hand-written fused loops, in one run.

The small model of `bench_core`, its batches from a `tf.data` dataset (one
epoch of `EPOCH` batches). Per-step time, variants interleaved:

* `raw`: a Python loop calling the `tf.function` step, which takes its batch
  from an iterator itself (`next(iterator)` inside the step);
* `fused100`: a hand-written `tf.function` running that step 100 times per
  call (no hooks, no summaries, no checkpoints);
* `fused100+duties`, the reference: the same 100-step `tf.function`, also
  doing by hand the duties of the standard set: the loss as a `tf.summary`
  scalar every 100 steps (written in the function), `global_step/sec`
  written and the loss logged (one host read) every 100 steps, a
  `tf.train.CheckpointManager` save every 1000 steps;
* `hand-epochs/32` and `hand-epochs/1000`, the references of the `Epochs`
  loop: a hand-written epoch loop over a dataset of 32 or 1000 batches per
  epoch (a new iterator each epoch, its batches run by one `tf.function`
  per call, up to the next 100-step duty or the epoch's end), doing the
  same duties by hand, its checkpoints also holding the epoch counter and
  the position in the data (the iterator's state), as the `Epochs` loop's
  do; `hand-epochs-one-iterator/32`, the same over one iterator of the
  repeated dataset, as the `Epochs` loop takes its batches (no new iterator
  per epoch, still one call or more per epoch);
* `monsession/single` and `monsession/auto`: `MonitoredTrainingSession` with
  the standard set (summaries and step counter every 100 steps, checkpoints
  every 1000, `LoggingTensorHook` every 100, `StopAtStepHook`),
  `steps_per_execution` 1 or `"auto"`, looping `sess.run(step)` (the batch
  taken inside the step);
* `monsession/epochs-single/1000`, `monsession/epochs-auto/1000` and
  `monsession/epochs-auto/32`: the loop the docs teach on the same session,
  `for epoch in monsession.Epochs(dataset).run(sess, train)` over 1000 or
  32 batches per epoch, the batch passed as the step's argument (the data
  position saved with each checkpoint);
* `orbit`: TensorFlow Model Garden's Orbit (`StandardTrainer` with
  `steps_per_loop=100`, checkpoints every 1000 steps, summaries every 100),
  when `import orbit` works (package `tf-models-official`, installed
  without its dependencies, plus `tf-keras`), else reported as unavailable.

Ratios are medians over rounds of two samples taken in the same round, of
the wall time (`ratios`) and of the process's CPU time over the same span
(`cpu_ratios`, all threads: less moved by other processes on a shared
machine).

    python benchmarks/bench_fused.py [--steps 1000] [--rounds 11]

Writes benchmarks/results/fused.json.
"""

from __future__ import annotations

import argparse
import contextlib
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
EVERY = 100  # Summaries, step rate and logged loss.
CHECKPOINT_EVERY = 1000
BLOCK = 100  # Steps per call of the hand-written fused loops and of Orbit.
EPOCH = 1000  # Batches per epoch.
SHORT_EPOCH = 32  # Batches per epoch of the short epochs (a small dataset).
REFERENCE = "fused100+duties"

# Ratio -> its target (issues 29 and 38).
TARGETS = {
    f"monsession/auto / {REFERENCE}": 1.15,
    "monsession/epochs-auto/1000 / hand-epochs/1000": 1.15,
    "monsession/epochs-auto/32 / hand-epochs/32": 1.15,
    "monsession/single / raw": 1.05,
}


# Process CPU seconds per step of the last sample, kept by `Clock.per_step`.
_last_cpu = [0.0]


class Clock:
    """Times one sample from its creation: wall time, and the process's CPU time."""

    def __init__(self) -> None:
        self._wall, self._cpu = time.perf_counter(), time.process_time()

    def per_step(self, steps: int) -> float:
        """Wall seconds per step (CPU seconds per step kept for `with_cpu`)."""
        _last_cpu[0] = (time.process_time() - self._cpu) / steps
        return (time.perf_counter() - self._wall) / steps


def with_cpu(
    samplers: dict[str, Callable[[], float]], cpu: dict[str, list[float]]
) -> dict[str, Callable[[], float]]:
    """The samplers, each also appending its sample's CPU time per step to `cpu[name]`."""

    def recording(name: str, sample: Callable[[], float]) -> Callable[[], float]:
        def timed() -> float:
            wall = sample()
            cpu[name].append(_last_cpu[0])
            return wall

        return timed

    return {name: recording(name, sample) for name, sample in samplers.items()}


def raw_sampler(model: DataModel, steps: int) -> Callable[[], float]:
    """A Python loop calling the step."""
    step = model.step

    def sample() -> float:
        clock = Clock()
        for _ in range(steps):
            step()
        model.wait()
        return clock.per_step(steps)

    return sample


class DataModel:
    """`bench_core`'s model, its batches from a dataset.

    `train(batch)` is the step taking its batch as its argument (the `Epochs`
    loop); `step()` takes the next batch from an iterator over the repeated
    dataset and calls `train` (the other variants). Both return
    ``{"loss": loss}`` and write ``tf.summary.scalar("loss", ...)``.
    """

    def __init__(self) -> None:
        tf.compat.v1.reset_default_graph()
        self.global_step = monsession.get_or_create_global_step()
        x = tf.random.normal([32, 16], seed=1)
        w = tf.Variable(tf.random.normal([16, 1], seed=2))
        global_step = self.global_step
        self.w = w
        self.dataset = tf.data.Dataset.from_tensors(x).repeat(EPOCH)
        self.short_dataset = tf.data.Dataset.from_tensors(x).repeat(SHORT_EPOCH)
        self.iterator = iterator = iter(self.dataset.repeat())

        @tf.function
        def train(batch: Any) -> dict[str, Any]:
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(tf.matmul(batch, w) - 1.0))
            w.assign_sub(0.01 * tape.gradient(loss, w))
            global_step.assign_add(1)
            tf.summary.scalar("loss", loss)
            return {"loss": loss}

        @tf.function
        def step() -> dict[str, Any]:
            return train(next(iterator))  # type: ignore[no-any-return]

        self.train, self.step = train, step
        self.checkpoint = tf.train.Checkpoint(step=global_step, w=w)

    def wait(self) -> None:
        """Waits for the device (a no-op with the synchronous CPU executor)."""
        self.global_step.numpy()


def standard_session(checkpoint: Any, directory: str, steps: int, spe: Any) -> Any:
    """The issue's standard set, stopping after `steps` steps."""
    return monsession.MonitoredTrainingSession(
        checkpoint_dir=directory,
        scaffold=monsession.Scaffold(saver=checkpoint),
        hooks=[
            monsession.StopAtStepHook(num_steps=steps),
            ms_hooks.LoggingTensorHook({"loss": "loss"}, every_n_iter=EVERY),
        ],
        save_summaries_steps=EVERY,
        save_checkpoint_steps=CHECKPOINT_EVERY,
        save_checkpoint_secs=None,
        log_step_count_steps=EVERY,
        steps_per_execution=spe,
    )


def session_sampler(model: DataModel, directory: str, steps: int, spe: Any) -> Callable[[], float]:
    """`while not sess.should_stop(): sess.run(step)`, the batch taken inside the step."""

    def sample() -> float:
        with standard_session(model.checkpoint, directory, steps, spe) as session:
            clock = Clock()
            while not session.should_stop():
                session.run(model.step)
            model.wait()
            return clock.per_step(steps)

    return sample


def epochs_sampler(
    model: DataModel, data: monsession.Epochs, directory: str, steps: int, spe: Any
) -> Callable[[], float]:
    """The docs' loop: `for epoch in data.run(sess, train)`, the batch as the argument."""
    checkpoint = tf.train.Checkpoint(step=model.global_step, w=model.w, data=data)

    def sample() -> float:
        with standard_session(checkpoint, directory, steps, spe) as session:
            clock = Clock()
            for _ in data.run(session, model.train):
                pass
            model.wait()
            return clock.per_step(steps)

    return sample


def fused_sampler(model: DataModel, steps: int) -> Callable[[], float]:
    step = model.step

    @tf.function
    def hundred_steps() -> None:
        for _ in tf.range(BLOCK):
            step()

    hundred_steps()

    def sample() -> float:
        clock = Clock()
        for _ in range(steps // BLOCK):
            hundred_steps()
        model.wait()
        return clock.per_step(steps)

    return sample


def duties_sampler(model: DataModel, directory: str, steps: int) -> Callable[[], float]:
    """The reference: 100 steps per `tf.function` call, the standard set's duties by hand."""
    step, global_step = model.step, model.global_step
    writer = tf.summary.create_file_writer(directory)
    checkpoint = model.checkpoint
    manager = tf.train.CheckpointManager(checkpoint, directory, max_to_keep=5)
    logger = tf.get_logger()

    @tf.function
    def hundred_steps() -> Any:
        loss = tf.constant(0.0)
        for _ in tf.range(BLOCK):
            loss = step()["loss"]
        with writer.as_default(step=global_step):
            tf.summary.scalar("loss", loss)
        return loss

    def sample() -> float:
        done = int(global_step.numpy())  # A hand-written loop counts its steps on the host.
        clock = Clock()
        last = time.perf_counter()
        for call in range(1, steps // BLOCK + 1):
            loss = hundred_steps()
            done += BLOCK
            now = time.perf_counter()
            with writer.as_default(step=done):
                tf.summary.scalar("global_step/sec", BLOCK / (now - last))
            last = now
            logger.info("loss = %s, step = %d", loss.numpy(), done)
            if call * BLOCK % CHECKPOINT_EVERY == 0:
                manager.save(checkpoint_number=done)
        model.wait()
        return clock.per_step(steps)

    sample()  # Traces, creates the writer's file.
    return sample


def hand_epochs_sampler(
    model: DataModel,
    dataset: tf.data.Dataset,
    directory: str,
    steps: int,
    one_iterator: bool = False,
) -> Callable[[], float]:
    """The reference of the `Epochs` loop: a hand-written, fused epoch loop with the duties.

    Each epoch takes a new iterator over `dataset` (with `one_iterator`, the
    next epoch of one iterator over it repeated), which its checkpoints hold
    (the data position) with an epoch counter. One `tf.function` call runs
    the batches up to the next 100-step duty or the epoch's end; the duties
    are those of `duties_sampler`, done on the host.
    """
    train, global_step = model.train, model.global_step
    length = int(dataset.cardinality())
    writer = tf.summary.create_file_writer(directory)
    epoch = tf.Variable(0, dtype=tf.int64, trainable=False)
    checkpoint = tf.train.Checkpoint(step=global_step, w=model.w, epoch=epoch)
    manager = tf.train.CheckpointManager(checkpoint, directory, max_to_keep=5)
    logger = tf.get_logger()
    # The epoch's iterator, its batches left.
    position: dict[str, Any] = {"iterator": iter(dataset.repeat()) if one_iterator else None}
    position["left"] = 0
    if one_iterator:
        checkpoint.data = position["iterator"]

    @tf.function
    def run_batches(iterator: Any, count: Any) -> Any:
        loss = tf.constant(0.0)
        for _ in tf.range(count):
            loss = train(next(iterator))["loss"]
        return loss

    def sample() -> float:
        done = int(global_step.numpy())  # A hand-written loop counts its steps on the host.
        end = done + steps
        clock = Clock()
        last = time.perf_counter()
        while done < end:
            if not position["left"]:
                if not one_iterator:
                    position["iterator"] = checkpoint.data = iter(dataset)
                position["left"] = length
            count = min(position["left"], EVERY - done % EVERY, end - done)
            loss = run_batches(position["iterator"], tf.constant(count, tf.int64))
            done += count
            position["left"] -= count
            if not position["left"]:
                epoch.assign_add(1)
            if done % EVERY == 0:
                now = time.perf_counter()
                bench_core.write_duties(writer, logger, done, loss, EVERY / (now - last))
                last = now
            if done % CHECKPOINT_EVERY == 0:
                manager.save(checkpoint_number=done)
        model.wait()
        return clock.per_step(steps)

    sample()  # Traces, creates the writer's file.
    return sample


def orbit_sampler(model: DataModel, directory: str, steps: int) -> Callable[[], float] | None:
    """Orbit with checkpoints and summaries, or `None` when Orbit does not import."""
    try:
        import orbit
    except ImportError:
        return None
    train = model.train

    class Trainer(orbit.StandardTrainer):  # type: ignore[misc]
        def __init__(self) -> None:
            options = orbit.StandardTrainerOptions(use_tf_while_loop=True)
            super().__init__(train_dataset=model.dataset.repeat(), options=options)
            self.loss = tf.keras.metrics.Mean("loss")

        def train_loop_begin(self) -> None:
            self.loss.reset_state()

        def train_step(self, iterator: Any) -> None:
            self.loss.update_state(train(next(iterator))["loss"])

        def train_loop_end(self) -> dict[str, Any]:
            return {"loss": self.loss.result()}

    manager = tf.train.CheckpointManager(
        model.checkpoint,
        directory,
        max_to_keep=5,
        step_counter=model.global_step,
        checkpoint_interval=CHECKPOINT_EVERY,
    )
    quiet = open(os.devnull, "w")  # Open while the sampler lives: Orbit prints.
    with contextlib.redirect_stdout(quiet):
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
        clock = Clock()
        with contextlib.redirect_stdout(quiet):
            controller.train(steps=start_step + steps)
        model.wait()
        return clock.per_step(steps)

    return sample


def run(steps: int, rounds: int) -> dict[str, Any]:
    """Measures every variant; returns the results (also written by `main`)."""
    logging.getLogger("tensorflow").setLevel(logging.WARNING)
    logging.getLogger("absl").setLevel(logging.WARNING)
    if steps % CHECKPOINT_EVERY:
        raise ValueError(f"steps must be a multiple of {CHECKPOINT_EVERY}, got {steps}.")
    with tempfile.TemporaryDirectory() as root:
        model = DataModel()
        # The steps are traced first inside a recording session, as training
        # code should: their tf.summary call then records on the hook's steps.
        with standard_session(model.checkpoint, os.path.join(root, "trace"), 2, 1) as session:
            session.run(model.step)
            session.call(model.train, next(iter(model.dataset)))
        samplers: dict[str, Callable[[], float]] = {
            "raw": raw_sampler(model, steps),
            "fused100": fused_sampler(model, steps),
            REFERENCE: duties_sampler(model, os.path.join(root, "duties"), steps),
        }
        for name, spe in (("single", 1), ("auto", "auto")):
            directory = os.path.join(root, name)
            samplers[f"monsession/{name}"] = session_sampler(model, directory, steps, spe)
        epochs = {EPOCH: model.dataset, SHORT_EPOCH: model.short_dataset}
        for length, spe in ((EPOCH, 1), (EPOCH, "auto"), (SHORT_EPOCH, "auto")):
            name = f"epochs-{'single' if spe == 1 else spe}/{length}"
            samplers[f"monsession/{name}"] = epochs_sampler(
                model, monsession.Epochs(epochs[length]), os.path.join(root, name), steps, spe
            )
        for length, dataset in epochs.items():
            directory = os.path.join(root, f"hand-epochs-{length}")
            samplers[f"hand-epochs/{length}"] = hand_epochs_sampler(
                model, dataset, directory, steps
            )
        directory = os.path.join(root, "hand-epochs-one-iterator")
        samplers[f"hand-epochs-one-iterator/{SHORT_EPOCH}"] = hand_epochs_sampler(
            model, model.short_dataset, directory, steps, one_iterator=True
        )
        orbit = orbit_sampler(model, os.path.join(root, "orbit"), steps)
        if orbit is not None:
            samplers["orbit"] = orbit
        for sample in samplers.values():  # Warm up: traces, first checkpoints.
            sample()
        cpu: dict[str, list[float]] = {name: [] for name in samplers}
        samples = bench_core.interleave(with_cpu(samplers, cpu), rounds)
    bases = (
        REFERENCE,
        "raw",
        "fused100",
        f"hand-epochs/{EPOCH}",
        f"hand-epochs/{SHORT_EPOCH}",
        f"hand-epochs-one-iterator/{SHORT_EPOCH}",
    )
    ratios = {
        f"{name} / {base}": bench_core.paired_ratio(samples, name, base)
        for base in bases
        for name in samplers
        if name != base
    }
    return {
        "steps": steps,
        "rounds": rounds,
        "orbit": "measured" if orbit is not None else "not installed (import orbit failed)",
        "median_us_per_step": bench_core.medians_us(samples),
        "targets": {
            ratio: {"measured": ratios[ratio], "target": target, "met": ratios[ratio] <= target}
            for ratio, target in TARGETS.items()
        },
        "ratios": ratios,
        # The same samples' process CPU time (all threads): less moved by
        # other processes on a shared machine than the wall time.
        "median_cpu_us_per_step": bench_core.medians_us(cpu),
        "cpu_ratios": {
            f"{name} / {base}": bench_core.paired_ratio(cpu, name, base)
            for base in bases
            for name in samplers
            if name != base
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000, help="steps per sample")
    parser.add_argument("--rounds", type=int, default=11, help="interleaved rounds")
    args = parser.parse_args()
    result = run(args.steps, args.rounds)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
