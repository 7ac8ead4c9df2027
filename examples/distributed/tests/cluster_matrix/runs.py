"""Running one (column, event): its jobs, each a loopback cluster of real processes.

Every process is forked by the fork server (forks.py) on free loopback
ports and killed by pid when the run ends, whatever happened (`Cluster`).
After each process exits, its exit status is recorded in its directory
(`exit`, -9: SIGKILL, -15: SIGTERM).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from distributed_testing import free_ports
from driver_matrix.records import record_in

from cluster_matrix import table
from cluster_matrix.forks import Cluster, ForkServer

JOB_TIMEOUT = 240.0  # Seconds a job may take (a survivor fails within 30 s of a death).
# Seconds between the end of a job and the next: a restart's rates must not count them.
# The first rate after a restart may count the new session's first steps, which trace
# their functions: up to 4.9 s on a loaded 2-core machine (load 15; check_times's bounds,
# which must stay below the downtime for the check to see it counted).
DOWNTIME = 8.0


def run_dir(root: str, column: str, event: str) -> str:
    return os.path.join(root, column, event)


def role_dir(root: str, column: str, event: str, role: str) -> str:
    """Where a process records: the chief in the run directory, the others below it."""
    directory = run_dir(root, column, event)
    return directory if role == table.COLUMNS[column].roles[0] else os.path.join(directory, role)


def _plan(root: str, column: str, event: str, role: str, ports: list[int]) -> dict[str, Any]:
    spec = table.COLUMNS[column]
    return {
        "column": column,
        "role": role,
        "ports": ports,
        "periods": dict(spec.periods),
        **_cluster(spec),
        "dir": role_dir(root, column, event, role),
        "checkpoint_dir": os.path.join(run_dir(root, column, event), "ckpt"),
    }


def _faulty(column: str, event: str, role: str) -> bool:
    """Whether the event's fault happens in `role`'s process (a server's kill: its killer)."""
    spec, how = table.COLUMNS[column], table.EVENTS[event].how
    if how == "abort":
        return role in spec.abort_on
    if victim_server(column, event) is not None:
        return kills_server(column, event, role)
    return role == spec.hit(how)


def run(server: ForkServer, root: str, column: str, event: str) -> None:
    """Runs every job of the event, one after the other."""
    spec, ev = table.COLUMNS[column], table.EVENTS[event]
    logs = Path(run_dir(root, column, event)) / "logs"
    # The ports of the processes that serve (first), then of the training roles.
    ports = free_ports(len(spec.servers) + len(spec.roles))
    victim = victim_server(column, event)
    with Cluster(server, logs) as processes:
        for job, last_step in enumerate(table.jobs(column, event)):
            if job:
                time.sleep(DOWNTIME)
            servers = {name: _plan(root, column, event, name, ports) for name in spec.servers}
            for name, plan in servers.items():
                processes.start(f"{name}-{job}", plan)
            plans = {}
            for role in spec.roles:
                plans[role] = {**_plan(root, column, event, role, ports), "last_step": last_step}
                if job == 0 and ev.how and _faulty(column, event, role):
                    plans[role][f"{ev.how}_at"] = table.fault_step(column, role)
                    if victim is not None:
                        plans[role]["kill_pid"] = processes.pid(f"{victim}-0")
                processes.start(f"{role}-{job}", plans[role])
            _wait(processes, spec, plans, job)
            if job == 0 and victim is not None:
                status = processes.wait(f"{victim}-0", 1.0)  # Never restarted alone.
                record_in(servers[victim]["dir"], "exit", status=status)
            for name in spec.servers:
                processes.kill(f"{name}-{job}")


def victim_server(column: str, event: str) -> str | None:
    """The server the event's kill hits (`kills_server` kills it after step AT), if any."""
    spec, ev = table.COLUMNS[column], table.EVENTS[event]
    if ev.how != "kill":
        return None
    victim = ev.victim or spec.target
    return victim if victim in spec.servers else None


def kills_server(column: str, event: str, role: str) -> bool:
    """Whether `role` kills the event's server after its step AT: the process that runs that
    step, the column's target where it trains (a between-graph worker), else the chief."""
    if victim_server(column, event) is None:
        return False
    spec = table.COLUMNS[column]
    return role == (spec.target if spec.target in spec.roles else spec.roles[0])


def _cluster(spec: table.Column) -> dict[str, Any]:
    return {"roles": list(spec.roles), "servers": list(spec.servers)}


def _wait(
    processes: Cluster, spec: table.Column, plans: dict[str, dict[str, Any]], job: int
) -> None:
    """Waits for every training process of the job, and records each exit status.

    Where the column restarts only a dead worker, a worker that died of
    SIGKILL is started again on its port, without the fault, `DOWNTIME`
    seconds later, while the others run on.
    """
    deadline = time.monotonic() + JOB_TIMEOUT
    running = {role: f"{role}-{job}" for role in plans}
    while running:
        for role, name in list(running.items()):
            status = processes.poll(name)
            if status is None:
                if time.monotonic() > deadline:
                    processes.wait(name, 0)  # Fails with its log.
                continue
            record_in(plans[role]["dir"], "exit", status=status)
            del running[role]
            if status == -9 and spec.restart == "worker" and not name.endswith("-restarted"):
                time.sleep(DOWNTIME)
                again = {key: value for key, value in plans[role].items() if key != "kill_at"}
                running[role] = f"{name}-restarted"
                processes.start(running[role], again)
        time.sleep(0.1)
