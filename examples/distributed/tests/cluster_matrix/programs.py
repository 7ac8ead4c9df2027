"""The programs of the columns: one function per column, run in each of its processes.

Every program trains the single-process matrix's model (`driver_matrix.drivers`)
with its standard hooks, under the column's strategy. A process's plan (see
child.py) names its role, the cluster's roles and ports, where it records
(`dir`) and where the session restores from (`checkpoint_dir`: the chief's).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

from distributed_testing import addresses, two_logical_cpus
from driver_matrix import drivers, records
from driver_matrix import table as single

import monsession.testing
from cluster_matrix import between_graph

EAGER = single.DRIVERS["eager"]
GRAPH = single.DRIVERS["ms-graph"]
EAGER_AUTO = single.DRIVERS["eager-auto"]  # steps_per_execution="auto", the Fused hook.


def _no_time_budget(driver: Any) -> None:
    """Fused (`driver.fused`): blocks end only where a hook acts, whatever this machine's pace.

    Core's fused calls stop after `MONSESSION_FUSED_CALL_SECONDS` (0.5 s) at the
    pace of the last runs: on a busy machine blocks would shrink, by chance.
    The same switch test_scheduled_fusion.py and test_distributed_eager.py use."""
    if driver.fused:
        os.environ["MONSESSION_FUSED_CALL_SECONDS"] = "3600"


def _worker_index(plan: dict[str, Any]) -> int:
    return plan["roles"].index(plan["role"])


def mwms(plan: dict[str, Any], driver: Any = EAGER) -> None:
    """MultiWorkerMirroredStrategy: one process per worker, worker 0 the chief (TF_CONFIG)."""
    import tensorflow as tf

    workers = addresses(plan["ports"][len(plan["servers"]) :])
    os.environ["TF_CONFIG"] = json.dumps(
        {"cluster": {"worker": workers}, "task": {"type": "worker", "index": _worker_index(plan)}}
    )
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    _no_time_budget(driver)
    drivers.order()
    drivers.run_eager(driver, plan, plan["last_step"], strategy=strategy)


def single(plan: dict[str, Any]) -> None:
    """The single-process eager loop, no strategy."""
    drivers.order()
    drivers.run_eager(EAGER, plan, plan["last_step"])


def mirrored2(plan: dict[str, Any], driver: Any = EAGER) -> None:
    """MirroredStrategy over 2 logical CPUs of one process: both replicas train the same
    batch; the variables' ONLY_FIRST_REPLICA aggregation applies one update per step."""
    import tensorflow as tf

    strategy = tf.distribute.MirroredStrategy(two_logical_cpus())
    _no_time_budget(driver)
    drivers.order()
    drivers.run_eager(driver, plan, plan["last_step"], strategy=strategy)


def tf1_cluster(plan: dict[str, Any]) -> None:
    """TensorFlow 1 between-graph replication (between_graph.py): the ps serves, each
    worker trains the matrix's graph-mode program on the ps's variables."""
    if plan["role"] in plan["servers"]:
        between_graph.serve(plan)
        return
    cluster = between_graph.TfCluster(plan)
    drivers.order()  # The batches, computed eagerly before the graph is built.
    drivers.run_graph(GRAPH, plan, plan["last_step"], cluster=cluster)


def pss(plan: dict[str, Any], driver: Any = EAGER) -> None:
    """ParameterServerStrategy: the ps and the workers serve (`tf.distribute.Server`); the
    chief is the coordinator, whose steps schedule one closure each."""
    import tensorflow as tf

    jobs = {"ps": ["ps"], "worker": [s for s in plan["servers"] if s != "ps"]}
    address = dict(zip(plan["servers"], addresses(plan["ports"]), strict=False))
    cluster = tf.train.ClusterSpec(
        {job: [address[s] for s in names] for job, names in jobs.items()}
    )
    if plan["role"] in plan["servers"]:
        job = "ps" if plan["role"] == "ps" else "worker"
        tf.distribute.Server(
            cluster, job_name=job, task_index=jobs[job].index(plan["role"]), protocol="grpc"
        ).join()
        return
    resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(cluster, rpc_layer="grpc")
    strategy = tf.distribute.experimental.ParameterServerStrategy(resolver)
    coordinator = tf.distribute.experimental.coordinator.ClusterCoordinator(strategy)
    _no_time_budget(driver)
    drivers.order()
    drivers.run_eager(driver, plan, plan["last_step"], strategy=strategy, coordinator=coordinator)
    # Where the closures ran, as the session's record of the coordinator has it.
    closures = monsession.testing.closure_record(coordinator).snapshot()
    records.record("closures", ran=closures.ran, put_back=closures.put_back)


PROGRAMS: dict[str, Callable[[dict[str, Any]], None]] = {
    "single": single,
    "mwms": mwms,
    "mirrored2": mirrored2,
    "tf1-cluster": tf1_cluster,
    "mwms-auto": lambda plan: mwms(plan, EAGER_AUTO),
    "mirrored2-auto": lambda plan: mirrored2(plan, EAGER_AUTO),
    "pss": pss,
    "pss-auto": lambda plan: pss(plan, EAGER_AUTO),
    "mwms-long": lambda plan: mwms(plan, EAGER_AUTO),
    "pss-long": lambda plan: pss(plan, EAGER_AUTO),
}
