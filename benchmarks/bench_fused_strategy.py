"""Fused steps under a strategy: `"auto"` against a hand-written Orbit-style strategy loop.

A small linear model under `MirroredStrategy` over 2 logical CPUs (one
process), or under `MultiWorkerMirroredStrategy` with 2 worker processes on
loopback (`--multiworker`: this script starts them; worker 0 writes the
results). Its batches come from a distributed `tf.data` dataset, read
inside the step (`strategy.run(replica_fn, args=(next(iterator),))`).
`--parameter-server` measures `ParameterServerStrategy` with a
`ClusterCoordinator` instead (bench_fused_ps.py says how). Per-step time,
variants interleaved:

* `raw`: a Python loop calling the `tf.function` step;
* `fused100+duties`, the reference: a hand-written `tf.function` running a
  `tf.while_loop` of 100 steps per call (Orbit's `use_tf_while_loop` loop),
  doing the standard set's duties by hand: the loss as a `tf.summary`
  scalar every 100 steps (written in the function), `global_step/sec`
  written and the loss logged (one host read) every 100 steps, a
  `tf.train.CheckpointManager` save every 1000 steps;
* `monsession/single` and `monsession/auto`: `MonitoredTrainingSession`
  inside `strategy.scope()` with the standard set (summaries and step
  counter every 100 steps, checkpoints every 1000, `LoggingTensorHook`
  every 100, `StopAtStepHook`), `steps_per_execution` 1 or `"auto"`,
  looping `sess.run(step)`.

Target: `monsession/auto` ≤ 1.15 x `fused100+duties` under `MirroredStrategy`
(the `MultiWorkerMirroredStrategy` and `ParameterServerStrategy` figures
are written beside it). Ratios are
medians over rounds of two samples taken in the same round (wall time, and
the process's CPU time in `cpu_ratios`).

    python benchmarks/bench_fused_strategy.py [--steps 1000] [--rounds 11]
        [--multiworker | --parameter-server]

Writes benchmarks/results/fused_strategy.json (`--multiworker`:
fused_multiworker.json; `--parameter-server`: fused_ps.json).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import pathlib
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import bench_core
import tensorflow as tf
from bench_fused import Clock, with_cpu

import monsession
from monsession import hooks as ms_hooks

RESULTS = pathlib.Path(__file__).parent / "results"
EVERY = 100  # Summaries, step rate and logged loss.
CHECKPOINT_EVERY = 1000
BLOCK = 100  # Steps per call of the hand-written fused loop.
FEATURES = 16
GLOBAL_BATCH = 64
REFERENCE = "fused100+duties"
TARGETS = {f"monsession/auto / {REFERENCE}": 1.15}


def make_strategy(multiworker: bool) -> Any:
    """`MultiWorkerMirroredStrategy` (from `TF_CONFIG`), else Mirrored over 2 logical CPUs."""
    if multiworker:
        return tf.distribute.MultiWorkerMirroredStrategy()
    (cpu,) = tf.config.list_physical_devices("CPU")
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    return tf.distribute.MirroredStrategy(
        [device.name for device in tf.config.list_logical_devices("CPU")]
    )


class StrategyModel:
    """A linear model under `strategy`; `step()` trains on the next distributed batch."""

    def __init__(self, strategy: Any) -> None:
        tf.compat.v1.reset_default_graph()
        self.strategy = strategy
        with strategy.scope():
            self.global_step = global_step = monsession.get_or_create_global_step()
            w = tf.Variable(
                tf.random.normal([FEATURES, 1], seed=2), aggregation=tf.VariableAggregation.MEAN
            )
        x = tf.random.normal([GLOBAL_BATCH, FEATURES], seed=1)
        dataset = tf.data.Dataset.from_tensors(x).repeat()
        iterator = iter(strategy.experimental_distribute_dataset(dataset))

        def replica_fn(batch: Any) -> Any:
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(tf.matmul(batch, w) - 1.0))
            w.assign_sub(0.01 * tape.gradient(loss, w))
            return loss

        @tf.function
        def step() -> dict[str, Any]:
            losses = strategy.run(replica_fn, args=(next(iterator),))
            loss = strategy.reduce(tf.distribute.ReduceOp.MEAN, losses, axis=None)
            global_step.assign_add(1)
            tf.summary.scalar("loss", loss)
            return {"loss": loss}

        self.step = step
        self.checkpoint = tf.train.Checkpoint(step=global_step, w=w)

    def wait(self) -> None:
        self.global_step.numpy()


def own_directory(directory: str, strategy: Any) -> str:
    """`directory` on the chief; a worker's own temporary one elsewhere (it saves too)."""
    if monsession.is_chief(strategy):
        return directory
    return tempfile.mkdtemp(prefix="bench-worker-")


def raw_sampler(model: StrategyModel, steps: int) -> Callable[[], float]:
    def sample() -> float:
        clock = Clock()
        for _ in range(steps):
            model.step()
        model.wait()
        return clock.per_step(steps)

    return sample


def duties_sampler(model: StrategyModel, directory: str, steps: int) -> Callable[[], float]:
    """The reference: a `tf.while_loop` of 100 steps per call, the set's duties by hand."""
    step, global_step = model.step, model.global_step
    directory = own_directory(directory, model.strategy)
    writer = tf.summary.create_file_writer(directory)
    manager = tf.train.CheckpointManager(model.checkpoint, directory, max_to_keep=5)
    logger = tf.get_logger()

    @tf.function
    def hundred_steps() -> Any:
        loss = tf.constant(0.0)
        for _ in tf.range(BLOCK):  # A tf.while_loop of the strategy step.
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


def standard_session(model: StrategyModel, directory: str, steps: int, spe: Any) -> Any:
    """The standard set inside the strategy's scope, stopping after `steps` steps."""
    return monsession.MonitoredTrainingSession(
        checkpoint_dir=directory,
        scaffold=monsession.Scaffold(saver=model.checkpoint),
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


def session_sampler(
    model: StrategyModel, directory: str, steps: int, spe: Any
) -> Callable[[], float]:
    def sample() -> float:
        with model.strategy.scope(), standard_session(model, directory, steps, spe) as session:
            clock = Clock()
            while not session.should_stop():
                session.run(model.step)
            model.wait()
            return clock.per_step(steps)

    return sample


def run(steps: int, rounds: int, multiworker: bool = False) -> dict[str, Any]:
    """Measures every variant under the strategy; returns the results."""
    logging.getLogger("tensorflow").setLevel(logging.WARNING)
    logging.getLogger("absl").setLevel(logging.WARNING)
    logging.getLogger("monsession").setLevel(logging.WARNING)
    if steps % CHECKPOINT_EVERY:
        raise ValueError(f"steps must be a multiple of {CHECKPOINT_EVERY}, got {steps}.")
    strategy = make_strategy(multiworker)
    # Every worker of a job uses the same paths: the chief writes there.
    root = os.environ.get("BENCH_ROOT") or tempfile.mkdtemp(prefix="bench-fused-strategy-")
    model = StrategyModel(strategy)
    # Traced first inside a recording session, as training code should: its
    # tf.summary call then records on the hook's steps (the sessions share
    # one directory: the writer of the trace is the one the step keeps).
    directory = os.path.join(root, "monsession")
    with strategy.scope(), standard_session(model, directory, 2, 1) as session:
        session.run(model.step)
    samplers: dict[str, Callable[[], float]] = {
        "raw": raw_sampler(model, steps),
        REFERENCE: duties_sampler(model, os.path.join(root, "duties"), steps),
    }
    for name, spe in (("single", 1), ("auto", "auto")):
        samplers[f"monsession/{name}"] = session_sampler(model, directory, steps, spe)
    for sample in samplers.values():  # Warm up: traces, first checkpoints.
        sample()
    cpu: dict[str, list[float]] = {name: [] for name in samplers}
    samples = bench_core.interleave(with_cpu(samplers, cpu), rounds)
    ratios = {
        f"{name} / {base}": bench_core.paired_ratio(samples, name, base)
        for base in (REFERENCE, "raw")
        for name in samplers
        if name != base
    }
    return {
        "strategy": (
            "MultiWorkerMirroredStrategy, 2 worker processes on loopback"
            if multiworker
            else "MirroredStrategy, 2 logical CPUs"
        ),
        "replicas": strategy.num_replicas_in_sync,
        "steps": steps,
        "rounds": rounds,
        "median_us_per_step": bench_core.medians_us(samples),
        "targets": {
            ratio: {"measured": ratios[ratio], "target": target, "met": ratios[ratio] <= target}
            for ratio, target in TARGETS.items()
        },
        "ratios": ratios,
        "median_cpu_us_per_step": bench_core.medians_us(cpu),
        "cpu_ratios": {
            f"{name} / {base}": bench_core.paired_ratio(cpu, name, base)
            for base in (REFERENCE, "raw")
            for name in samplers
            if name != base
        },
    }


def measure(
    steps: int, rounds: int, multiworker: bool = False, parameter_server: bool = False
) -> dict[str, Any]:
    """`run` in fresh processes (the logical CPUs are set before TensorFlow starts).

    One process for `MirroredStrategy`, and for `ParameterServerStrategy` (its
    servers in-process); 2 workers on loopback for `MultiWorkerMirroredStrategy`.
    Returns the results of the (chief) process.
    """
    env: dict[str, str] = {}
    configs: list[dict[str, str]] = [{}]
    if multiworker:
        sockets = [socket.socket() for _ in range(2)]
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        workers = [f"127.0.0.1:{sock.getsockname()[1]}" for sock in sockets]
        for sock in sockets:
            sock.close()
        configs = [
            {
                "TF_CONFIG": json.dumps(
                    {"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}}
                )
            }
            for index in (0, 1)
        ]
    with tempfile.TemporaryDirectory() as root:
        output = os.path.join(root, "results.json")
        env = {**os.environ, "BENCH_ROOT": root}
        arguments = ["--in-process", output, "--steps", str(steps), "--rounds", str(rounds)]
        if multiworker:
            arguments.append("--multiworker")
        if parameter_server:
            arguments.append("--parameter-server")
        children = []
        try:
            for config in configs:
                children.append(
                    subprocess.Popen([sys.executable, __file__, *arguments], env={**env, **config})
                )
            for child in children:
                if child.wait() != 0:
                    raise RuntimeError(f"a benchmark process exited with {child.returncode}")
        finally:
            for child in children:
                if child.poll() is None:
                    child.kill()
                    child.wait()
        with open(output) as file:
            result: dict[str, Any] = json.load(file)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000, help="steps per sample")
    parser.add_argument("--rounds", type=int, default=11, help="interleaved rounds")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--multiworker", action="store_true", help="2 worker processes")
    mode.add_argument(
        "--parameter-server", action="store_true", help="1 ps, 1 worker and the coordinator"
    )
    parser.add_argument("--in-process", help=argparse.SUPPRESS)  # Internal: the output file.
    args = parser.parse_args()
    if args.in_process and args.parameter_server:
        import bench_fused_ps

        result = bench_fused_ps.run(args.steps, args.rounds, os.environ["BENCH_ROOT"])
        with open(args.in_process, "w") as file:
            json.dump(result, file)
        os._exit(0)  # The in-process servers can hold up the shutdown.
    if args.in_process:
        result = run(args.steps, args.rounds, multiworker=args.multiworker)
        if monsession.is_chief():
            with open(args.in_process, "w") as file:
                json.dump(result, file)
        return
    result = measure(args.steps, args.rounds, args.multiworker, args.parameter_server)
    path = "fused_strategy.json"
    if args.multiworker or args.parameter_server:
        path = "fused_multiworker.json" if args.multiworker else "fused_ps.json"
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / path).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
