"""Every private TensorFlow symbol core uses, in one place.

Each entry says why the public API does not do: either there is none, or the private path is
measurably faster (the figure is quoted; measured on TensorFlow 2.21, 2-core CPU machine, tiny
model of `benchmarks/`). The test `core/tests/test_tf_compat.py` touches every symbol, so a
TensorFlow release that removes one fails with a message naming it.

Import this module only where TensorFlow is already needed.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import types
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import tensorflow as tf
from tensorflow.python.ops.resource_variable_ops import ResourceVariable  # Asked per read.

if TYPE_CHECKING:
    import numpy as np
    from tensorflow.python.client import session as tf_session

# -- Graph mode: sessions, global step, init ops -----------------------------


def supports_prepared_steps(sess: object) -> bool:
    """Whether `sess` is a TensorFlow session (`session.BaseSession`) with prepared steps:
    no public base class covers `tf.compat.v1.Session` and `InteractiveSession`."""
    from tensorflow.python.client import session

    return isinstance(sess, session.BaseSession) and hasattr(sess, "_make_callable_from_options")


def fetch_handler(graph: tf.Graph, fetches: object) -> tf_session._FetchHandler:
    """`session._FetchHandler`: TensorFlow's own reading of a fetch structure, so that
    fetches mean exactly what they mean to `Session.run`; no public equivalent."""
    from tensorflow.python.client import session

    return session._FetchHandler(graph, fetches, {})


def prepared_step(
    sess: tf.compat.v1.Session, fetches: list[str], targets: list[str]
) -> Callable[[], list[Any]]:
    """`Session._make_callable_from_options`: a C++ step fetching and running these names.

    A step through it costs 0.43x the public `Session.make_callable` for the standard hook set's
    merged fetches (name lookups skipped per call), see `benchmarks/results/core.json`
    ("graph_callable_vs_make_callable"). `CallableOptions` is not exported under `tf.compat.v1`.
    """
    from tensorflow.core.protobuf import config_pb2

    options = config_pb2.CallableOptions(fetch=fetches, target=targets)
    return sess._make_callable_from_options(options)


def reraise_as_session_run(sess: tf.compat.v1.Session, error: Exception) -> None:
    """Re-raises `error` as `Session.run` does (`Session._do_call`), naming the failing op
    and its creation trace; no public function formats them."""

    def fail() -> None:
        raise error

    sess._do_call(fail)


def unfinalize_graph(graph: tf.Graph) -> None:
    """`Graph._unsafe_unfinalize`: undoes `finalize()` when the monitored session closes,
    as TensorFlow's does (its tests rely on it); no public API does it."""
    graph._unsafe_unfinalize()


def global_step_read_tensor(graph: tf.Graph | None = None, create: bool = True) -> tf.Tensor | None:
    """TensorFlow's shared read tensor of the global step; created if needed and `create`.

    The tensor TensorFlow's own hooks fetch (`training_util`'s private cache),
    safe to run before the variable is initialized; `None` without a global
    step (or, unless `create`, without that tensor). Created outside the
    caller's control dependencies, so reading the step runs no other op.
    """
    from tensorflow.python.training import training_util

    graph = graph if graph is not None else tf.compat.v1.get_default_graph()
    if not create:
        return training_util._get_global_step_read(graph)
    with graph.as_default(), graph.control_dependencies(None):
        return training_util._get_or_create_global_step_read(graph)


def resources_module() -> types.ModuleType:
    """`tensorflow.python.ops.resources`: the resource collections of default init ops
    (no public API lists or initializes shared/local resources)."""
    from tensorflow.python.ops import resources

    return resources


def checkpoint_saveables(checkpoint: tf.train.Checkpoint) -> list[object]:
    """The saveable objects of a `tf.train.Checkpoint`, for a graph-mode `Saver` (no
    public API turns an object-based checkpoint into a `Saver` var list)."""
    from tensorflow.python.checkpoint import graph_view

    return graph_view.ObjectGraphView(checkpoint).frozen_saveable_objects()


# -- Summaries and logging ------------------------------------------------------------------


def file_writer_cache_get_or_add(
    logdir: str, create: Callable[[], tf.compat.v1.summary.FileWriter]
) -> tf.compat.v1.summary.FileWriter:
    """The writer `tf.compat.v1.summary.FileWriterCache` holds for `logdir`, else `create()`'s.

    `FileWriterCache._lock` and `_cache`: `FileWriterCache.get(logdir)` names its event file by
    seconds and host only (two processes starting in the same second corrupt one file), and the
    cache takes no writer with a `filename_suffix` publicly. Ours keeps one writer and event
    file per directory per process, shared with TensorFlow's hooks. `create` is called under the
    cache's lock; `logdir` is the key as given.
    """
    cache_class = tf.compat.v1.summary.FileWriterCache
    with cache_class._lock:
        # clear() replaces the dict, so read it under the lock each time.
        cache = cache_class._cache
        writer = cache.get(logdir)
        if writer is None:
            writer = create()
            cache[logdir] = writer
        return writer


def file_writer_class() -> type[tf.compat.v1.summary.FileWriter]:
    """`writer_cache.FileWriter`, the class `FileWriterCache` builds writers with, looked
    up at call time: TensorFlow's hook tests replace it there with a fake writer."""
    from tensorflow.python.summary.writer import writer_cache

    return writer_cache.FileWriter


def tf_logging() -> types.ModuleType:
    """`tensorflow.python.platform.tf_logging`, looked up at call time: TensorFlow's hook
    tests patch its functions, which `tf.compat.v1.logging` holds separate references to.
    Each lookup applies `one_line_per_record` (it acts once per process)."""
    from tensorflow.python.platform import tf_logging

    one_line_per_record()
    return tf_logging


_LOGGER_CONFIGURED = threading.Event()
_CONFIGURING = threading.Lock()


def one_line_per_record() -> None:
    """Removes the handler TensorFlow gave its logger once the root logger has one; once.

    `tf.get_logger()` adds a stderr handler to the ``"tensorflow"`` logger if the root logger
    has none yet: a program that configures logging after importing TensorFlow would print every
    record twice. Once records reach a root handler, TensorFlow's own (a plain `StreamHandler`
    with `logging.BASIC_FORMAT`) goes; handlers a program added stay. Each monitored session and
    `monsession.tf_logging` line calls it; it acts once per process.
    """
    if _LOGGER_CONFIGURED.is_set() or not logging.getLogger().handlers:
        return  # Done, or nothing to do until records reach a root handler.
    with _CONFIGURING:
        if not _LOGGER_CONFIGURED.is_set():
            _remove_tensorflows_handler()
            _LOGGER_CONFIGURED.set()


def _remove_tensorflows_handler() -> None:
    logger = tf.get_logger()
    if not logger.propagate:
        return
    for handler in list(logger.handlers):
        formatter = handler.formatter
        # A private attribute of `logging.Formatter`, stable since Python 3.2.
        if type(handler) is logging.StreamHandler and formatter is not None:
            if formatter._fmt == logging.BASIC_FORMAT:
                logger.removeHandler(handler)


# -- Eager mode -------------------------------------------------------------------


def eager_tensor_base_class() -> type:
    """`ops._EagerTensorBase`, the class of every eager tensor (not exported)."""
    from tensorflow.python.framework import ops

    return ops._EagerTensorBase


@contextlib.contextmanager
def host_copies_counted(count: Callable[[], None]) -> Iterator[None]:
    """Calls `count()` at every host copy of an eager tensor made in the block: each one
    goes through `_EagerTensorBase._numpy`, replaced for the block (no public hook)."""
    tensor_class: Any = eager_tensor_base_class()
    read = tensor_class._numpy

    def counted(tensor: Any) -> Any:
        count()
        return read(tensor)

    tensor_class._numpy = counted
    try:
        yield
    finally:
        tensor_class._numpy = read


def flat_call(concrete: Any) -> Callable[..., Any]:
    """A call of `concrete` taking exactly the tensors of its inputs, in order.

    `ConcreteFunction._call_flat`: a public call binds its arguments to the
    signature and casts each, about as costly as a small step's hooks; callers
    pass the eager tensors the trace was made for. A profile names the call as
    a public one. Captures are listed once, or at each call when deferred.
    """
    call_flat, name, trace = (
        concrete._call_flat,
        concrete.graph.name,
        tf.profiler.experimental.Trace,
    )
    fixed = None if concrete.graph.deferred_external_captures else concrete.captured_inputs

    def call(*tensors: Any) -> Any:
        captured = concrete.captured_inputs if fixed is None else fixed
        with trace(name, tf_function_call="concrete"):
            return call_flat(list(tensors), captured)

    return call


def is_plain_resource_variable(variable: object) -> bool:
    """Whether `variable` is a plain `ResourceVariable`: no subclass, no caching device."""
    return type(variable) is ResourceVariable and variable._caching_device is None  # type: ignore[attr-defined]


def read_variable_to_host(variable: tf.Variable) -> np.ndarray | np.generic:
    """The value of a variable as NumPy, with one `ReadVariableOp`.

    For a plain `ResourceVariable` (no caching device) this skips the name scope and extra
    `Identity` of `numpy()`: 0.55x its time per read on CPU, the largest part of a host read
    (`benchmarks/results/core.json`, "eager_read_fast_vs_numpy"). Other variables use `numpy()`.
    """
    if is_plain_resource_variable(variable):
        return tf.raw_ops.ReadVariableOp(resource=variable.handle, dtype=variable.dtype).numpy()
    return variable.numpy()


def local_replica_values(value: tf.distribute.DistributedValues) -> tuple[Any, ...]:
    """`DistributedValues.values`: this process's replicas' values. The public way,
    `strategy.experimental_local_results`, needs the strategy, which a hook fetching
    ``"loss"`` after the step may not have (outside `strategy.scope()`)."""
    return tuple(value.values)


# -- Eager mode: ParameterServerStrategy's ClusterCoordinator -----------------


def cluster_coordinator(
    strategy: tf.distribute.Strategy,
) -> tf.distribute.experimental.coordinator.ClusterCoordinator | None:
    """`ParameterServerStrategy._cluster_coordinator`, or `None`: the public
    `ClusterCoordinator(strategy)` creates one (with its threads) when there is none."""
    return getattr(strategy, "_cluster_coordinator", None)


def cluster_spec_of(strategy: tf.distribute.Strategy) -> tf.train.ClusterSpec:
    """The `ClusterSpec` of a `ParameterServerStrategy`: its public `cluster_resolver`
    is `None` (TensorFlow 2.21), the one it was given is `_cluster_resolver`."""
    resolver = strategy.cluster_resolver or strategy._cluster_resolver
    return resolver.cluster_spec()


def wait_for_closures(
    coordinator: tf.distribute.experimental.coordinator.ClusterCoordinator, secs: float
) -> bool:
    """`coordinator.join()` that gives up after `secs`; whether every closure scheduled ran.

    `join` has no timeout; its closure queue's `wait` (`_cluster.closure_queue`)
    has one, and raises the closures' first error as `join` does.
    """
    return bool(coordinator._cluster.closure_queue.wait(timeout=secs))


def watch_closures(
    coordinator: tf.distribute.experimental.coordinator.ClusterCoordinator,
    ran: Callable[[int], None],
    put_back: Callable[[int], None],
) -> None:
    """Calls `ran(worker)` after each closure a worker of `coordinator` ran, and `put_back(worker)`
    when a worker failed while running one, which goes back to the queue for another worker.

    TensorFlow keeps no record of where closures ran. Its worker threads
    (`coordinator._cluster.workers`) look up `Worker._process_closure` and
    `Worker._on_closure_failure` on the worker object for each closure, so
    wrapping them on these objects watches this coordinator only.
    """
    failures = threading.local()  # Each worker runs its closures in its own thread.
    for worker in coordinator._cluster.workers:
        index, process, failed = (
            worker.worker_index,
            worker._process_closure,
            worker._on_closure_failure,
        )

        def process_closure(closure: Any, index: int = index, process: Any = process) -> None:
            failures.failed = False
            process(closure)
            if not failures.failed:
                ran(index)

        def on_closure_failure(
            closure: Any, error: Exception, index: int = index, failed: Any = failed
        ) -> None:
            failures.failed = True
            put_back(index)
            failed(closure, error)

        worker._process_closure = process_closure
        worker._on_closure_failure = on_closure_failure


def parameter_server_unavailable_error() -> type:
    """`cluster_coordinator.PSUnavailableError` (not exported), an `UnavailableError`: with
    ``TF_PSS_ENABLE_COORDINATION_SERVICE``, the one structured sign of a lost parameter server."""
    from tensorflow.python.distribute.coordinator import cluster_coordinator as module

    error_class: type = module.PSUnavailableError
    return error_class
