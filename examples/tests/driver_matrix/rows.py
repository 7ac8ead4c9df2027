"""The hooks of the matrix: each row's hook(s), built for one run of one driver.

`Program` is what a driver gives the rows: fetches by role (graph tensors,
or names of the step's outputs in eager mode and under `fit`), the state to
save, the directory. `build_hooks` returns every applicable hook of one run,
installed together, in one order; TensorFlow's own hooks when `tf_hooks`.
The earlystop row stops its run early, so it runs alone (`earlystop_only`):
with the checkpoint saver and `StopAtStepHook`, as the others.
"""

from __future__ import annotations

import dataclasses
import io
import os
import select
import shutil
import signal
from typing import Any

import numpy as np
import tensorflow as tf

import monsession
from driver_matrix import checkpoints, keras_row, table
from driver_matrix.records import record

# How often each hook acts, in steps (the NaN probe's: how often NanTensorHook checks it
# under fused steps; every step otherwise). A run may set others (`build_hooks(periods=)`).
PERIODS = {
    "summary": 3,
    "step-counter": 4,
    "logging": 4,
    "progress": 2,
    "nan": table.SAVE_STEPS,
    "profiler": 20,
    "checkpoint": table.SAVE_STEPS,
}


@dataclasses.dataclass
class Program:
    directory: str
    fetch: dict[str, Any]  # "step", "w", "loss", "probe".
    variables: dict[str, Any]  # "step", "w", "count", "trained": read at a session's end.
    summary_op: Any = None
    scaffold: Any = None  # Eager: the scaffold whose Checkpoint is saved and restored.
    saver: Any = None  # fit: the Checkpoint CheckpointSaverHook saves.
    model: Any = None
    fused: bool = False

    def path(self, name: str) -> str:
        return os.path.join(self.directory, name)


class Trace(monsession.SessionRunHook):
    """Records where each session starts and, at its end, the trained state."""

    def __init__(self, program: Program, extra: Any = None) -> None:
        self._program = program
        self._extra = extra

    def after_create_session(self, session, coord):
        record("start", step=int(session.run(self._program.variables["step"])))

    def next_action(self, global_step):
        return monsession.NextAction()

    def end(self, session):
        values = session.run(self._program.variables)
        record(
            "final",
            step=int(values["step"]),
            w=float(values["w"]),
            count=int(values["count"]),
            # The batch each step trained (the rows of the steps not trained are -1).
            batches=[
                [i, *map(int, ids)]
                for i, ids in enumerate(np.asarray(values["trained"]))
                if ids[0] >= 0
            ],
            **(self._extra() if self._extra else {}),
        )


class Interrupt(monsession.SessionRunHook):
    """After the step that reaches `at` (first time only): SIGKILL, SIGTERM or a real AbortedError.

    With a `victim` pid, the SIGKILL hits that process (a `ParameterServerStrategy`
    worker, which runs no session, or a ps) and the hook returns once it is dead
    (`kill_and_wait`): the next op that needs it fails, whichever it is.

    `how` is `"kill"`, `"sigterm"` or `"abort"`. Each is recorded just before
    it happens. A hard kill loses at most the save in flight; the matrix
    kills once the background checkpoint write is complete (the checkpoint's
    public `sync()`), so that each restart resumes from one known checkpoint,
    the newest save, which the hook has not confirmed yet (see
    `test_driver_matrix.confirmed`). SIGTERM is the process's own signal: the
    session stops on it at this step boundary (`stop_on_signals`).
    """

    def __init__(self, program: Program, at: int, how: str, victim: int | None = None) -> None:
        if how not in ("kill", "sigterm", "abort"):
            raise ValueError(f"Interrupt: how must be 'kill', 'sigterm' or 'abort', got {how!r}")
        self._fetch, self._at, self._how, self._done = program.fetch["step"], at, how, False
        self._victim = victim  # The pid a kill hits, if not this process's (a ps worker).
        self._checkpoint = program.saver or getattr(program.scaffold, "saver", None)

    def next_action(self, global_step):
        ahead = self._at - global_step
        return monsession.NextAction(steps=ahead if ahead >= 1 and not self._done else None)

    def before_run(self, run_context):
        return monsession.SessionRunArgs(self._fetch)

    def after_run(self, run_context, run_values):
        step = int(run_values.results)
        if step != self._at or self._done:
            return
        self._done = True
        if self._how == "kill":
            if isinstance(self._checkpoint, tf.train.Checkpoint):
                self._checkpoint.sync()
        if self._how == "kill" and self._victim is not None:
            record("killed", step=step, pid=self._victim)
            kill_and_wait(self._victim)
            return
        if self._how == "kill":
            record("killed", step=step)
            os.kill(os.getpid(), signal.SIGKILL)
        if self._how == "sigterm":
            record("sigterm", step=step)
            os.kill(os.getpid(), signal.SIGTERM)
            return
        record("aborted", step=step)
        raise tf.errors.AbortedError(None, None, "driver matrix: injected preemption")


# Seconds a SIGKILLed process may take to end (its threads exit, its sockets close).
DEATH_SECS = 30.0


def kill_and_wait(pid: int) -> None:
    """SIGKILL to `pid`, another process than this one; returns once it has ended (a
    zombie: every file and socket it held is closed), or raises after `DEATH_SECS`."""
    handle = os.pidfd_open(pid)  # Readable once the process has ended.
    try:
        signal.pidfd_send_signal(handle, signal.SIGKILL)
        if not select.select([handle], [], [], DEATH_SECS)[0]:
            raise RuntimeError(f"Interrupt: process {pid} did not end within {DEATH_SECS} s")
    finally:
        os.close(handle)


class Fused(monsession.SessionRunHook):
    """Records the steps the session ran fused, silently, before each run with the hooks.

    It keeps the step's `step` output of the silent steps (`NextAction.keep`),
    which the session hands over stacked (`silent_outputs`) only for steps
    that ran inside its fused loop: single steps never have any.
    """

    def next_action(self, global_step):
        return monsession.NextAction(keep=("step",))

    def before_run(self, run_context):
        if run_context.silent_steps:
            steps = run_context.silent_outputs["step"].numpy().reshape([-1])
            record("fused", steps=[int(step) for step in steps])

    def after_run(self, run_context, run_values):
        return None


def _listener_base(tf_hooks: bool) -> type:
    if tf_hooks:
        return tf.compat.v1.train.CheckpointSaverListener
    from monsession_hooks_checkpoint import CheckpointSaverListener

    return CheckpointSaverListener


def _saves(directory: str, tf_hooks: bool) -> Any:
    class Saves(_listener_base(tf_hooks)):  # type: ignore[misc]
        """Records each `after_save` call, with the latest checkpoint read back then."""

        def after_save(self, session, global_step_value):
            weights = checkpoints.weights(tf.train.latest_checkpoint(directory))
            record("ckpt", step=int(global_step_value), w=weights)

    return Saves()


# The MLflow row's SQLite store: each run copies one made (and migrated) before forking;
# unset (no MLflow hook) in the runs of the cluster matrix, which use these builders too.
MLFLOW_TEMPLATE: list[str] = []


def make_mlflow_template(directory: str) -> None:
    """Creates the migrated SQLite store that every run's store starts as (child.py)."""
    from mlflow.tracking import MlflowClient

    path = os.path.join(directory, "mlflow-template.db")
    MlflowClient(tracking_uri=f"sqlite:///{path}").search_experiments()
    MLFLOW_TEMPLATE[:] = [path]


def mlflow_uri(directory: str) -> str:
    return "sqlite:///" + os.path.join(directory, "mlflow.db")


def _mlflow(program: Program) -> Any:
    path = program.path("mlflow.db")
    if not os.path.exists(path):  # A restart goes on with the store of the run.
        shutil.copyfile(MLFLOW_TEMPLATE[0], path)
    return monsession.hooks.MlflowHook(
        {"w": program.fetch["w"]}, every_n_steps=2, tracking_uri=mlflow_uri(program.directory)
    )


def build_hooks(
    program: Program,
    last_step: int,
    *,
    tf_hooks: bool = False,
    keras_callbacks: bool = False,
    mode: str = "eager",
    interrupt: tuple[int, str, int | None] | None = None,
    earlystop_only: bool = False,
    periods: dict[str, int] | None = None,
) -> tuple[list[Any], Any]:
    """The hooks of one session, and the step wrapper (`NanTensorHook.watch`) or None.

    `periods` overrides entries of `PERIODS`."""
    every = {**PERIODS, **(periods or {})}
    ns = tf.compat.v1.train if tf_hooks else monsession.hooks
    f = program.fetch
    hooks: list[Any] = [Fused()] if program.fused else []
    earlystop = None
    wrap = None
    if keras_callbacks:
        hooks.append(keras_row.build(program, epochs=table.LAST_STEP // 10))
    elif earlystop_only:
        from monsession_hooks_earlystop import EarlyStoppingHook

        earlystop = EarlyStoppingHook(
            f["loss"], patience=table.PATIENCE, every_n_steps=table.SAVE_STEPS
        )
        hooks.append(earlystop)
    else:
        if not tf_hooks:
            from monsession_hooks_logging import ProgressBarHook
        summary = {"summary_op": program.summary_op} if mode == "graph" else {}
        hooks += [
            ns.SummarySaverHook(
                save_steps=every["summary"], output_dir=program.path("summary"), **summary
            ),
            ns.StepCounterHook(
                every_n_steps=every["step-counter"], output_dir=program.path("steps")
            ),
            ns.LoggingTensorHook({"step": f["step"], "w": f["w"]}, every_n_iter=every["logging"]),
        ]
        if not tf_hooks:
            hooks.append(
                ProgressBarHook(
                    every_n_iter=every["progress"],
                    last_step=last_step,
                    file=io.StringIO(),
                    log_every_n_secs=0,
                )
            )
        if program.fused:
            # Checked every SAVE_STEPS steps of a session: at NAN_AT in every session.
            nan = ns.NanTensorHook(
                f["probe"], fail_on_nan_loss=False, check_every_n_steps=every["nan"]
            )
            wrap = nan.watch
        else:
            nan = ns.NanTensorHook(f["probe"], fail_on_nan_loss=False)
        hooks += [
            nan,
            ns.ProfilerHook(save_steps=every["profiler"], output_dir=program.path("profile")),
        ]
    listeners = [_saves(program.path("ckpt"), tf_hooks)]
    if MLFLOW_TEMPLATE and not (tf_hooks or keras_callbacks or earlystop_only):
        # Only in this matrix (child.py makes the store), not the cluster matrix's runs.
        # Before the checkpoint saver, as its README says: a checkpoint's state holds its step.
        mlflow = _mlflow(program)
        hooks.append(mlflow)
        listeners.append(mlflow.checkpoint_listener(program.path("ckpt")))
    saving: dict[str, Any] = {}
    if program.scaffold is not None:
        saving["scaffold"] = program.scaffold
    if program.saver is not None:
        saving["saver"] = program.saver
    hooks += [
        ns.CheckpointSaverHook(
            program.path("ckpt"),
            save_steps=every["checkpoint"],
            listeners=listeners,
            **saving,
        ),
        ns.StopAtStepHook(last_step=last_step),
    ]

    def extra() -> dict[str, Any]:
        if earlystop is None:
            return {}
        return {
            "best_step": earlystop.best_step,
            "best": earlystop.best,
            "stopped_step": earlystop.stopped_step,
        }

    hooks.insert(0, Trace(program, extra))
    if interrupt is not None:
        hooks.append(Interrupt(program, *interrupt))
    return hooks, wrap
