"""The multi-process driver matrix as data: columns (strategies), events, rows.

A column is a `Column` in `COLUMNS` and its program in `programs.py`; an
event is an `Event` in `EVENTS`. Every (column, event) is one cluster run
(a few jobs in a row) observed by all the rows. Cells that cannot apply
are in `not_applicable` with the reason; cells failing on a known, open
finding are in `KNOWN_FAILURES` (strict xfail).
"""

from __future__ import annotations

import dataclasses

from driver_matrix import table as single

LAST_STEP = single.LAST_STEP  # The NaN probe stops every fault-free run at single.NAN_AT.
RESTART_FIRST = single.RESUME_FIRST
AT = 17  # The step after which a fault happens (between the checkpoints of 15 and 20).
SAVE_STEPS = single.SAVE_STEPS
# The rows: the standard hooks the matrix observes on every worker, and the model.
ROWS = ("checkpoint", "summary", "step-counter", "logging", "stop", "model")


@dataclasses.dataclass(frozen=True)
class Column:
    """A strategy: its processes and what its events can do to them.

    `roles` are the training processes, the chief first (its records are the
    run directory's, another worker's `<run dir>/<role>`); `servers` are
    processes that only serve (a ps). `target` is the process a kill or a
    SIGTERM hits; `abort_on` the processes an `AbortedError` is raised in.
    `signalled` is the process a SIGTERM hits, where it differs from
    `target`. `restart` is what follows a worker's death: `"job"` (the survivors fail
    fast and every process is restarted) or `"worker"` (only the dead worker
    is restarted, on its port) or `"none"`. A `target` among the `servers` (a
    ParameterServerStrategy worker) is killed by the chief after its step,
    and the chief's session goes on on the other workers; it is never
    restarted (`"none"`: restarting it on its port while the session runs is
    tested in test_parameter_server_worker_death.py, where a closure holds
    until the kill). The ps of the ps-kill event is killed by the process that
    runs step `AT`: the `target` where it trains (a between-graph worker),
    else the chief. `abort_ends_job`: an `AbortedError` ends
    every worker (monsession does not re-create a session whose collective
    ops TensorFlow aborted) and the job is restarted, instead of an
    in-process recovery.
    """

    description: str
    roles: tuple[str, ...]
    servers: tuple[str, ...] = ()
    target: str | None = None
    abort_on: tuple[str, ...] = ()
    restart: str = "job"
    abort_ends_job: bool = False
    synchronous: bool = True  # Every worker trains every step: exact weights.
    fused: bool = False  # steps_per_execution="auto": steps must really run fused.
    # Under steps_per_execution="auto": how many runs at the start of a session fuse
    # nothing, whatever the hooks allow. Under collective ops (MWMS) the workers agree after
    # each run on the next one's silent steps, from each worker's pace, known from its
    # second run on: runs 1 and 2 run single. A ClusterCoordinator's closure of silent
    # steps is counted from the pace of the runs before it: run 1 runs single.
    unfused_runs: int = 0
    signalled: str | None = None
    # The hooks' periods where they differ from driver_matrix/rows.py's PERIODS.
    periods: tuple[tuple[str, int], ...] = ()
    events: tuple[str, ...] | None = None  # The events it runs, if not all.

    def hit(self, how: str | None) -> str | None:
        """The process an event's kill (`"kill"`) or SIGTERM (`"sigterm"`) hits."""
        return self.signalled or self.target if how == "sigterm" else self.target

    @property
    def summary_roles(self) -> tuple[str, ...]:
        """The processes whose step records `tf.summary` values: the job's first replica's."""
        return self.roles[:1]


EVERY = 8  # The long-block columns' period.
LONG_PERIODS = (
    *((name, EVERY) for name in ("summary", "step-counter", "logging", "progress")),
    *((name, single.NAN_AT) for name in ("nan", "profiler", "checkpoint")),
)

COLUMNS = {
    # One process, no strategy: what every column's fault-free run is compared with.
    "single": Column("the single-process eager loop (sess.run(step)): the reference", ("chief",)),
    "mwms": Column(
        "MultiWorkerMirroredStrategy, 2 worker processes (TF_CONFIG), eager single steps",
        roles=("chief", "worker1"),
        target="worker1",
        abort_on=("chief", "worker1"),
        abort_ends_job=True,
    ),
    "pss": Column(
        "ParameterServerStrategy with a ClusterCoordinator: the chief is the coordinator "
        "(its steps schedule one closure each); 1 ps and 2 workers serve",
        roles=("chief",),
        servers=("ps", "worker0", "worker1"),
        target="worker1",
        signalled="chief",
        abort_on=("chief",),
        restart="none",
    ),
    "mirrored2": Column(
        "MirroredStrategy with 2 replicas (2 logical CPUs) in one process, eager single steps",
        roles=("chief",),
        target="chief",
        abort_on=("chief",),
    ),
    "tf1-cluster": Column(
        "TensorFlow 1 between-graph replication in graph mode: 1 ps and 2 worker processes "
        "(tf.distribute.Server, replica_device_setter, MonitoredTrainingSession(master=...)); "
        "the workers take turns (between_graph.py)",
        roles=("chief", "worker1"),
        servers=("ps",),
        target="worker1",
        signalled="chief",
        abort_on=("worker1",),
        restart="worker",
        synchronous=False,
    ),
    "mwms-auto": Column(
        'MultiWorkerMirroredStrategy, 2 worker processes, steps_per_execution="auto" (the '
        "workers agree after each call how many steps the next one fuses)",
        roles=("chief", "worker1"),
        target="worker1",
        abort_on=("chief", "worker1"),
        abort_ends_job=True,
        fused=True,
        unfused_runs=2,
    ),
    "pss-auto": Column(
        'ParameterServerStrategy with a ClusterCoordinator, steps_per_execution="auto": the '
        "silent steps before a hook acts are one closure (the step names the function it "
        "schedules); 1 ps and 2 workers serve",
        roles=("chief",),
        servers=("ps", "worker0", "worker1"),
        target="worker1",
        signalled="chief",
        abort_on=("chief",),
        restart="none",
        fused=True,
        unfused_runs=1,
    ),
    "mirrored2-auto": Column(
        "MirroredStrategy with 2 replicas (2 logical CPUs) in one process, "
        'steps_per_execution="auto"',
        roles=("chief",),
        target="chief",
        abort_on=("chief",),
        fused=True,
    ),
    # The -auto columns' hooks act every 2 to 5 steps: their blocks hold one step. These two
    # run hooks that act every 8 steps (the NaN check and the checkpoints: at 25), so the
    # blocks hold 6 or 7 steps; the fault-free run only (the faults' paths are the same as
    # in the -auto columns).
    "mwms-long": Column(
        'MultiWorkerMirroredStrategy, 2 worker processes, steps_per_execution="auto", hooks '
        "acting every 8 steps",
        roles=("chief", "worker1"),
        fused=True,
        unfused_runs=2,
        periods=LONG_PERIODS,
        events=("fresh",),
    ),
    "pss-long": Column(
        'ParameterServerStrategy with a ClusterCoordinator, steps_per_execution="auto", hooks '
        "acting every 8 steps; 1 ps and 2 workers serve",
        roles=("chief",),
        servers=("ps", "worker0", "worker1"),
        fused=True,
        unfused_runs=1,
        periods=LONG_PERIODS,
        events=("fresh",),
    ),
}


@dataclasses.dataclass(frozen=True)
class Event:
    """A fault and what follows it: the jobs run one after the other.

    Each job trains to its `last_step` (the NaN stops it at `single.NAN_AT`
    first); `how` (`"kill"`, `"sigterm"`, `"abort"`) happens after step `AT`
    of the first job. Where the fault ends the job, the job is restarted
    (`jobs`).
    """

    description: str
    last_steps: tuple[int, ...]
    how: str | None = None
    starts: tuple[int, ...] = (0,)  # The step each session of every worker starts at.
    victim: str | None = None  # The server a kill hits instead of the column's target.


EVENTS = {
    "fresh": Event("the fault-free run: the reference of its column", (LAST_STEP,)),
    "worker-kill": Event(
        "SIGKILL to a worker after step 17; then the job (or that worker) restarted",
        (LAST_STEP,),
        how="kill",
        starts=(0, 15),
    ),
    "sigterm": Event(
        "SIGTERM to a worker after step 17: every worker stops after that step and the chief "
        "saves it; then the job restarted",
        (LAST_STEP,),
        how="sigterm",
        starts=(0, AT),
    ),
    "restart": Event(
        "a whole-job restart: a job to step 20, a new job to the last step",
        (RESTART_FIRST, LAST_STEP),
        starts=(0, RESTART_FIRST),
    ),
    "ps-kill": Event(
        "SIGKILL to the parameter server after step 17: every training process fails naming "
        "it, and the whole job is restarted from the newest checkpoint (15; the TF1 chief's: 12)",
        (LAST_STEP,),
        how="kill",
        starts=(0, 15),
        victim="ps",
    ),
    "aborted": Event(
        "a real AbortedError after step 17: recovered in the process from checkpoint 15, or "
        "(where it ends the job) the job restarted",
        (LAST_STEP,),
        how="abort",
        starts=(0, 15),
    ),
}


def restarted(column: str, event: str) -> bool:
    """Whether the event's fault ends the job, which is then restarted to the last step."""
    spec, how = COLUMNS[column], EVENTS[event].how
    if how == "kill":
        return spec.restart == "job" or EVENTS[event].victim is not None
    return how == "sigterm" or (how == "abort" and spec.abort_ends_job)


def jobs(column: str, event: str) -> tuple[int, ...]:
    """The last step of each job the run starts, one after the other."""
    steps = EVENTS[event].last_steps
    return (*steps, LAST_STEP) if restarted(column, event) else steps


def starts(column: str, event: str, role: str) -> tuple[int, ...]:
    """The step each session of `role` starts at, where the column's differs from the event's."""
    return STARTS.get((column, event, role), EVENTS[event].starts)


# Between-graph workers (between_graph.py): a peer's fault leaves the chief's one session
# alone; worker 1 comes back at its next turn, 18; job 1 of a restart ends at 21. The chief
# runs the even steps: it saves 0, 6, 12, 18, ..., so a job that dies at 17 resumes from 12.
TF1_RESUMED = 12
STARTS: dict[tuple[str, str, str], tuple[int, ...]] = {
    **{("tf1-cluster", event, "chief"): (0,) for event in ("worker-kill", "aborted")},
    **{("tf1-cluster", event, "worker1"): (0, AT + 1) for event in ("worker-kill", "aborted")},
    **{("tf1-cluster", "restart", role): (0, RESTART_FIRST + 1) for role in ("chief", "worker1")},
    **{("tf1-cluster", "ps-kill", role): (0, TF1_RESUMED) for role in ("chief", "worker1")},
    # SIGTERM to the chief after its step 18: it saves 18; the job restarts from it.
    **{("tf1-cluster", "sigterm", role): (0, AT + 1) for role in ("chief", "worker1")},
}


def fault_step(column: str, role: str) -> int:
    """The step after which the event's fault happens in `role`: `AT`, but on a TF1 chief,
    which runs the even steps (between_graph.py), the one after it."""
    return AT + 1 if (column, role) == ("tf1-cluster", "chief") else AT


REFERENCE = ("single", "fresh")


def reference(column: str, event: str) -> tuple[str, str]:
    """The run a cell is compared with: its column's fresh run (a fresh run, with the plan:
    cluster_matrix/plan.py)."""
    return (column, "fresh")


def not_applicable(row: str, column: str, event: str) -> str | None:
    """Why a cell cannot apply, or None."""
    spec, how = COLUMNS[column], EVENTS[event].how
    if column == REFERENCE[0]:
        if event != REFERENCE[1]:
            return (
                "the single-process loop's faults are the driver matrix's (its eager column, "
                "examples/tests/driver_matrix)"
            )
        return None
    if spec.events is not None and event not in spec.events:
        return (
            "a long-block column runs the fault-free run only: under a fault its fused "
            "blocks take the -auto column's path"
        )
    victim = EVENTS[event].victim
    if victim is not None and victim not in spec.servers:
        return f"no {victim} process in this column"
    if how in ("kill", "sigterm") and spec.hit(how) is None:
        return "one process: no worker to kill or signal apart from the chief"
    if how == "abort" and not spec.abort_on:
        return "no process where a step's AbortedError is recovered"
    return NOT_APPLICABLE.get((row, column, event))


# Cells that cannot apply beyond the rules above: {(row, column, event): reason}.
NOT_APPLICABLE: dict[tuple[str, str, str], str] = {}

# Cells that fail on a known, open finding: {(row, column, event): finding}. Strict xfail.
KNOWN_FAILURES: dict[tuple[str, str, str], str] = {}


def runs() -> list[tuple[str, str]]:
    """Every (column, event) that some cell observes."""
    return [
        (column, event)
        for column in COLUMNS
        for event in EVENTS
        if any(not_applicable(row, column, event) is None for row in ROWS)
    ]


def cells() -> list[tuple[str, str, str]]:
    return [(r, c, e) for c in COLUMNS for e in EVENTS for r in ROWS]


def not_applicable_markdown() -> str:
    """The cells that do not apply, as the table of docs/contributors.md ("The driver matrix")."""
    groups: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for row, column, event in cells():
        reason = not_applicable(row, column, event)
        if reason is not None:
            groups.setdefault((reason, column), []).append((row, event))
    lines = ["| column | rows | events | why not |", "| --- | --- | --- | --- |"]
    for (reason, column), found in groups.items():
        rows = sorted({row for row, _ in found}, key=ROWS.index)
        events = sorted({event for _, event in found}, key=list(EVENTS).index)
        lines.append(f"| {column} | {', '.join(rows)} | {', '.join(events)} | {reason} |")
    return "\n".join(lines) + "\n"
