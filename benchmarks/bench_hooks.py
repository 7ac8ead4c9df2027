"""How the per-step cost of a monitored session grows with the number of hooks, in one run.

Sessions with 0, 1, 10 and 100 idle hooks (each overrides `before_run` to
return `None` and `after_run` to do nothing, like a periodic hook between its
triggers) run the small model of `bench_core`, in graph mode (monsession and,
for reference, `tf.compat.v1.train.MonitoredSession`) and in eager mode.
For scale, ``graph/raw+calls/100`` is a hand-written `sess.run` loop that
calls 100 idle hooks' `before_run` and `after_run` around each run, and
``eager/raw+calls/100`` the same around each call of the eager step: what
the calls alone cost, added over the same loop without them.
Sessions stay open; variants are interleaved in rotating order over several
rounds. Reported: the median per-step time, and the microseconds per step
that the hooks add over the same session without hooks (the median over
rounds of the difference of two samples taken in the same round), and
each target (issues 38 and 51: 1 idle hook adds at most 2 µs per step in
both modes; 100 at most 25 µs in graph mode, about the cost of 200 Python
method calls, and 20 µs in eager mode) with whether it is met.

    python benchmarks/bench_hooks.py [--steps 300] [--rounds 31]

Writes benchmarks/results/hooks.json.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import pathlib
import tempfile
from collections.abc import Callable, Iterator
from typing import Any

import bench_core
import tensorflow as tf

import monsession

RESULTS = pathlib.Path(__file__).parent / "results" / "hooks.json"
COUNTS = (0, 1, 10, 100)
TF_COUNTS = (0, 100)
# Mode -> idle hooks -> the most microseconds per step they may add (issues 38 and 51).
TARGET_US = {"graph": {1: 2.0, 100: 25.0}, "eager": {1: 2.0, 100: 20.0}}


def idle_hooks(base: type, count: int) -> list[Any]:
    """`count` hooks that ask for nothing and do nothing."""

    class IdleHook(base):  # type: ignore[misc, valid-type]
        def before_run(self, run_context: Any) -> None:
            return None

        def after_run(self, run_context: Any, run_values: Any) -> None:
            pass

    return [IdleHook() for _ in range(count)]


def graph_idle(count: int) -> Callable[[str, Any, Any, str], list[Any]]:
    def hooks(api: str, loss: Any, summary: Any, directory: str) -> list[Any]:
        base = tf.compat.v1.train.SessionRunHook if api == "tf" else monsession.SessionRunHook
        return idle_hooks(base, count)

    return hooks


@contextlib.contextmanager
def graph_sessions() -> Iterator[dict[str, bench_core.GraphVariant]]:
    with tempfile.TemporaryDirectory() as directory:
        variants: dict[str, bench_core.GraphVariant] = {}
        try:
            variants["graph/raw"] = bench_core.GraphVariant("raw", None, directory)
            for api, counts in (("monsession", COUNTS), ("tf", TF_COUNTS)):
                for count in counts:
                    variants[f"graph/{api}/{count}"] = bench_core.GraphVariant(
                        api, graph_idle(count), directory
                    )
            yield variants
        finally:
            for variant in variants.values():
                variant.close()


def calls_around(run: Callable[[], Any], count: int) -> Callable[[], None]:
    """`run` with `count` idle hooks' two methods called around it, as a hand-written loop would."""
    hooks = idle_hooks(monsession.SessionRunHook, count)

    def step() -> None:
        for hook in hooks:
            hook.before_run(None)
        run()
        for hook in hooks:
            hook.after_run(None, None)

    return step


def graph_calls_around(raw: bench_core.GraphVariant, count: int) -> Callable[[int], float]:
    """Samples a `sess.run` loop that calls `count` idle hooks' two methods around each run."""

    def sample(steps: int) -> float:
        run, train = raw.session.run, raw.train
        with raw.graph.as_default():
            return bench_core.timed_calls(calls_around(lambda: run(train), count), steps)

    return sample


@contextlib.contextmanager
def eager_sessions(model: bench_core.EagerModel) -> Iterator[dict[str, Any]]:
    with contextlib.ExitStack() as stack:
        sessions = {
            f"eager/monsession/{count}": stack.enter_context(
                monsession.MonitoredSession(hooks=idle_hooks(monsession.SessionRunHook, count))
            )
            for count in COUNTS
        }
        for session in sessions.values():
            for _ in range(bench_core.WARMUP_STEPS):
                session.run(model.step)
        yield sessions


def run(steps: int, rounds: int) -> dict[str, Any]:
    """Measures every variant; returns the results (also written by `main`)."""
    with graph_sessions() as variants:
        graph_samplers = {name: (lambda v=v: v.sample(steps)) for name, v in variants.items()}
        with_calls = graph_calls_around(variants["graph/raw"], COUNTS[-1])
        graph_samplers[f"graph/raw+calls/{COUNTS[-1]}"] = lambda: with_calls(steps)
        samples = bench_core.interleave(graph_samplers, rounds)
    with bench_core.eager_model() as model, eager_sessions(model) as sessions:

        def sampler(session: Any) -> Callable[[], float]:
            def sample() -> float:
                seconds = bench_core.timed_loop(session, model.step, steps)
                model.wait()
                return seconds

            return sample

        samplers = {"eager/raw": bench_core.eager_sampler(model, None, "", steps)}
        eager_calls = calls_around(model.step, COUNTS[-1])

        def sample_eager_calls() -> float:
            seconds = bench_core.timed_calls(eager_calls, steps)
            model.wait()
            return seconds

        samplers[f"eager/raw+calls/{COUNTS[-1]}"] = sample_eager_calls
        samplers.update({name: sampler(session) for name, session in sessions.items()})
        samples.update(bench_core.interleave(samplers, rounds))
    added: dict[str, float] = {}
    for prefix, counts in (
        ("graph/monsession", COUNTS),
        ("graph/tf", TF_COUNTS),
        ("eager/monsession", COUNTS),
    ):
        for count in counts[1:]:
            added[f"{prefix}/{count}"] = bench_core.paired_difference_us(
                samples, f"{prefix}/{count}", f"{prefix}/0"
            )
    for mode in ("graph", "eager"):
        calls = f"{mode}/raw+calls/{COUNTS[-1]}"
        added[calls] = bench_core.paired_difference_us(samples, calls, f"{mode}/raw")
    return {
        "steps_per_sample": steps,
        "rounds": rounds,
        "median_step_us": bench_core.medians_us(samples),
        "added_us_per_step": added,
        "targets": {
            name: {"measured": added[name], "target": limit, "met": added[name] <= limit}
            for mode in ("graph", "eager")
            for count, limit in TARGET_US[mode].items()
            for name in [f"{mode}/monsession/{count}"]
        },
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
