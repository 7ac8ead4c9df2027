"""Per-step cost of a monitored session vs the loop you would write by hand, in one run.

Graph mode, one small model (a linear regression step with a scalar summary):

* ``graph/raw``: ``sess.run(train_op)`` in a plain loop;
* ``graph/tf/<set>``: `tf.compat.v1.train.MonitoredSession`;
* ``graph/monsession/<set>``: `monsession.MonitoredSession`;

each session with four hook sets: ``none``; ``stop_loss`` (StopAtStepHook and
a hook fetching the loss every step; every 100 steps in eager mode); ``standard`` (StopAtStepHook,
LoggingTensorHook every 100 steps, NanTensorHook, StepCounterHook,
SummarySaverHook every 100 steps, CheckpointSaverHook every 600 s); ``mts``
(`MonitoredTrainingSession` with its default hooks and `checkpoint_dir` set).

Eager mode: ``eager/raw`` calls the `tf.function` step in a plain loop;
``eager/raw-argument`` calls the same step taking its batch, ``step(batch)``,
and ``eager/monsession/standard-argument`` runs it with the standard hooks
through ``sess.call(step, batch)``;
``eager/raw+duties`` is the reference of the standard set: the raw loop doing
its duties by hand on the same steps (the loss read and checked for NaN every
step; every 100 steps the loss and ``global_step/sec`` written through a
``tf.summary`` file writer and the loss logged; a `tf.train.CheckpointManager`
save every 600 s; a stop at the set's last step);
``eager/monsession/<set>`` runs the same `tf.function` in monsession with the
eager equivalents (the loss fetched by its name ``"loss"``, summaries written
by ``tf.summary`` in the step). The step is traced once, inside a session
whose SummarySaverHook records it, so every variant runs the same graph.

Sessions loop ``while not sess.should_stop(): sess.run(step)``, as training
code does. Graph sessions stay open; an eager session is created for each
sample (one eager SummarySaverHook records a thread's summaries at a time).
Variants are interleaved in rotating order over many short rounds. Reported:
the median per-step time of each variant, and each ratio as the median over
rounds of the ratio of two samples taken in the same round.

    python benchmarks/bench_core.py [--steps 300] [--rounds 31]

Writes benchmarks/results/core.json.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import pathlib
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf

import monsession
from monsession import hooks as ms_hooks

RESULTS = pathlib.Path(__file__).parent / "results" / "core.json"
HOOK_SETS = ("none", "stop_loss", "standard", "mts")
NEVER = 10**12  # A last step no run reaches.
EVERY = 100  # The standard set's summaries, step rate and logged loss.
CHECKPOINT_SECS = 600  # The standard set's checkpoints.
WARMUP_STEPS = 20


# Sampling, shared by the other benchmarks.


def interleave(samplers: dict[str, Callable[[], float]], rounds: int) -> dict[str, list[float]]:
    """Calls every sampler once per round, rotating the order; returns the samples."""
    names = list(samplers)
    samples: dict[str, list[float]] = {name: [] for name in names}
    for round_index in range(rounds):
        shift = round_index % len(names)
        for name in names[shift:] + names[:shift]:
            samples[name].append(samplers[name]())
    return samples


def medians_us(samples: dict[str, list[float]]) -> dict[str, float]:
    """Median of each variant's samples (seconds per step), in microseconds."""
    return {name: round(statistics.median(values) * 1e6, 2) for name, values in samples.items()}


def paired_ratio(samples: dict[str, list[float]], name: str, base: str) -> float:
    """Median over rounds of `name` / `base` measured in the same round.

    Pairing samples taken moments apart cancels most of the drift of a
    shared machine, which a ratio of two medians would keep.
    """
    pairs = zip(samples[name], samples[base], strict=True)
    return round(statistics.median(a / b for a, b in pairs), 3)


def paired_difference_us(samples: dict[str, list[float]], name: str, base: str) -> float:
    """Median over rounds of `name` - `base` (per step, same round), in microseconds."""
    pairs = zip(samples[name], samples[base], strict=True)
    return round(statistics.median(a - b for a, b in pairs) * 1e6, 2)


def timed_loop(session: Any, step: Any, steps: int) -> float:
    """Seconds per step of ``while not should_stop(): run(step)``, `steps` times."""
    run, should_stop = session.run, session.should_stop
    count = 0
    start = time.perf_counter()
    while not should_stop() and count < steps:
        run(step)
        count += 1
    elapsed = time.perf_counter() - start
    if count < steps:
        raise RuntimeError(f"The session stopped after {count} of {steps} steps.")
    return elapsed / steps


def timed_calls(call: Callable[[], Any], steps: int) -> float:
    """Seconds per call of `call()` in a plain loop."""
    start = time.perf_counter()
    for _ in range(steps):
        call()
    return (time.perf_counter() - start) / steps


# Graph mode.


def graph_model() -> tuple[Any, Any, Any]:
    """Builds the small model in the default graph: (loss, train_op, summary)."""
    global_step = tf.compat.v1.train.get_or_create_global_step()
    x = tf.random.normal([32, 16], seed=1)
    w = tf.compat.v1.get_variable("w", [16, 1])
    loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - 1.0), name="loss")
    summary = tf.compat.v1.summary.scalar("loss", loss)
    train = tf.compat.v1.train.GradientDescentOptimizer(0.01).minimize(
        loss, global_step=global_step
    )
    return loss, train, summary


def graph_standard_hooks(api: str, loss: Any, summary: Any, directory: str) -> list[Any]:
    """The standard hook set, from TensorFlow (``api="tf"``) or monsession."""
    if api == "tf":
        train, stop_hook = tf.compat.v1.train, tf.compat.v1.train.StopAtStepHook
    else:
        train, stop_hook = ms_hooks, monsession.StopAtStepHook
    return [
        stop_hook(last_step=NEVER),
        train.LoggingTensorHook({"loss": loss}, every_n_iter=100),
        train.NanTensorHook(loss),
        train.StepCounterHook(every_n_steps=100, output_dir=directory),
        train.SummarySaverHook(save_steps=100, output_dir=directory, summary_op=summary),
        train.CheckpointSaverHook(directory, save_secs=600),
    ]


def loss_fetching_hook(api: str, loss: Any, every_n: int) -> Any:
    """A user hook fetching `loss` every `every_n` steps, written against `api`."""
    module: Any = tf.compat.v1.train if api == "tf" else monsession

    class FetchLoss(module.SessionRunHook):
        def __init__(self) -> None:
            self.calls = 0
            self.last = None

        def before_run(self, run_context: Any) -> Any:
            self.calls += 1
            return module.SessionRunArgs(loss) if self.calls % every_n == 0 else None

        def after_run(self, run_context: Any, run_values: Any) -> None:
            if run_values.results is not None:
                self.last = run_values.results

    return FetchLoss()


def graph_stop_loss_hooks(api: str, loss: Any, summary: Any, directory: str) -> list[Any]:
    """StopAtStepHook and a hook fetching the loss every step."""
    stop_hook = tf.compat.v1.train.StopAtStepHook if api == "tf" else monsession.StopAtStepHook
    return [stop_hook(last_step=NEVER), loss_fetching_hook(api, loss, every_n=1)]


GRAPH_HOOK_SETS = {"stop_loss": graph_stop_loss_hooks, "standard": graph_standard_hooks}


class GraphVariant:
    """One graph-mode variant in its own graph and session, kept open between samples.

    Args:
      api: ``"raw"``, ``"tf"`` or ``"monsession"``.
      hooks: Builds the hook list from (api, loss, summary, directory); `None`
        for the ``mts`` set.
      mts: Use `MonitoredTrainingSession(checkpoint_dir=...)` with its defaults.
      directory: Where checkpoints and summaries go.
    """

    def __init__(
        self,
        api: str,
        hooks: Callable[[str, Any, Any, str], list[Any]] | None,
        directory: str,
        mts: bool = False,
    ) -> None:
        self.graph = tf.Graph()
        with self.graph.as_default():
            loss, self.train, summary = graph_model()
            self.raw = api == "raw"
            if self.raw:
                self.session: Any = tf.compat.v1.Session()
                self.session.run(tf.compat.v1.global_variables_initializer())
            else:
                module: Any = tf.compat.v1.train if api == "tf" else monsession
                if mts:
                    self.session = module.MonitoredTrainingSession(checkpoint_dir=directory)
                else:
                    hook_list = hooks(api, loss, summary, directory) if hooks else []
                    self.session = module.MonitoredSession(hooks=hook_list)
            self.sample(WARMUP_STEPS)

    def sample(self, steps: int) -> float:
        with self.graph.as_default():
            if self.raw:
                run, train = self.session.run, self.train
                return timed_calls(lambda: run(train), steps)
            return timed_loop(self.session, self.train, steps)

    def close(self) -> None:
        with self.graph.as_default():
            self.session.close()


@contextlib.contextmanager
def graph_variants(
    hook_sets: tuple[str, ...], apis: tuple[str, ...] = ("tf", "monsession")
) -> Iterator[dict[str, GraphVariant]]:
    """The raw variant and each (api, hook set), opened for the block."""
    with tempfile.TemporaryDirectory() as root:
        variants: dict[str, GraphVariant] = {}
        try:
            variants["graph/raw"] = GraphVariant("raw", None, root)
            for api in apis:
                for hook_set in hook_sets:
                    directory = os.path.join(root, f"{api}-{hook_set}")
                    hooks = GRAPH_HOOK_SETS.get(hook_set)
                    variants[f"graph/{api}/{hook_set}"] = GraphVariant(
                        api, hooks, directory, mts=hook_set == "mts"
                    )
            yield variants
        finally:
            for variant in variants.values():
                variant.close()
            tf.compat.v1.summary.FileWriterCache.clear()


# Eager mode.


class EagerModel:
    """The small model as a `tf.function` step returning ``{"loss": loss}``.

    The step writes ``tf.summary.scalar("loss", ...)``; it records only where a
    SummarySaverHook (or a hand-written loop) makes it.
    """

    def __init__(self) -> None:
        tf.compat.v1.reset_default_graph()
        self.global_step = monsession.get_or_create_global_step()
        x = tf.random.normal([32, 16], seed=1)
        w = tf.Variable(tf.random.normal([16, 1], seed=2))
        global_step = self.global_step

        def train_on(batch: tf.Tensor) -> dict[str, Any]:
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(tf.matmul(batch, w) - 1.0))
            w.assign_sub(0.01 * tape.gradient(loss, w))
            global_step.assign_add(1)
            tf.summary.scalar("loss", loss)
            return {"loss": loss}

        @tf.function
        def step() -> dict[str, Any]:
            return train_on(x)

        step_on = tf.function(train_on)

        self.step = step
        self.step_on = step_on  # The same step, taking its batch as an argument.
        self.batch = x
        self.checkpoint = tf.train.Checkpoint(step=global_step, w=w)

    def wait(self) -> None:
        """Waits for the device (a no-op with the synchronous CPU executor)."""
        self.global_step.numpy()


def eager_standard_hooks(model: EagerModel, directory: str) -> list[Any]:
    return [
        monsession.StopAtStepHook(last_step=NEVER),
        ms_hooks.LoggingTensorHook({"loss": "loss"}, every_n_iter=EVERY),
        ms_hooks.NanTensorHook("loss"),
        ms_hooks.StepCounterHook(every_n_steps=EVERY, output_dir=directory),
        ms_hooks.SummarySaverHook(save_steps=EVERY, output_dir=directory),
        ms_hooks.CheckpointSaverHook(directory, save_secs=CHECKPOINT_SECS, saver=model.checkpoint),
    ]


def write_duties(writer: Any, logger: Any, step: int, loss: Any, steps_per_sec: float) -> None:
    """A summary step's duties by hand: the loss and step rate as summaries, the loss logged."""
    with writer.as_default(step=step):
        tf.summary.scalar("loss", loss)
        tf.summary.scalar("global_step/sec", steps_per_sec)
    logger.info("loss = %s, step = %d", loss.numpy(), step)


def eager_duties_sampler(model: EagerModel, directory: str, steps: int) -> Any:
    """The reference of the standard set: a raw loop doing its duties by hand on the same steps.

    Steps are counted on the host, as a hand-written loop does. Each step's
    loss is read and checked (`NanTensorHook`); every `EVERY` steps the
    duties of `write_duties` (`SummarySaverHook`, `StepCounterHook`,
    `LoggingTensorHook`); a checkpoint when `CHECKPOINT_SECS` have passed
    (`CheckpointSaverHook`); a stop at the last step (`StopAtStepHook`).
    """
    step, global_step = model.step, model.global_step
    writer = tf.summary.create_file_writer(directory)
    manager = tf.train.CheckpointManager(model.checkpoint, directory, max_to_keep=5)
    logger = tf.get_logger()

    def run(count: int) -> float:
        done = int(global_step.numpy())
        start = last_rate = saved = time.perf_counter()
        for _ in range(count):
            loss = step()["loss"]
            done += 1
            if math.isnan(loss.numpy()):
                raise FloatingPointError(f"NaN loss at step {done}.")
            now = time.perf_counter()
            if done % EVERY == 0:
                write_duties(writer, logger, done, loss, EVERY / (now - last_rate))
                last_rate = now
            if now - saved >= CHECKPOINT_SECS:
                manager.save(checkpoint_number=done)
                saved = now
            if done >= NEVER:
                break
        seconds = (time.perf_counter() - start) / count
        model.wait()
        return seconds

    run(WARMUP_STEPS + EVERY)  # Creates the writer's file.
    return lambda: run(steps)


def eager_stop_loss_hooks(model: EagerModel, directory: str) -> list[Any]:
    """StopAtStepHook and a hook fetching ``"loss"`` every 100 steps."""
    return [
        monsession.StopAtStepHook(last_step=NEVER),
        loss_fetching_hook("monsession", "loss", every_n=100),
    ]


EAGER_HOOK_SETS = {"stop_loss": eager_stop_loss_hooks, "standard": eager_standard_hooks}


def eager_session(model: EagerModel, hook_set: str, directory: str) -> Any:
    if hook_set == "mts":
        return monsession.MonitoredTrainingSession(
            checkpoint_dir=directory, scaffold=monsession.Scaffold(saver=model.checkpoint)
        )
    build = EAGER_HOOK_SETS.get(hook_set)
    return monsession.MonitoredSession(hooks=build(model, directory) if build else [])


def eager_argument_sampler(model: EagerModel, session: bool, directory: str, steps: int) -> Any:
    """Timing one sample of the step taking its batch: `step(batch)` raw, or `sess.call`."""
    step, batch = model.step_on, model.batch
    if not session:

        def sample_raw() -> float:
            seconds = timed_calls(lambda: step(batch), steps)
            model.wait()
            return seconds

        return sample_raw

    def sample_session() -> float:
        with eager_session(model, "standard", directory) as session:
            for _ in range(WARMUP_STEPS):
                session.call(step, batch)
            call, should_stop = session.call, session.should_stop
            start = time.perf_counter()
            for _ in range(steps):
                call(step, batch)
            seconds = (time.perf_counter() - start) / steps
            assert not should_stop()
            model.wait()
        return seconds

    return sample_session


def eager_sampler(model: EagerModel, hook_set: str | None, directory: str, steps: int) -> Any:
    """A function timing one sample: a raw loop (`hook_set` None) or a new session."""
    if hook_set is None:

        def sample_raw() -> float:
            seconds = timed_calls(model.step, steps)
            model.wait()
            return seconds

        return sample_raw

    def sample_session() -> float:
        with eager_session(model, hook_set, directory) as session:
            for _ in range(WARMUP_STEPS):
                session.run(model.step)
            seconds = timed_loop(session, model.step, steps)
            model.wait()
        return seconds

    return sample_session


@contextlib.contextmanager
def eager_model() -> Iterator[EagerModel]:
    """The eager model, its step traced inside a recording session."""
    with tempfile.TemporaryDirectory() as directory:
        model = EagerModel()
        with eager_session(model, "standard", directory) as session:
            session.run(model.step)
            session.call(model.step_on, model.batch)
        yield model


def run(steps: int, rounds: int) -> dict[str, Any]:
    """Measures every variant; returns the results (also written by `main`)."""
    with graph_variants(HOOK_SETS) as variants:
        graph = interleave(
            {name: (lambda v=v: v.sample(steps)) for name, v in variants.items()}, rounds
        )
    with eager_model() as model, tempfile.TemporaryDirectory() as root:
        samplers = {"eager/raw": eager_sampler(model, None, root, steps)}
        for hook_set in HOOK_SETS:
            directory = os.path.join(root, hook_set)
            samplers[f"eager/monsession/{hook_set}"] = eager_sampler(
                model, hook_set, directory, steps
            )
        samplers["eager/raw+duties"] = eager_duties_sampler(
            model, os.path.join(root, "raw+duties"), steps
        )
        samplers["eager/raw-argument"] = eager_argument_sampler(model, False, root, steps)
        samplers["eager/monsession/standard-argument"] = eager_argument_sampler(
            model, True, os.path.join(root, "standard-argument"), steps
        )
        eager = interleave(samplers, rounds)
    samples = {**graph, **eager}
    ratios: dict[str, float] = {}
    for hook_set in HOOK_SETS:
        ms, tf_ = f"graph/monsession/{hook_set}", f"graph/tf/{hook_set}"
        ratios[f"graph/{hook_set}: monsession / raw"] = paired_ratio(samples, ms, "graph/raw")
        ratios[f"graph/{hook_set}: monsession / tf"] = paired_ratio(samples, ms, tf_)
        ratios[f"graph/{hook_set}: tf / raw"] = paired_ratio(samples, tf_, "graph/raw")
        ratios[f"eager/{hook_set}: monsession / raw"] = paired_ratio(
            samples, f"eager/monsession/{hook_set}", "eager/raw"
        )
    ratios["eager/standard: monsession / raw+duties"] = paired_ratio(
        samples, "eager/monsession/standard", "eager/raw+duties"
    )
    ratios["eager/standard, batch as argument: monsession / raw"] = paired_ratio(
        samples, "eager/monsession/standard-argument", "eager/raw-argument"
    )
    return {
        "steps_per_sample": steps,
        "rounds": rounds,
        "median_step_us": medians_us(samples),
        "ratios": ratios,
    }


def environment() -> dict[str, Any]:
    return {"tensorflow": tf.__version__, "cpus": os.cpu_count()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300, help="steps per sample")
    parser.add_argument("--rounds", type=int, default=31, help="interleaved rounds")
    args = parser.parse_args()
    result = {**run(args.steps, args.rounds), **environment()}
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
