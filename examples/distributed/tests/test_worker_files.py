"""A user's `ProfilerHook` and `SummarySaverHook` on every worker of a real
multi-process job (worker_files_child.py): each worker's files end up where
the user asked and stay there after the job, and workers given the same
`ProfilerHook(output_dir=...)` never overwrite each other's traces (the
chief writes into it with TensorFlow's names, worker 1 into ``worker-1/``).

Keras's TensorBoard callback writes the logs of workers other than the chief
into a temporary directory that it deletes (tensorflow#49852); monsession
hands the user's hooks to every worker unchanged.

LoggingTensorHook's lines on worker 1 of both kinds of job are compared
with the single-process run in the cluster matrix (its ``logging`` row)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from distributed_testing import (
    TRAIN_SECS,
    Processes,
    addresses,
    event_files,
    files_under,
    free_ports,
    read_report,
    summary_tags,
    tf_config,
    within,
)

CHILD = Path(__file__).resolve().parent / "worker_files_child.py"
PROFILE_SAVED = re.compile(r"Saved the profile of steps (\d+) to (\d+) into '([^']*)'")
TIMELINE_SAVED = re.compile(r"Saving timeline for (\d+) into '([^']*)'")


def _start(processes: Processes, tmp_path: Path, name: str, mode: str, config: str) -> None:
    index = json.loads(config)["task"]["index"]
    processes.start(
        name,
        CHILD,
        [
            "--mode",
            mode,
            "--profile-dir",
            str(tmp_path / "profile"),
            "--summary-dir",
            str(tmp_path / f"summary-{index}"),
            "--steps",
            "8" if mode == "multiworker" else "12",
            "--report",
            str(tmp_path / f"{name}.json"),
        ],
        {"TF_CONFIG": config},
    )


def _event_file_pid(path: Path) -> int:
    # events.out.tfevents.<time>.<host>.<pid>, or .<pid>.<n>.v2 (TF2's writer)
    parts = path.name.split(".")
    return int(parts[-3] if path.name.endswith(".v2") else parts[-1])


def _traced_names(xplane: Path) -> set[str]:
    """The names of the events a profiler trace (an ``.xplane.pb`` file) holds."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    space = xplane_pb2.XSpace()
    space.ParseFromString(xplane.read_bytes())
    return {meta.name for plane in space.planes for meta in plane.event_metadata.values()}


def _run_metadata_tags(directory: Path) -> list[str]:
    """The `RunMetadata` tags of the event files of `directory`, read with TensorBoard's reader."""
    from tensorboard.backend.event_processing import event_accumulator

    accumulator = event_accumulator.EventAccumulator(str(directory))
    accumulator.Reload()
    return sorted(accumulator.Tags()["run_metadata"])


def _tensorboard_runs(logdir: Path) -> list[str]:
    """The runs TensorBoard finds under `logdir` (directories holding an event file)."""
    from tensorboard.backend.event_processing import plugin_event_multiplexer

    multiplexer = plugin_event_multiplexer.EventMultiplexer()
    multiplexer.AddRunsFromDirectory(str(logdir))
    return sorted(multiplexer.Runs())


def _summaries(directory: Path, pid: int) -> dict[str, list[int]]:
    """The summary steps of the one event file in `directory`, which process `pid` wrote."""
    (events,) = event_files(directory)
    assert _event_file_pid(events) == pid, events.name
    return summary_tags(events)


def test_multiworker_every_worker_keeps_its_profile_and_summaries(tmp_path: Path) -> None:
    """MultiWorkerMirroredStrategy, 2 worker processes on one host, both given
    ProfilerHook(save_steps=5, output_dir=profile): both trace step 5 at the
    same time (collective steps), under the same host name. The chief's trace
    is in profile/plugins/profile/<run>/<host>.xplane.pb, worker 1's in
    profile/worker-1/plugins/profile/<run>/<host>.xplane.pb, which TensorBoard
    lists as a run; each worker's SummarySaverHook(output_dir=summary-<i>)
    wrote the loss at steps 1, 3, 5, 7 into its own directory."""
    workers = addresses(free_ports(2))
    with within(TRAIN_SECS), Processes(tmp_path / "logs") as processes:
        for index in (0, 1):
            _start(processes, tmp_path, f"worker{index}", "multiworker", tf_config(workers, index))
        processes.wait_all_ok(["worker0", "worker1"], timeout=TRAIN_SECS)
        logs = {name: processes.log(name).read_text() for name in ("worker0", "worker1")}
    chief, worker = (read_report(tmp_path / f"worker{index}.json") for index in (0, 1))
    profile = tmp_path / "profile"

    # Each worker said where it saved its one trace (step 5, the first trigger)...
    assert PROFILE_SAVED.findall(logs["worker0"]) == [
        ("5", "5", str(profile / "plugins" / "profile"))
    ]
    assert PROFILE_SAVED.findall(logs["worker1"]) == [
        ("5", "5", str(profile / "worker-1" / "plugins" / "profile"))
    ]
    # ...and the trace is there after the job, under the profiler's own names.
    for root, report in ((profile, chief), (profile / "worker-1", worker)):
        (trace,) = (root / "plugins" / "profile").glob("*/*.xplane.pb")
        assert trace.name == f"{report['host']}.xplane.pb"
        assert "train_step" in _traced_names(trace)
    traces = [name for name in files_under(profile) if name.endswith(".xplane.pb")]
    assert len(traces) == 2, traces
    # Each directory holds an event file (no values): TensorBoard lists
    # worker-1 as a run, and its profile tab the trace, from any log
    # directory above it.
    assert _tensorboard_runs(profile) == [".", "worker-1"]
    for root in (profile, profile / "worker-1"):
        (events,) = root.glob("events.out.tfevents.*")
        assert summary_tags(events) == {}

    for index, report in ((0, chief), (1, worker)):
        assert _summaries(tmp_path / f"summary-{index}", report["pid"]) == {"loss": [1, 3, 5, 7]}


def test_tf1_cluster_every_worker_keeps_its_timelines_and_summaries(tmp_path: Path) -> None:
    """Graph mode, between-graph replication (a ps and 2 workers, TF_CONFIG):
    each worker runs 12 steps of its own with ProfilerHook(save_steps=5,
    output_dir=profile). The chief's timelines keep TensorFlow's names,
    profile/timeline-<step>.json; worker 1's are profile/worker-1/timeline-<step>.json,
    so asynchronous workers that trace the same global step do not overwrite
    each other; each directory's event file holds its worker's RunMetadata.
    Worker 1's SummarySaverHook(output_dir=summary-1) kept its summaries."""
    ps, *workers = addresses(free_ports(3))
    cluster = {"ps": [ps], "worker": workers}

    def config(task_type: str, index: int) -> str:
        return json.dumps({"cluster": cluster, "task": {"type": task_type, "index": index}})

    with within(TRAIN_SECS), Processes(tmp_path / "logs") as processes:
        _start(processes, tmp_path, "ps", "cluster", config("ps", 0))
        for index in (0, 1):
            _start(processes, tmp_path, f"worker{index}", "cluster", config("worker", index))
        processes.wait_all_ok(["worker0", "worker1"], timeout=TRAIN_SECS)
        logs = {name: processes.log(name).read_text() for name in ("worker0", "worker1")}
    chief, worker = (read_report(tmp_path / f"worker{index}.json") for index in (0, 1))
    profile = tmp_path / "profile"

    saved: dict[str, Any] = {}
    for name, root in (("worker0", profile), ("worker1", profile / "worker-1")):
        lines = TIMELINE_SAVED.findall(logs[name])
        assert lines, f"{name} saved no timeline"
        assert [path for _, path in lines] == [str(root / f"timeline-{s}.json") for s, _ in lines]
        steps = [int(step) for step, _ in lines]
        saved[name] = steps
        # Every timeline it saved is there, in Chrome trace format.
        timelines = sorted(path.name for path in root.glob("timeline-*.json"))
        assert timelines == sorted(f"timeline-{step}.json" for step in steps)
        for step in steps:
            trace = json.loads((root / f"timeline-{step}.json").read_text())
            assert trace["traceEvents"], step
        assert _run_metadata_tags(root) == sorted(f"step_{step}" for step in steps)
    assert sorted(_tensorboard_runs(profile)) == [".", "worker-1"]

    for index, report in ((0, chief), (1, worker)):
        steps = _summaries(tmp_path / f"summary-{index}", report["pid"])["loss"]
        assert len(steps) >= 3 and steps == sorted(steps), steps
