"""The per-step ratios of two revisions side by side, in one run.

    python benchmarks/compare_revisions.py BASE [THIS] [--bench core debug fused] [--repeats 3]

For a change that must not change speed (a refactor): each benchmark runs
alternately from a worktree of BASE and of THIS (default: HEAD),
`--repeats` times each, in fresh processes that import monsession from that
tree's sources (`PYTHONPATH`; the installed distributions still name the
plugins). Each run computes its own ratios side by side (see the
benchmark); reported is the median of each ratio over the repeats, for both
trees, their quotient, and each tree's range over the repeats (the spread).
The checkout's own results files are untouched.

Writes benchmarks/results/compare_revisions.json.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from typing import Any

HERE = pathlib.Path(__file__).parent
REPO = HERE.parent
RESULTS = HERE / "results" / "compare_revisions.json"
SOURCES = (
    "core",
    "hooks-checkpoint",
    "hooks-summary",
    "hooks-logging",
    "hooks-debug",
    "hooks-keras",
)


def _debug_entries(result: dict[str, Any]) -> dict[str, float]:
    """`bench_debug`'s ratios to the session without the hook, and the µs per step that
    fetching the loss adds, per executor."""
    return {
        f"{executor}/{name}": value
        for executor, measured in result["executors"].items()
        for kind in ("nan_hook_overhead_over_session", "added_us_per_step")
        for name, value in measured.get(kind, {}).items()
    }


# Each benchmark: its quick arguments and the entries of its JSON compared
# (bench_fused takes a multiple of 1000 steps: its checkpoints every 1000).
BENCHES: dict[str, tuple[list[str], Callable[[dict[str, Any]], dict[str, float]]]] = {
    "core": (["--steps", "200", "--rounds", "9"], lambda result: result["ratios"]),
    "hooks": (["--steps", "200", "--rounds", "9"], lambda result: result["added_us_per_step"]),
    "fused": (["--steps", "1000", "--rounds", "5"], lambda result: result["ratios"]),
    "debug": (["--steps", "100", "--rounds", "11"], _debug_entries),
}


def _run(tree: pathlib.Path, bench: str) -> dict[str, float]:
    """One run of `bench` from `tree`'s sources; the entries it compares."""
    arguments, entries = BENCHES[bench]
    path = os.pathsep.join(str(tree / source / "src") for source in SOURCES)
    env = {**os.environ, "PYTHONPATH": path, "TF_CPP_MIN_LOG_LEVEL": "2"}
    script = tree / "benchmarks" / f"bench_{bench}.py"
    done = subprocess.run(
        [sys.executable, str(script), *arguments],
        env=env,
        cwd=tree,
        capture_output=True,
        text=True,
        check=True,
    )
    printed = done.stdout[done.stdout.index("{") :]
    return {key: float(value) for key, value in entries(json.loads(printed)).items()}


def _compared(base: list[dict[str, float]], this: list[dict[str, float]]) -> dict[str, Any]:
    """Each entry: the median of each tree, their quotient, and each tree's range (the spread)."""
    compared: dict[str, Any] = {}
    for key in this[0]:
        if key not in base[0]:
            continue
        base_values, this_values = [run[key] for run in base], [run[key] for run in this]
        base_median, this_median = statistics.median(base_values), statistics.median(this_values)
        compared[key] = {
            "base": round(base_median, 3),
            "this": round(this_median, 3),
            "this / base": round(this_median / base_median, 3) if base_median else None,
            "base range": [round(min(base_values), 3), round(max(base_values), 3)],
            "this range": [round(min(this_values), 3), round(max(this_values), 3)],
        }
    return compared


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("base", help="the revision to compare with, e.g. a commit of main")
    parser.add_argument("this", nargs="?", default="HEAD", help="the revision measured against it")
    parser.add_argument("--bench", nargs="+", choices=sorted(BENCHES), default=sorted(BENCHES))
    parser.add_argument("--repeats", type=int, default=3, help="runs per tree and benchmark")
    args = parser.parse_args()
    report: dict[str, object] = {
        "base": args.base,
        "this": args.this,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "repeats": args.repeats,
    }
    with tempfile.TemporaryDirectory() as parent:
        trees = {name: pathlib.Path(parent) / name for name in ("base", "this")}
        for name, tree in trees.items():
            revision = getattr(args, name)
            subprocess.run(
                ["git", "-C", str(REPO), "worktree", "add", "--detach", "-q", str(tree), revision],
                check=True,
            )
        try:
            for bench in args.bench:
                runs: dict[str, list[dict[str, float]]] = {"base": [], "this": []}
                for _ in range(args.repeats):  # Alternating: both trees see the same noise.
                    for name, tree in trees.items():
                        runs[name].append(_run(tree, bench))
                report[bench] = _compared(runs["base"], runs["this"])
                print(bench, json.dumps(report[bench], indent=2), flush=True)
        finally:
            for tree in trees.values():
                subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(tree)])
    RESULTS.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
