"""The training programs of the matrix, forked from one process that imported everything.

Usage: python child.py JOBS_JSON. Importing TensorFlow, Keras and the hook
families takes most of a small program's time, so this process imports
them once, runs nothing, and forks one real subprocess per job (two at a
time): each child starts TensorFlow's runtime afresh, runs its job and
exits, or dies by SIGKILL when its plan says so. A job is `{"driver",
"plans", "after", "downtime"?}`: `after` lists the jobs that must have ended
first, `downtime` seconds before it starts (a restart after a kill). A plan
is a run, `{"dir", "last_steps", "kill_at"?, "sigterm_at"?, "abort_at"?,
"tf_hooks"?, "earlystop"?}`: its sessions train to each of `last_steps` in turn (a clean
resume is two), with everything recorded in `dir` (see records.py), from a
`begin` record at its start to an `exit` record with the job's exit status
(-9: SIGKILL, -15: SIGTERM), written here once the job ended. An error ends its run only:
it is recorded, and the matrix shows it in the cells of that run. Prints
`<job index> <exit status>` per job.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
import traceback

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import keras  # noqa: F401  (imported before forking, not run)
import monsession_hooks_earlystop._early_stopping  # noqa: F401
import tensorflow as tf  # noqa: F401

import monsession
import monsession_hooks_keras  # noqa: F401
import monsession_hooks_mlflow._mlflow_hook  # noqa: F401
from driver_matrix import drivers, records, rows, table

PARALLEL = 2


def run_job(job: dict) -> None:
    """Runs in the forked child."""
    spec = table.DRIVERS[job["driver"]]
    records.capture_logs()
    drivers.order()  # Eagerly, before any graph-mode program.
    for plan in job["plans"]:
        records.open_records(plan["dir"])
        records.record("begin", pid=os.getpid())
        for last_step in plan["last_steps"]:
            try:
                drivers.RUNNERS[spec.mode](spec, plan, last_step)
            except Exception as error:  # Recorded: the cells of this run show it.
                records.record("error", error=f"{type(error).__name__}: {error}")
                traceback.print_exc()
                break


def _fork(job: dict) -> int:
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            run_job(job)
        except BaseException:
            traceback.print_exc()
            code = 1
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    return pid


def main() -> None:
    for name in ("EarlyStoppingHook", "ProgressBarHook", "SummarySaverHook", "MlflowHook"):
        getattr(monsession.hooks, name)  # Resolve the families before forking.
    # MLflow is imported and its SQLite tables made once, here, not in every training.
    template = tempfile.mkdtemp(prefix="driver-matrix-mlflow-")
    rows.make_mlflow_template(template)
    try:
        _run_jobs(json.loads(sys.argv[1]))
    finally:
        shutil.rmtree(template, ignore_errors=True)


def _run_jobs(jobs: list[dict]) -> None:
    waiting = list(range(len(jobs)))
    ended: dict[int, float] = {}  # Job index: when it ended.
    running: dict[int, int] = {}

    def ready(index: int) -> bool:
        after = jobs[index]["after"]
        if not all(i in ended for i in after):
            return False
        since = max((ended[i] for i in after), default=0.0)
        return time.time() >= since + jobs[index].get("downtime", 0.0)

    while waiting or running:
        for index in [i for i in waiting if ready(i)]:
            if len(running) >= PARALLEL:
                break
            waiting.remove(index)
            running[_fork(jobs[index])] = index
        pid, status = os.waitpid(-1, os.WNOHANG) if running else (0, 0)
        if pid == 0:
            time.sleep(0.05)
            continue
        index = running.pop(pid)
        ended[index] = time.time()
        code = os.waitstatus_to_exitcode(status)
        for plan in jobs[index]["plans"]:
            records.open_records(plan["dir"])
            records.record("exit", status=code)
        print(index, code, flush=True)


if __name__ == "__main__":
    main()
