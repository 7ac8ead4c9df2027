"""Start-up cost: `import monsession` and `monsession plugins`, in fresh processes.

* ``import_ms``: the time `import monsession` takes inside a fresh
  interpreter (measured around the import statement);
* ``plugins_ms``: the wall time of a whole `monsession plugins` process (the
  interpreter start, the import, discovering and listing every installed
  family), run as ``python -m monsession plugins``;
* ``python_ms``: the wall time of ``python -c pass``, for reference.

Each process also checks that TensorFlow was not imported and fails the
benchmark if it was. Variants are interleaved; medians are reported.

    python benchmarks/bench_startup.py [--rounds 15]

Writes benchmarks/results/startup.json.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import time
from typing import Any

RESULTS = pathlib.Path(__file__).parent / "results" / "startup.json"

_NO_TENSORFLOW = (
    "import sys\n"
    "if 'tensorflow' in sys.modules:\n"
    "    raise SystemExit('{what} imported TensorFlow')\n"
)
_IMPORT = (
    "import time\n"
    "start = time.perf_counter()\n"
    "import monsession\n"
    "elapsed = time.perf_counter() - start\n"
    + _NO_TENSORFLOW.format(what="import monsession")
    + "print(elapsed)\n"
)
# `python -m monsession plugins`, then the TensorFlow check.
_PLUGINS = (
    "import runpy, sys\n"
    "sys.argv = ['monsession', 'plugins']\n"
    "try:\n"
    "    runpy.run_module('monsession', run_name='__main__', alter_sys=True)\n"
    "except SystemExit as done:\n"
    "    if done.code:\n"
    "        raise\n" + _NO_TENSORFLOW.format(what="monsession plugins")
)


def _python(code: str) -> tuple[float, str]:
    """Runs `code` in a fresh interpreter; returns (wall seconds, stdout)."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPROFILEIMPORTTIME"}
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False
    )
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"The benchmark process failed ({done.returncode}):\n{done.stderr}")
    return elapsed, done.stdout


def sample_import() -> float:
    return float(_python(_IMPORT)[1].strip())


def sample_plugins() -> float:
    elapsed, listing = _python(_PLUGINS)
    if "PLUGIN" not in listing:
        raise RuntimeError(f"`monsession plugins` printed no listing:\n{listing}")
    return elapsed


def sample_python() -> float:
    return _python("pass")[0]


def run(rounds: int) -> dict[str, Any]:
    """Measures every variant; returns the results (also written by `main`)."""
    samplers = {
        "import_ms": sample_import,
        "plugins_ms": sample_plugins,
        "python_ms": sample_python,
    }
    for sampler in samplers.values():
        sampler()  # Warm the file system caches.
    samples: dict[str, list[float]] = {name: [] for name in samplers}
    names = list(samplers)
    for round_index in range(rounds):
        shift = round_index % len(names)
        for name in names[shift:] + names[:shift]:
            samples[name].append(samplers[name]())
    return {
        "rounds": rounds,
        "median_ms": {name: round(statistics.median(v) * 1e3, 1) for name, v in samples.items()},
        "tensorflow_imported": False,  # Every sample checked it.
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15, help="interleaved rounds")
    args = parser.parse_args()
    result = run(args.rounds)
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
