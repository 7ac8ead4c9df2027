"""One process of a cluster run: python child.py PLAN_JSON, or forked by `child.py --serve`.

A plan is `{"column", "role", "roles", "servers", "ports", "dir",
"checkpoint_dir", "last_step", "kill_at"?, "sigterm_at"?, "abort_at"?}`:
the process runs its column's program (programs.py) as `role`, recording
into `dir` (see driver_matrix/records.py) from a `begin` record (once
everything is imported) on. An error is recorded, printed, and ends the
process with status 1. The test records each process's exit status.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import traceback

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
_TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The cluster matrix's package, and the single-process matrix's (examples/tests).
sys.path[:0] = [_TESTS, os.path.join(os.path.dirname(os.path.dirname(_TESTS)), "tests")]

import keras  # noqa: E402,F401  (imported before forking, not run)
import tensorflow as tf  # noqa: E402,F401
from driver_matrix import records  # noqa: E402

import monsession  # noqa: E402
from cluster_matrix import forks, programs  # noqa: E402


def run(plan: dict) -> None:
    """Runs one process's plan, then ends the process.

    What the hooks log (TensorFlow's logger) and what the session logs of
    itself (monsession's: its restores, their times) are both recorded."""
    records.capture_logs()
    session_logger = logging.getLogger("monsession")
    session_logger.setLevel(logging.INFO)
    session_logger.addHandler(records.LogRecords())
    records.open_records(plan["dir"])
    records.record("begin", pid=os.getpid(), role=plan["role"])
    code = 0
    try:
        programs.PROGRAMS[plan["column"]](plan)
    except Exception as error:  # Recorded: the cells of this run show it.
        records.record("error", error=f"{type(error).__name__}: {error}")
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    # TensorFlow's collective runtime can hang at interpreter shutdown: the
    # program has flushed everything it wrote.
    os._exit(code)


def main() -> None:
    for name in ("ProgressBarHook", "SummarySaverHook", "CheckpointSaverHook"):
        getattr(monsession.hooks, name)  # Resolve the families once, before any fork.
    if sys.argv[1] == "--serve":
        forks.serve(run)
    else:
        run(json.loads(sys.argv[1]))


if __name__ == "__main__":
    main()
