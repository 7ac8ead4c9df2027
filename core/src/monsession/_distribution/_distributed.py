"""Roles in a distributed job: who is the chief, which strategy spans workers.

The roles are TensorFlow's. In graph mode the caller says who is chief
(`MonitoredTrainingSession(is_chief=...)`) and TensorFlow's cluster runtime
(`tf.distribute.Server`, `SessionManager`) does the rest. In eager mode a
`tf.distribute` strategy describes the cluster: its cluster resolver names
this task, and the chief is the task of type ``"chief"``, or worker 0 when
the cluster has no chief task (TensorFlow's rule for
`MultiWorkerMirroredStrategy`).
"""

from __future__ import annotations

import os

import tensorflow as tf


def _resolver_is_chief(resolver: tf.distribute.cluster_resolver.ClusterResolver | None) -> bool:
    """TensorFlow's chief rule for the task a cluster resolver names."""
    task_type = getattr(resolver, "task_type", None)
    if resolver is None or not task_type:
        return True  # Not part of a cluster: a single process is its own chief.
    if task_type == "chief":
        return True
    if task_type == "worker":
        return resolver.task_id == 0 and "chief" not in resolver.cluster_spec().jobs
    return False  # "ps", "evaluator": never the chief.


def is_chief(strategy: tf.distribute.Strategy | None = None) -> bool:
    """Whether this process is the chief of its `tf.distribute` cluster.

    The chief is the task of type ``"chief"``, or worker 0 when the cluster has
    no ``"chief"`` task; parameter servers and evaluators are never the chief;
    a process outside any cluster is its own chief.

    ```python
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    if monsession.is_chief(strategy):
        export_model(...)
    ```

    Args:
      strategy: A `tf.distribute.Strategy`. By default the current one (inside
        `strategy.scope()`); outside any scope, the cluster described by the
        ``TF_CONFIG`` environment variable (so graph-mode jobs can use it too).

    Returns:
      `True` on the chief.
    """
    return _resolver_is_chief(_cluster_resolver(strategy))


def _cluster_resolver(
    strategy: tf.distribute.Strategy | None,
) -> tf.distribute.cluster_resolver.ClusterResolver | None:
    """The cluster resolver of `strategy`, the current strategy, or ``TF_CONFIG``."""
    if strategy is None and tf.distribute.has_strategy():
        strategy = tf.distribute.get_strategy()
    if strategy is None:
        return tf.distribute.cluster_resolver.TFConfigClusterResolver()
    return getattr(strategy, "cluster_resolver", None)


def worker_output_dir(directory: str, strategy: tf.distribute.Strategy | None = None) -> str:
    """Where this process writes files that another worker of its job would name alike.

    Some of TensorFlow's files are named after the host and the second they
    are written (the TF2 profiler's ``plugins/profile/<time>/<host>.xplane.pb``)
    or after the global step (``timeline-<step>.json``): workers on one
    host, or asynchronous workers, would overwrite each other's files in a
    directory they share. The chief, and a process outside any cluster, write
    into `directory` itself, with TensorFlow's names; every other task of a
    cluster writes into its own subdirectory, ``<directory>/<task type>-<task
    id>`` (``worker-1``), a run of its own in TensorBoard once it holds an
    event file.

    ```python
    profile_dir = monsession.plugins.worker_output_dir(self._output_dir)
    ```

    Args:
      directory: The directory the user gave.
      strategy: A `tf.distribute.Strategy`. By default the current one (inside
        `strategy.scope()`); outside any scope, the cluster described by the
        ``TF_CONFIG`` environment variable (graph-mode clusters), as
        `monsession.is_chief`.

    Returns:
      `directory`, or the subdirectory of this task.
    """
    resolver = _cluster_resolver(strategy)
    if _resolver_is_chief(resolver):
        return directory
    assert resolver is not None  # Outside a cluster a process is its own chief.
    return os.path.join(directory, f"{resolver.task_type}-{resolver.task_id}")


def uses_collectives(strategy: tf.distribute.Strategy) -> bool:
    """Whether every worker of `strategy` must run the same ops in the same order.

    True for `MultiWorkerMirroredStrategy`: its variables are kept in sync by
    collective ops, which a worker that skips them would leave waiting.
    """
    return isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy)


def schedules_closures(strategy: tf.distribute.Strategy) -> bool:
    """Whether steps under `strategy` schedule closures (`ParameterServerStrategy`)."""
    return isinstance(strategy, tf.distribute.experimental.ParameterServerStrategy)


def describe(strategy: tf.distribute.Strategy) -> str:
    """``"MultiWorkerMirroredStrategy worker:1"`` for messages."""
    resolver = strategy.cluster_resolver
    # TensorFlow's class is CollectiveAllReduceStrategy; users know its public name.
    name = "MultiWorkerMirroredStrategy" if uses_collectives(strategy) else type(strategy).__name__
    return f"{name} {resolver.task_type}:{resolver.task_id}"
