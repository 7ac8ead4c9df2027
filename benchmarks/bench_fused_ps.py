"""The `--parameter-server` mode of bench_fused_strategy: fused steps under a `ClusterCoordinator`.

`ParameterServerStrategy` over an in-process cluster (1 ps, 1 worker, both
`tf.distribute.Server`s in the coordinator's process: with 2 in-process
workers TensorFlow's closures stall on this machine). The step is the same
linear model as the other modes, its batch a constant read inside the
closure (a scheduled function the session fuses takes no arguments, so no
per-worker iterator is passed in). Per-step time, variants interleaved:

* `fused100+duties`, the reference: a hand-written `tf.function` running a
  `tf.while_loop` of 100 steps, scheduled as one closure per 100 steps, and
  the duties on the coordinator after each: the global step advanced by
  100 (a variable on the ps, as the session's own), `global_step/sec`
  written and the loss logged (its `RemoteValue` fetched: one wait for the
  closure) every 100 steps, and every 1000 a join of the coordinator and a
  `tf.train.CheckpointManager` save. No loss summary: the closure runs on a
  worker, where no writer is, so neither it nor the session's summary hook
  writes one;
* `monsession/single` and `monsession/auto`: `MonitoredTrainingSession`
  inside `strategy.scope()` with the standard set (summaries and step
  counter every 100 steps, checkpoints every 1000, `LoggingTensorHook`
  every 100, `StopAtStepHook`), its global step owned by the session;
  the step is a Python function returning `coordinator.schedule(worker_fn)`
  (its outputs fetched by name when a hook asks) and names `worker_fn` in
  `monsession_fused_step`. `steps_per_execution=1` schedules one closure
  per step; `"auto"` one per block of silent steps.

Every sample ends with a join of the coordinator. There is no target; the
figure is written beside the Mirrored and multi-worker ones. CPU times are
the whole process's, the in-process servers' threads included.
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import bench_core
import tensorflow as tf
from bench_fused import Clock, with_cpu

import monsession
from monsession import hooks as ms_hooks

EVERY = 100  # Step rate and logged loss.
CHECKPOINT_EVERY = 1000
BLOCK = 100  # Steps per closure of the hand-written fused loop.
FEATURES = 16
GLOBAL_BATCH = 64
REFERENCE = "fused100+duties"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def in_process_cluster() -> tuple[Any, Any, list[Any]]:
    """1 ps and 1 worker server in this process; the strategy, its coordinator and the servers."""
    cluster = tf.train.ClusterSpec(
        {"worker": [f"127.0.0.1:{_free_port()}"], "ps": [f"127.0.0.1:{_free_port()}"]}
    )
    servers = [tf.distribute.Server(cluster, job, 0) for job in ("worker", "ps")]
    resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(cluster, rpc_layer="grpc")
    strategy = tf.distribute.experimental.ParameterServerStrategy(resolver)
    coordinator = tf.distribute.experimental.coordinator.ClusterCoordinator(strategy)
    return strategy, coordinator, servers


class Outputs(Mapping[str, Any]):
    """A closure's outputs by name, each fetched (waiting for the closure) when asked for."""

    def __init__(self, remote: Any) -> None:
        self._remote = remote

    def __getitem__(self, name: str) -> Any:
        return self._remote.fetch()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(("loss",))

    def __len__(self) -> int:
        return 1


class PsModel:
    """The linear model's variable on the ps; `worker_fn` is one step, run in a closure."""

    def __init__(self, strategy: Any, coordinator: Any) -> None:
        self.strategy, self.coordinator = strategy, coordinator
        with strategy.scope():
            w = tf.Variable(tf.random.normal([FEATURES, 1], seed=2))
        x = tf.random.normal([GLOBAL_BATCH, FEATURES], seed=1)

        @tf.function
        def worker_fn() -> dict[str, Any]:
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - 1.0))
            w.assign_sub(0.01 * tape.gradient(loss, w))
            return {"loss": loss}

        def step() -> Outputs:
            return Outputs(coordinator.schedule(worker_fn))

        step.monsession_fused_step = worker_fn  # type: ignore[attr-defined]
        self.w, self.worker_fn, self.step = w, worker_fn, step


def duties_sampler(model: PsModel, directory: str, steps: int) -> Callable[[], float]:
    """The reference: a closure of a `tf.while_loop` of 100 steps, the duties on the coordinator."""
    coordinator, worker_fn = model.coordinator, model.worker_fn
    with model.strategy.scope():
        global_step = tf.Variable(0, dtype=tf.int64)
    writer = tf.summary.create_file_writer(directory)
    checkpoint = tf.train.Checkpoint(step=global_step, w=model.w)
    manager = tf.train.CheckpointManager(checkpoint, directory, max_to_keep=5)
    logger = tf.get_logger()

    @tf.function
    def hundred_steps() -> Any:
        loss = tf.constant(0.0)
        for _ in tf.range(BLOCK):  # A tf.while_loop of the step.
            loss = worker_fn()["loss"]
        return loss

    def sample() -> float:
        done = int(global_step.numpy())  # A hand-written loop counts its steps on the host.
        clock = Clock()
        last = time.perf_counter()
        for call in range(1, steps // BLOCK + 1):
            loss = coordinator.schedule(hundred_steps)
            global_step.assign_add(BLOCK)
            done += BLOCK
            logger.info("loss = %s, step = %d", loss.fetch(), done)
            now = time.perf_counter()
            with writer.as_default(step=done):
                tf.summary.scalar("global_step/sec", BLOCK / (now - last))
            last = now
            if call * BLOCK % CHECKPOINT_EVERY == 0:
                coordinator.join()
                manager.save(checkpoint_number=done)
        coordinator.join()
        return clock.per_step(steps)

    return sample


def session_sampler(model: PsModel, directory: str, steps: int, spe: Any) -> Callable[[], float]:
    """`MonitoredTrainingSession` with the standard set, stopping after `steps` steps."""

    def sample() -> float:
        with (
            model.strategy.scope(),
            monsession.MonitoredTrainingSession(
                checkpoint_dir=directory,
                scaffold=monsession.Scaffold(saver=tf.train.Checkpoint(w=model.w)),
                hooks=[
                    monsession.StopAtStepHook(num_steps=steps),
                    ms_hooks.LoggingTensorHook({"loss": "loss"}, every_n_iter=EVERY),
                ],
                save_summaries_steps=EVERY,
                save_checkpoint_steps=CHECKPOINT_EVERY,
                save_checkpoint_secs=None,
                log_step_count_steps=EVERY,
                steps_per_execution=spe,
            ) as session,
        ):
            clock = Clock()
            while not session.should_stop():
                session.run(model.step)
        model.coordinator.join()
        return clock.per_step(steps)

    return sample


def run(steps: int, rounds: int, root: str) -> dict[str, Any]:
    """Measures the variants under `ParameterServerStrategy`; returns the results."""
    for name in ("tensorflow", "absl", "monsession"):
        logging.getLogger(name).setLevel(logging.WARNING)
    if steps % CHECKPOINT_EVERY:
        raise ValueError(f"steps must be a multiple of {CHECKPOINT_EVERY}, got {steps}.")
    strategy, coordinator, _servers = in_process_cluster()
    model = PsModel(strategy, coordinator)
    samplers: dict[str, Callable[[], float]] = {
        f"monsession/{name}": session_sampler(model, f"{root}/monsession", steps, spe)
        for name, spe in (("single", 1), ("auto", "auto"))
    }
    samplers[REFERENCE] = duties_sampler(model, f"{root}/duties", steps)
    # Warm up (traces, first checkpoints), the step first traced inside a session.
    for sample in samplers.values():
        sample()
    cpu: dict[str, list[float]] = {name: [] for name in samplers}
    samples = bench_core.interleave(with_cpu(samplers, cpu), rounds)
    pairs = (("monsession/auto", REFERENCE), ("monsession/single", "monsession/auto"))
    pairs += (("monsession/single", REFERENCE),)
    return {
        "strategy": "ParameterServerStrategy, 1 ps and 1 worker in-process (ClusterCoordinator)",
        "workers": 1,
        "steps": steps,
        "rounds": rounds,
        "median_us_per_step": bench_core.medians_us(samples),
        "ratios": {f"{a} / {b}": bench_core.paired_ratio(samples, a, b) for a, b in pairs},
        "median_cpu_us_per_step": bench_core.medians_us(cpu),
        "cpu_ratios": {f"{a} / {b}": bench_core.paired_ratio(cpu, a, b) for a, b in pairs},
    }
