"""The driver matrix as data: rows (hooks), columns (drivers), lifecycle events.

A new hook is one entry of `ROWS` (and its builder in `rows.py`), a new driver
one entry of `DRIVERS` (and its program in `drivers.py`). Cells that cannot
apply are in `NOT_APPLICABLE` with the reason; cells that fail because of a
known, open finding are in `KNOWN_FAILURES` (strict xfail: a fixed cell fails
until its entry is removed).
"""

from __future__ import annotations

import dataclasses

LAST_STEP = 30  # 40 ids, batches of 4: 10 steps per epoch, 3 epochs.
RESUME_FIRST = 20  # A clean resume: a first run to step 20, then a second to 30.
SAVE_STEPS = 5
KILLS = {"kill-between": 17, "kill-checkpoint": 15, "kill-epoch": 10}
# SIGTERM to the process after this step, between two checkpoints: the session stops there
# and saves it, off the schedule; the restart must save at the uninterrupted run's steps.
SIGTERM_AT = 17
# The events whose first process ends early and whose run a new process restarts: how the
# first one ends ("kill": SIGKILL, "sigterm"), after which step.
RESTARTED = {
    **{event: ("kill", at) for event, at in KILLS.items()},
    "sigterm": ("sigterm", SIGTERM_AT),
}
ABORT_AT = 17
# Where each event's sessions start (the contract: a recovery or a restart after a kill
# resumes from the newest save begun before it; a kill waits for the background writes).
STARTS = {
    "fresh": [0],
    "resume": [0, RESUME_FIRST],
    "kill-between": [0, 15],
    "kill-checkpoint": [0, 15],
    "kill-epoch": [0, 10],
    "sigterm": [0, SIGTERM_AT],
    "aborted": [0, 15],
}
# The probe is NaN from this step on: NanTensorHook(fail_on_nan_loss=False) stops the run
# there, not at LAST_STEP. A multiple of SAVE_STEPS: the fused columns check the loss every
# SAVE_STEPS steps of a session, and every session starts at a checkpoint's step.
NAN_AT = 25
# The earlystop row runs alone (it stops the run early too): its patience, counted in
# evaluations every SAVE_STEPS steps. The loss grows, so it stops at step 5 * (1 + PATIENCE).
PATIENCE = 4
SHUFFLE_SEED = 7  # The seeded, reshuffled order of the 40 ids: every driver trains it.
# Seconds between a kill (or SIGTERM) and its restart: no elapsed time or rate after it may
# count them.
DOWNTIME = 8.0

EVENTS = ("fresh", "resume", "kill-between", "kill-checkpoint", "kill-epoch", "sigterm", "aborted")


@dataclasses.dataclass(frozen=True)
class Driver:
    """A column: how the hooks are driven, and what its cells are compared with."""

    mode: str  # "graph", "eager" or "fit": how the child builds the program.
    description: str
    fused: bool = False
    epochs: bool = False
    tf_session: bool = False  # TensorFlow's own MonitoredTrainingSession.
    mirrored: bool = False
    keras_callbacks: bool = False  # Runs KerasCallbacksHook instead of the other hooks.

    @property
    def saves_in_background(self) -> bool:
        """Whether its checkpoints are written by a thread (eager mode's default, fit's too)."""
        return self.mode != "graph"


DRIVERS = {
    "ms-graph": Driver("graph", "monsession.MonitoredTrainingSession, graph mode"),
    "tf-graph": Driver(
        "graph", "tf.compat.v1.train.MonitoredTrainingSession, graph mode", tf_session=True
    ),
    "eager": Driver("eager", "eager single steps (sess.run(step))"),
    "eager-auto": Driver("eager", 'eager, steps_per_execution="auto"', fused=True),
    "epochs": Driver("eager", "monsession.Epochs loop", epochs=True),
    "epochs-auto": Driver(
        "eager", 'monsession.Epochs loop, steps_per_execution="auto"', fused=True, epochs=True
    ),
    "fit": Driver("fit", "model.fit with HooksCallback"),
    "keras-loop": Driver("eager", "Keras callbacks via KerasCallbacksHook", keras_callbacks=True),
    "keras-epochs": Driver(
        "eager",
        "Keras callbacks via KerasCallbacksHook, Epochs loop",
        epochs=True,
        keras_callbacks=True,
    ),
    "mirrored": Driver("eager", "eager single steps in a MirroredStrategy scope", mirrored=True),
}


@dataclasses.dataclass(frozen=True)
class Row:
    """A hook: whether TensorFlow has one of the same name (the graph-mode reference)."""

    description: str
    tf_counterpart: bool
    keras: bool = False  # Only the Keras-callback drivers run it.


ROWS = {
    "checkpoint": Row("CheckpointSaverHook(save_steps=5): checkpoint steps and weights", True),
    "summary": Row("SummarySaverHook(save_steps=3): summary steps and values", True),
    "step-counter": Row("StepCounterHook(every_n_steps=4): steps of the rate summaries", True),
    "logging": Row(
        "LoggingTensorHook(every_n_iter=4): logged steps, values, first-line format", True
    ),
    "progress": Row("ProgressBarHook(every_n_iter=2): steps of its lines", False),
    "nan": Row(
        "NanTensorHook(fail_on_nan_loss=False), NaN from step 25: the step it stops the run at, "
        "the step its divergence line names",
        True,
    ),
    "profiler": Row("ProfilerHook(save_steps=20): traced steps (graph) / traces (eager)", True),
    "stop": Row("StopAtStepHook(last_step): the step each run stopped at", True),
    "mlflow": Row(
        "MlflowHook(every_n_steps=2), before the checkpoint saver, with its listener: the runs "
        "in the SQLite store (one), their status, the steps and values of w, the steps of the "
        "rate",
        False,
    ),
    "earlystop": Row(
        "EarlyStoppingHook (example package), alone in its run: best, best_step, stopped_step "
        "before the last step, the step the run ended at",
        False,
    ),
    "model": Row(
        "the training itself: final step, weight, step count, epochs yielded, the batch of "
        "each step (shuffled data), against what the plan implies",
        True,
    ),
    # KerasCallbacksHook with every standard callback that runs in a custom loop, one row
    # each (keras_row.py, which says why BackupAndRestore, ProgbarLogger, RemoteMonitor
    # and SwapEMAWeights are not rows).
    **{
        name: Row(f"KerasCallbacksHook: {description}", False, keras=True)
        for name, description in {
            "keras-checkpoint": "ModelCheckpoint(save_freq=5): files and weights",
            "keras-checkpoint-epoch": 'ModelCheckpoint(save_freq="epoch"): files (epoch, loss)',
            "keras-tensorboard": "TensorBoard(update_freq=1): batch and epoch scalars",
            "keras-earlystop": "EarlyStopping(patience=2): stopped_epoch, best_epoch, best, wait",
            "keras-lr": "LearningRateScheduler, ReduceLROnPlateau: rates at epoch begin/end",
            "keras-csv": "CSVLogger(append=True): rows",
            "keras-lambda": "LambdaCallback: batch indices and logs, epoch ends",
            "keras-nan": "TerminateOnNaN (loss NaN from 25): the step it stops at",
            "keras-history": "History: epochs and records at the end",
        }.items()
    },
}

_NO_KILL_FIT = (
    "model.fit restores nothing and resumes no data position by itself (HooksCallback, "
    "documented): a killed fit restarts under the user's own policy"
)
_NO_SIGNAL_FIT = (
    "model.fit has no session to stop on a signal (HooksCallback installs no handler): "
    "SIGTERM ends fit mid-step, unsaved, as without monsession"
)
_TF_RESTART = (
    "TensorFlow's session restores no hook state: after a restart its hooks start over; "
    "the restart promises are monsession's, tested under monsession's sessions"
)
_NO_EPOCHS = "no epochs in this loop: step 10 is an ordinary checkpoint step (kill-checkpoint)"


def reference(row: str, driver: str, event: str) -> tuple[str, str] | None:
    """The (driver, event) of the run a cell is compared with; None for a reference itself.

    Graph mode: TensorFlow's hook of the same name under TensorFlow's session.
    Otherwise the uninterrupted single-step run of the column's kind; that run
    itself is compared with graph mode (`eager`) or with `eager` (`epochs`)
    where what a user sees does not differ by nature.
    """
    spec = DRIVERS[driver]
    if spec.mode == "graph" and ROWS[row].tf_counterpart:
        return "tf-graph", "ref-" + (event if spec.tf_session else "fresh")
    ref = (driver if ROWS[row].keras else "epochs" if spec.epochs else "eager"), "fresh"
    if ref != (driver, event):
        return ref
    if row in _OWN_REFERENCE.get(driver, {}) or (ROWS[row].keras and spec.keras_callbacks):
        return None
    return ("eager", "fresh") if spec.epochs else ("ms-graph", "fresh")


# The reference runs' cells with nothing independent to compare with, and why.
_OWN_REFERENCE = {
    "eager": {
        "profiler": "graph mode writes timelines, eager mode profiler traces",
    },
}
_KERAS_REFERENCE = "it is the reference of its column"


def not_applicable(row: str, driver: str, event: str) -> str | None:
    """Why a cell cannot apply, or None."""
    spec, hook = DRIVERS[driver], ROWS[row]
    if hook.keras != spec.keras_callbacks and row not in ("model", "stop"):
        if hook.keras:
            return "KerasCallbacksHook runs in its own columns (keras-loop, keras-epochs)"
        return (
            "the Keras-callback columns run KerasCallbacksHook with only the checkpoint saver and "
            "StopAtStepHook it needs; the other hooks are covered by the eager and epochs columns"
        )
    if event == "kill-epoch" and not spec.epochs and spec.mode != "fit" and not hook.keras:
        return _NO_EPOCHS
    if spec.mode == "fit" and event.startswith("kill"):
        return _NO_KILL_FIT
    if spec.mode == "fit" and event == "sigterm":
        return _NO_SIGNAL_FIT
    if spec.mode == "fit" and event == "aborted":
        return "model.fit has no session to re-create: an AbortedError ends fit"
    if spec.tf_session and event not in ("fresh", "resume"):
        return _TF_RESTART
    if reference(row, driver, event) is None:
        why = _KERAS_REFERENCE if hook.keras else _OWN_REFERENCE[driver][row]
        return f"the reference run of this row and column ({why})"
    return NOT_APPLICABLE.get((row, driver, event))


# Cells that cannot apply beyond the rules above: {(row, driver, event): reason}.
NOT_APPLICABLE: dict[tuple[str, str, str], str] = {
    ("mlflow", "tf-graph", "resume"): (
        "the MLflow run id is monsession hook state, which TensorFlow's session never loads: "
        "a resumed run under it starts a second MLflow run"
    ),
    ("earlystop", "tf-graph", "resume"): (
        "its best loss so far is monsession hook state, which TensorFlow's session never "
        "loads: a resumed run under it starts a new search"
    ),
}

# Cells that fail because of a known, open finding: {(row, driver, event): finding}.
# Strict xfail: remove the entries of a finding when its fix lands.
_EPOCH_END_AFTER_CHECKPOINT = (
    "the checkpoint of an epoch's last step is written before the epoch's end (Epochs counts the "
    "epoch as ended with it), so what epoch_end changes is in no checkpoint until the next one: "
    "the learning rate ReduceLROnPlateau/LearningRateScheduler set, and KerasCallbacksHook's "
    "state (EarlyStopping's wait, History's records). A restart or recovery from that "
    "checkpoint loses them, and Epochs does not end the epoch again. Fix: write the checkpoint "
    "and hook state again after an epoch's end at a checkpoint step"
)
_ONE_EPOCH_PER_TRAINING = (
    "by design (hooks-keras README): a loop without epochs is one epoch per training, as "
    "fit(epochs=1); each of the two trainings of a resumed run ends it, so CSVLogger and "
    'ModelCheckpoint(save_freq="epoch") write at step 20 and at the last step, and the '
    "epoch-end callbacks (LambdaCallback, the learning-rate ones) run twice, not once"
)
_EPOCH_END_ONCE = (
    "by design (Epochs docs): an epoch counts as ended with the checkpoint of its last step, so "
    "a finished loop run again repeats nothing; a process killed between that checkpoint and "
    "the loop's yield does not end that epoch (epoch_end: the callbacks' on_epoch_end) again "
    "after the restart"
)
_SIGTERM_ENDS_ONE_EPOCH_PER_TRAINING = (
    "by design (hooks-keras README): a loop without epochs is one epoch per training, and "
    "a training stopped by SIGTERM at step 17 ends it there (KerasCallbacksHook.end()), as a "
    "resumed run's first training does at 20: the restart's callbacks start another epoch "
    "and count its batches from 0 (ModelCheckpoint(save_freq=5) saves at 22 and 25 under "
    "the new epoch's batch names, not at 20 and 25), and the epoch-end callbacks "
    "(EarlyStopping, History, CSVLogger, the learning-rate ones, LambdaCallback) and "
    "TensorBoard's epoch scalars see one epoch more"
)
_SIGTERM_ENDS_THE_EPOCH = (
    "open finding: KerasCallbacksHook.end() ends the epoch in progress (on_epoch_end) on any "
    "stop, also on SIGTERM mid-epoch under Epochs, and the checkpoint saved at that stop "
    "holds the hook state after it: the callbacks see an epoch end at step 17 that the "
    "uninterrupted run never has (History, CSVLogger, LambdaCallback, the learning-rate "
    "ones; EarlyStopping's patience then stops the restart at step 20, not 25, so the stop "
    "and model rows differ too), and the restart begins epoch 2 at step 18, counting its "
    "batches from 0 (ModelCheckpoint names and save_freq). Fix: a stop that Epochs did not "
    "end leaves the epoch open in the saved state, for the restart to resume it (as after a "
    "kill), and ends it for the callbacks only when the job ends"
)
# The runs that restart from the checkpoint of an epoch's last step: resume (20) and
# kill-epoch (10; the kill waits for the background write).
_KERAS_EPOCH_END_ROWS = (
    "keras-tensorboard",
    "keras-earlystop",
    "keras-lr",
    "keras-csv",
    "keras-history",
)
KNOWN_FAILURES: dict[tuple[str, str, str], str] = {
    **{
        (row, "keras-epochs", event): _EPOCH_END_AFTER_CHECKPOINT
        for event in ("resume", "kill-epoch")
        for row in _KERAS_EPOCH_END_ROWS
    },
    **{
        (row, "keras-epochs", "kill-epoch"): _EPOCH_END_ONCE
        for row in ("keras-checkpoint-epoch", "keras-lambda")
    },
    **{
        (row, "keras-loop", "resume"): _ONE_EPOCH_PER_TRAINING
        for row in ("keras-checkpoint-epoch", "keras-lr", "keras-csv", "keras-lambda")
    },
    **{
        (row, "keras-loop", "sigterm"): _SIGTERM_ENDS_ONE_EPOCH_PER_TRAINING
        for row in ROWS
        if ROWS[row].keras and row != "keras-nan"
    },
    **{
        (row, "keras-epochs", "sigterm"): _SIGTERM_ENDS_THE_EPOCH
        for row in ROWS
        if ROWS[row].keras or row in ("stop", "model")
    },
}


def cells() -> list[tuple[str, str, str]]:
    return [(r, d, e) for d in DRIVERS for e in EVENTS for r in ROWS]


def not_applicable_markdown() -> str:
    """The cells that do not apply, as the table of docs/contributors.md ("The driver matrix")."""
    groups: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for row, driver, event in cells():
        reason = not_applicable(row, driver, event)
        if reason is not None:
            groups.setdefault((reason, driver), []).append((row, event))
    lines = ["| driver | hooks | events | why not |", "| --- | --- | --- | --- |"]
    for (reason, driver), found in groups.items():
        rows = sorted({row for row, _ in found}, key=list(ROWS).index)
        events = sorted({event for _, event in found}, key=EVENTS.index)
        assert len(found) == len(rows) * len(events), (reason, driver)  # A product.
        hooks = ", ".join(rows)
        if len(rows) > len(ROWS) / 2:
            hooks = "all but " + ", ".join(row for row in ROWS if row not in rows)
        lines.append(f"| {driver} | {hooks} | {', '.join(events)} | {reason} |")
    return "\n".join(lines) + "\n"
