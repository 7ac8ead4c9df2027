"""Per-step cost of core's monitored session, side by side, in one run.

Graph mode: a raw `sess.run(train_op)` loop vs `tf.compat.v1.train.MonitoredSession`
vs `monsession.MonitoredSession`, both sessions with StopAtStepHook and a hook
fetching the loss every step. Eager mode: a raw loop calling the same
`tf.function` vs monsession with StopAtStepHook and a hook fetching `"loss"`
every 100 steps. Variants are interleaved over several rounds; medians of the
per-step time are compared as ratios.

    python benchmarks/bench_core.py [--steps 2000] [--rounds 7]

Writes benchmarks/results/core.json.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf

import monsession

RESULTS = pathlib.Path(__file__).parent / "results" / "core.json"


def make_fetch_hook(base, args_type, fetch, every_n):
    class FetchEveryN(base):
        def __init__(self):
            self.calls = 0
            self.last = None

        def before_run(self, run_context):
            self.calls += 1
            return args_type(fetch) if self.calls % every_n == 0 else None

        def after_run(self, run_context, run_values):
            if run_values.results is not None:
                self.last = run_values.results

    return FetchEveryN()


def graph_model():
    global_step = tf.compat.v1.train.get_or_create_global_step()
    x = tf.random.normal([32, 16], seed=1)
    w = tf.compat.v1.get_variable("w", [16, 1])
    loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - 1.0))
    train = tf.compat.v1.train.GradientDescentOptimizer(0.01).minimize(
        loss, global_step=global_step
    )
    return loss, train


def time_graph(variant, steps):
    with tf.Graph().as_default():
        loss, train = graph_model()
        if variant == "raw":
            with tf.compat.v1.Session() as sess:
                sess.run(tf.compat.v1.global_variables_initializer())
                for _ in range(50):
                    sess.run(train)
                start = time.perf_counter()
                for _ in range(steps):
                    sess.run(train)
                return (time.perf_counter() - start) / steps
        api = tf.compat.v1.train if variant == "tensorflow" else monsession
        hooks = [
            api.StopAtStepHook(last_step=steps + 50),
            make_fetch_hook(api.SessionRunHook, api.SessionRunArgs, loss, every_n=1),
        ]
        with api.MonitoredSession(hooks=hooks) as sess:
            for _ in range(50):
                sess.run(train)
            start = time.perf_counter()
            count = 0
            while not sess.should_stop():
                sess.run(train)
                count += 1
            return (time.perf_counter() - start) / count


def time_eager(variant, steps):
    tf.compat.v1.reset_default_graph()
    global_step = monsession.get_or_create_global_step()
    x = tf.random.normal([32, 16], seed=1)
    w = tf.Variable(tf.random.normal([16, 1], seed=2))

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - 1.0))
        w.assign_sub(0.01 * tape.gradient(loss, w))
        global_step.assign_add(1)
        return {"loss": loss}

    for _ in range(50):
        step()
    if variant == "raw":
        start = time.perf_counter()
        for _ in range(steps):
            step()
        float(global_step.numpy())  # Wait for the device like the session's last step does.
        return (time.perf_counter() - start) / steps
    last = int(global_step.numpy()) + steps
    hooks = [
        monsession.StopAtStepHook(last_step=last),
        make_fetch_hook(monsession.SessionRunHook, monsession.SessionRunArgs, "loss", 100),
    ]
    with monsession.MonitoredSession(hooks=hooks) as sess:
        start = time.perf_counter()
        count = 0
        while not sess.should_stop():
            sess.run(step)
            count += 1
        return (time.perf_counter() - start) / count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    graph_variants = ["raw", "tensorflow", "monsession"]
    eager_variants = ["raw", "monsession"]
    samples: dict[str, list[float]] = {f"graph/{v}": [] for v in graph_variants}
    samples.update({f"eager/{v}": [] for v in eager_variants})
    for round_index in range(args.rounds):
        order = graph_variants if round_index % 2 == 0 else graph_variants[::-1]
        for variant in order:
            samples[f"graph/{variant}"].append(time_graph(variant, args.steps))
        order = eager_variants if round_index % 2 == 0 else eager_variants[::-1]
        for variant in order:
            samples[f"eager/{variant}"].append(time_eager(variant, args.steps))
    medians = {name: statistics.median(values) for name, values in samples.items()}
    ratios = {
        "graph: monsession / raw sess.run": medians["graph/monsession"] / medians["graph/raw"],
        "graph: monsession / tf.compat.v1 MonitoredSession": medians["graph/monsession"]
        / medians["graph/tensorflow"],
        "graph: tf.compat.v1 MonitoredSession / raw": medians["graph/tensorflow"]
        / medians["graph/raw"],
        "eager: monsession / raw tf.function loop": medians["eager/monsession"]
        / medians["eager/raw"],
    }
    result = {
        "steps_per_sample": args.steps,
        "rounds": args.rounds,
        "median_step_us": {k: round(v * 1e6, 2) for k, v in medians.items()},
        "ratios": {k: round(v, 3) for k, v in ratios.items()},
        "tensorflow": tf.__version__,
        "cpus": os.cpu_count(),
    }
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
