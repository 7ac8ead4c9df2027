"""What the step service saves: the standard hook set of issue 14, in one run.

The set: `MonitoredTrainingSession(checkpoint_dir=..., save_summaries_steps=100,
save_checkpoint_steps=1000, log_step_count_steps=100)` with `StopAtStepHook`
and `LoggingTensorHook` every 100 steps, on the small model of `bench_core`.

* Per-step time, side by side: graph mode raw `sess.run(train_op)` vs TF's
  `MonitoredTrainingSession` vs monsession's; eager mode a raw loop calling the
  same `tf.function` vs monsession (interleaved rounds, paired ratios).
* Eager host reads per step, counted with `monsession.testing.count_host_reads`
  on every step: those on steps where no hook acts must be 0.
* Graph `Session` runs per step with `CheckpointSaverHook(save_steps=N)`,
  monsession vs TensorFlow, counted on a real session (single-threaded, so
  that TensorFlow's global-step read never races the increment).

    python benchmarks/bench_step_service.py [--steps 300] [--rounds 31]

Writes benchmarks/results/step_service.json.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pathlib
import tempfile
from collections.abc import Callable, Iterator
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import bench_core
import tensorflow as tf

import monsession
from monsession import hooks as ms_hooks

RESULTS = pathlib.Path(__file__).parent / "results" / "step_service.json"
EVERY = 100  # The period of the summary, step-counter and logging hooks.


def training_session(api: Any, loss: Any, directory: str, **extra: Any) -> Any:
    """The issue's standard set, with `api` (tf.compat.v1.train or monsession)."""
    hooks_module = tf.compat.v1.train if api is not monsession else ms_hooks
    hooks = [
        api.StopAtStepHook(last_step=bench_core.NEVER),
        hooks_module.LoggingTensorHook({"loss": loss}, every_n_iter=EVERY),
    ]
    return api.MonitoredTrainingSession(
        checkpoint_dir=directory,
        save_summaries_steps=EVERY,
        save_checkpoint_steps=1000,
        save_checkpoint_secs=None,
        log_step_count_steps=EVERY,
        hooks=hooks,
        **extra,
    )


class GraphSet:
    """One graph variant ("raw", "tf" or "monsession") in its own graph, kept open."""

    def __init__(self, api: str, directory: str) -> None:
        self.graph = tf.Graph()
        with self.graph.as_default():
            loss, self.train, _ = bench_core.graph_model()
            self.raw = api == "raw"
            if self.raw:
                self.session: Any = tf.compat.v1.Session()
                self.session.run(tf.compat.v1.global_variables_initializer())
            else:
                module: Any = tf.compat.v1.train if api == "tf" else monsession
                self.session = training_session(module, loss, directory)
            self.sample(bench_core.WARMUP_STEPS)

    def sample(self, steps: int) -> float:
        with self.graph.as_default():
            if self.raw:
                run, train = self.session.run, self.train
                return bench_core.timed_calls(lambda: run(train), steps)
            return bench_core.timed_loop(self.session, self.train, steps)

    def close(self) -> None:
        with self.graph.as_default():
            self.session.close()


@contextlib.contextmanager
def graph_sets(root: str) -> Iterator[dict[str, GraphSet]]:
    variants: dict[str, GraphSet] = {}
    try:
        for api in ("raw", "tf", "monsession"):
            variants[f"graph/{api}"] = GraphSet(api, os.path.join(root, f"graph-{api}"))
        yield variants
    finally:
        for variant in variants.values():
            variant.close()
        tf.compat.v1.summary.FileWriterCache.clear()


def eager_session(model: bench_core.EagerModel, directory: str) -> Any:
    scaffold = monsession.Scaffold(saver=model.checkpoint)
    return training_session(monsession, "loss", directory, scaffold=scaffold)


def eager_samplers(
    model: bench_core.EagerModel, root: str, steps: int
) -> dict[str, Callable[[], float]]:
    def sample_session() -> float:
        with eager_session(model, os.path.join(root, "eager")) as session:
            for _ in range(bench_core.WARMUP_STEPS):
                session.run(model.step)
            seconds = bench_core.timed_loop(session, model.step, steps)
            model.wait()
        return seconds

    return {
        "eager/raw": bench_core.eager_sampler(model, None, root, steps),
        "eager/monsession": sample_session,
    }


def eager_host_reads(model: bench_core.EagerModel, root: str, steps: int) -> dict[str, Any]:
    """Host reads on each step of the eager set, split by whether some hook acts."""
    acting: list[int] = []
    idle: list[int] = []
    with eager_session(model, os.path.join(root, "reads")) as session:
        first = int(model.global_step.numpy()) + 1
        for offset in range(steps):
            with monsession.testing.count_host_reads() as reads:
                session.run(model.step)
            step = first + offset
            # Hooks act on the first step of a session, then every EVERY local
            # steps (logging) or global steps (summaries, step counter), and
            # every 1000 steps after the checkpoint saved when it started.
            hooks_act = offset % EVERY == 0 or step % EVERY == 0 or (offset + 1) % 1000 == 0
            (acting if hooks_act else idle).append(reads.count)
    return {
        "steps": steps,
        "idle_steps": len(idle),
        "reads_on_idle_steps": sum(idle),
        "acting_steps": len(acting),
        "reads_on_acting_steps": sum(acting),
        "reads_per_step": round((sum(idle) + sum(acting)) / steps, 4),
    }


class CountingSession(tf.compat.v1.Session):
    """A real single-threaded session counting its runs (nested runs count once)."""

    def __init__(self) -> None:
        config = tf.compat.v1.ConfigProto(
            inter_op_parallelism_threads=1, intra_op_parallelism_threads=1
        )
        super().__init__(config=config)
        self.runs = 0
        self._depth = 0

    def _counted(self, function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        self.runs += self._depth == 0
        self._depth += 1
        try:
            return function(*args, **kwargs)
        finally:
            self._depth -= 1

    def _counting(self, made: Callable[..., Any]) -> Callable[..., Any]:
        return lambda *args, **kwargs: self._counted(made, *args, **kwargs)

    def run(self, *args: Any, **kwargs: Any) -> Any:
        return self._counted(super().run, *args, **kwargs)

    def make_callable(self, *args: Any, **kwargs: Any) -> Any:
        return self._counting(super().make_callable(*args, **kwargs))

    def _make_callable_from_options(self, *args: Any, **kwargs: Any) -> Any:
        return self._counting(super()._make_callable_from_options(*args, **kwargs))


def counting_creator(api: Any) -> Any:
    """A session creator of `api` making one initialized `CountingSession`."""

    class Creator(api.SessionCreator):  # type: ignore[misc, name-defined]
        session: CountingSession

        def create_session(self) -> Any:
            self.session = CountingSession()
            self.session.run(tf.compat.v1.global_variables_initializer())
            return self.session

    return Creator()


def graph_session_runs(root: str, steps: int, save_steps: int) -> dict[str, float]:
    """Session runs per step with CheckpointSaverHook(save_steps), TF vs monsession.

    Counted step by step: the mean over all steps, and the most on a step
    that does not save (global step after the run not a multiple of
    `save_steps`).
    """
    runs: dict[str, float] = {}
    for name, api, hook_class in (
        ("tf", tf.compat.v1.train, tf.compat.v1.train.CheckpointSaverHook),
        ("monsession", monsession, ms_hooks.CheckpointSaverHook),
    ):
        creator = counting_creator(api)
        per_step: list[tuple[int, int]] = []  # (global step after the run, runs)
        with tf.Graph().as_default():
            _, train, _ = bench_core.graph_model()
            directory = os.path.join(root, f"runs-{name}")
            saver = tf.compat.v1.train.Saver()
            hook = hook_class(directory, save_steps=save_steps, saver=saver)
            with api.MonitoredSession(session_creator=creator, hooks=[hook]) as session:
                for step in range(1, steps + 1):
                    before = creator.session.runs
                    session.run(train)
                    per_step.append((step, creator.session.runs - before))
        runs[f"{name}/runs_per_step"] = round(sum(count for _, count in per_step) / steps, 3)
        runs[f"{name}/most_runs_on_a_step_without_save"] = max(
            count for step, count in per_step if step % save_steps
        )
    return runs


def run(steps: int, rounds: int) -> dict[str, Any]:
    """Measures every variant; returns the results (also written by `main`)."""
    with tempfile.TemporaryDirectory() as root:
        with graph_sets(root) as variants:
            samples = bench_core.interleave(
                {name: (lambda v=v: v.sample(steps)) for name, v in variants.items()}, rounds
            )
        with bench_core.eager_model() as model:
            samples.update(bench_core.interleave(eager_samplers(model, root, steps), rounds))
            reads = eager_host_reads(model, root, 1000)
        session_runs = graph_session_runs(root, 200, save_steps=50)
    ratios = {
        "graph: monsession / raw": bench_core.paired_ratio(
            samples, "graph/monsession", "graph/raw"
        ),
        "graph: monsession / tf": bench_core.paired_ratio(samples, "graph/monsession", "graph/tf"),
        "graph: tf / raw": bench_core.paired_ratio(samples, "graph/tf", "graph/raw"),
        "eager: monsession / raw": bench_core.paired_ratio(
            samples, "eager/monsession", "eager/raw"
        ),
    }
    return {
        "steps_per_sample": steps,
        "rounds": rounds,
        "median_step_us": bench_core.medians_us(samples),
        "ratios": ratios,
        "eager_host_reads": reads,
        "graph_session_runs": session_runs,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300, help="steps per sample")
    parser.add_argument("--rounds", type=int, default=31, help="interleaved rounds")
    args = parser.parse_args()
    result = {**run(args.steps, args.rounds), **bench_core.environment()}
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
