"""Every private TensorFlow symbol of `monsession._tf_compat`, touched once.

A TensorFlow release that removes or changes one fails here, with the name
of the symbol, before it fails somewhere deep in a training run.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from typing import Any

import pytest
import tensorflow as tf

from monsession import _tf_compat


def _graph_session() -> tuple[Any, Any, Any]:
    graph = tf.Graph()
    with graph.as_default():
        step = tf.compat.v1.train.get_or_create_global_step()
        sess = tf.compat.v1.Session(graph=graph)
        sess.run(tf.compat.v1.global_variables_initializer())
    return graph, sess, step


def check_supports_prepared_steps() -> None:
    _, sess, _ = _graph_session()
    assert _tf_compat.supports_prepared_steps(sess)
    assert not _tf_compat.supports_prepared_steps(object())


def check_fetch_handler() -> None:
    graph, _, step = _graph_session()
    with graph.as_default():
        read = tf.identity(step)
    handler = _tf_compat.fetch_handler(graph, {"step": read})
    assert [tensor.name for tensor in handler.fetches()] == [read.name]


def check_prepared_step() -> None:
    graph, sess, step = _graph_session()
    with graph.as_default():
        read = tf.identity(step)
        add = step.assign_add(1).op
    prepared = _tf_compat.prepared_step(sess, [read.name], [add.name])
    assert [int(value) for value in prepared()] in ([0], [1])
    assert int(sess.run(step)) == 1


def check_reraise_as_session_run() -> None:
    _, sess, _ = _graph_session()
    error = tf.errors.InvalidArgumentError(None, None, "broken step")
    with pytest.raises(tf.errors.InvalidArgumentError, match="broken step"):
        _tf_compat.reraise_as_session_run(sess, error)


def check_unfinalize_graph() -> None:
    graph = tf.Graph()
    graph.finalize()
    _tf_compat.unfinalize_graph(graph)
    with graph.as_default():
        tf.constant(1)


def check_global_step_read_tensors() -> None:
    graph, sess, step = _graph_session()
    assert _tf_compat.global_step_read_tensor(graph, create=False) is None
    with graph.as_default():
        read = _tf_compat.global_step_read_tensor(graph)
    assert _tf_compat.global_step_read_tensor(graph, create=False) is read
    assert int(sess.run(read)) == 0
    assert read.graph is graph and step.graph is graph
    with graph.as_default():  # Made outside the caller's control dependencies.
        other = tf.Graph()
        with other.as_default():
            tf.compat.v1.train.get_or_create_global_step()
            with tf.control_dependencies([tf.no_op(name="train")]):
                made = _tf_compat.global_step_read_tensor()
        assert not made.op.control_inputs


def check_resources_module() -> None:
    resources = _tf_compat.resources_module()
    with tf.Graph().as_default():
        assert resources.shared_resources() == []
        assert resources.local_resources() == []
        resources.report_uninitialized_resources()
        resources.initialize_resources(resources.shared_resources())


def check_checkpoint_saveables() -> None:
    checkpoint = tf.train.Checkpoint(v=tf.Variable(1.0))
    saveables = _tf_compat.checkpoint_saveables(checkpoint)
    assert saveables


def check_file_writer_cache_get_or_add() -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as logdir, tf.Graph().as_default():
        created = tf.compat.v1.summary.FileWriter(logdir, filename_suffix=".mine")
        try:
            assert _tf_compat.file_writer_cache_get_or_add(logdir, lambda: created) is created
            assert tf.compat.v1.summary.FileWriterCache.get(logdir) is created
            assert _tf_compat.file_writer_cache_get_or_add(logdir, lambda: None) is created
        finally:
            tf.compat.v1.summary.FileWriterCache.clear()


def check_file_writer_class() -> None:
    # The module global TensorFlow's FileWriterCache.get builds writers with.
    assert _tf_compat.file_writer_class() is tf.compat.v1.summary.FileWriter


def check_tf_logging() -> None:
    logging = _tf_compat.tf_logging()
    for name in ("info", "warning", "error", "log_every_n"):
        assert callable(getattr(logging, name))


def check_eager_tensor_base_class_and_host_copies_counted() -> None:
    tensor = tf.constant(3)
    assert isinstance(tensor, _tf_compat.eager_tensor_base_class())
    copies = []
    with _tf_compat.host_copies_counted(lambda: copies.append(1)):
        assert int(tensor) == 3
    assert int(tensor) == 3 and copies == [1]


def check_flat_call() -> None:
    weight = tf.Variable(2.0)

    @tf.function
    def scaled(x, y):
        weight.assign_add(1.0)
        return {"sum": x * weight + y}

    x, y = tf.constant([1.0, 2.0]), tf.constant(1.0)
    call = _tf_compat.flat_call(scaled.get_concrete_function(x, y))
    assert call(x, y)["sum"].numpy().tolist() == [4.0, 7.0]  # Outputs keep their structure.
    assert float(weight.numpy()) == 3.0
    with tf.GradientTape() as tape:  # Recorded on a tape, as a call of the function is.
        tape.watch(y)
        total = call(x, y)["sum"]
    assert float(tape.gradient(total, y)) == 2.0
    # A value captured at each call (a deferred capture) is taken anew by every call.
    scale = [2.0]

    @tf.function
    def deferred():
        graph = tf.compat.v1.get_default_graph()
        return graph.capture_call_time_value(lambda: tf.constant(scale[0]), tf.TensorSpec([]))

    call = _tf_compat.flat_call(deferred.get_concrete_function())
    assert float(call()) == 2.0
    scale[0] = 5.0
    assert float(call()) == 5.0


def check_read_variable_to_host() -> None:
    assert float(_tf_compat.read_variable_to_host(tf.Variable(2.5))) == 2.5
    mirrored = tf.Variable(1.0, caching_device="/cpu:0")
    assert float(_tf_compat.read_variable_to_host(mirrored)) == 1.0
    assert _tf_compat.is_plain_resource_variable(tf.Variable(2.5))
    assert not _tf_compat.is_plain_resource_variable(mirrored)
    assert not _tf_compat.is_plain_resource_variable(tf.constant(1.0))


def check_local_replica_values() -> None:
    from tensorflow.python.distribute.values import PerReplica

    per_replica = PerReplica((tf.constant(1.0), tf.constant(3.0)))
    assert isinstance(per_replica, tf.distribute.DistributedValues)
    values = _tf_compat.local_replica_values(per_replica)
    assert [float(value) for value in values] == [1.0, 3.0]


def _prints_ok(program: str) -> None:
    """Runs `program` in a fresh Python process; it must print just ``ok``."""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(program)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.stdout.split() == ["ok"], done.stderr[-2000:]


def check_cluster_coordinator() -> None:
    # Its own process: ParameterServerStrategy connects the eager context to the cluster.
    program = """
        import os
        import socket
        import tensorflow as tf
        from monsession import _tf_compat

        def free_port():
            with socket.socket() as sock:
                sock.bind(("127.0.0.1", 0))
                return sock.getsockname()[1]

        cluster = tf.train.ClusterSpec(
            {"worker": [f"127.0.0.1:{free_port()}"], "ps": [f"127.0.0.1:{free_port()}"]}
        )
        servers = [tf.distribute.Server(cluster, job, 0) for job in ("worker", "ps")]
        resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(cluster, rpc_layer="grpc")
        strategy = tf.distribute.experimental.ParameterServerStrategy(resolver)
        assert _tf_compat.cluster_coordinator(strategy) is None
        coordinator = tf.distribute.experimental.coordinator.ClusterCoordinator(strategy)
        assert _tf_compat.cluster_coordinator(strategy) is coordinator
        assert _tf_compat.cluster_spec_of(strategy).as_dict() == cluster.as_dict()
        with strategy.scope():
            counter = tf.Variable(0)
        ran, put_back = [], []
        _tf_compat.watch_closures(coordinator, ran.append, put_back.append)
        for _ in range(3):
            coordinator.schedule(tf.function(lambda: counter.assign_add(1)))
        assert _tf_compat.wait_for_closures(coordinator, 60.0)
        assert int(counter.numpy()) == 3
        assert (ran, put_back) == ([0, 0, 0], []), (ran, put_back)
        print("ok", flush=True)
        # The in-process servers and the coordinator's threads can keep the
        # interpreter's shutdown waiting for minutes on a loaded machine.
        os._exit(0)
    """
    _prints_ok(program)


def check_parameter_server_unavailable_error() -> None:
    error_class = _tf_compat.parameter_server_unavailable_error()
    assert issubclass(error_class, tf.errors.UnavailableError)
    wrapped = error_class(tf.errors.UnavailableError(None, None, "gone"))
    assert wrapped.message == "gone"


def check_one_line_per_record() -> None:
    """TensorFlow's own handler is found by its format, and only it goes."""
    program = """
        import logging
        import tensorflow as tf
        from monsession import _tf_compat

        ours = logging.StreamHandler()
        logger = tf.get_logger()  # No root handler yet: TensorFlow adds its own.
        logger.addHandler(ours)
        assert len(logger.handlers) == 2, logger.handlers
        logging.basicConfig()
        _tf_compat.one_line_per_record()
        assert logger.handlers == [ours], logger.handlers
        print("ok")
    """
    _prints_ok(program)


CHECKS: dict[str, Callable[[], None]] = {
    "session.BaseSession, Session._make_callable_from_options": check_supports_prepared_steps,
    "session._FetchHandler": check_fetch_handler,
    "config_pb2.CallableOptions, Session._make_callable_from_options": check_prepared_step,
    "Session._do_call": check_reraise_as_session_run,
    "Graph._unsafe_unfinalize": check_unfinalize_graph,
    "training_util._get_or_create_global_step_read, _get_global_step_read": (
        check_global_step_read_tensors
    ),
    "tensorflow.python.ops.resources": check_resources_module,
    "graph_view.ObjectGraphView.frozen_saveable_objects": check_checkpoint_saveables,
    "FileWriterCache._lock, FileWriterCache._cache": check_file_writer_cache_get_or_add,
    "writer_cache.FileWriter": check_file_writer_class,
    "tensorflow.python.platform.tf_logging": check_tf_logging,
    "tf.get_logger's handler, logging.Formatter._fmt": check_one_line_per_record,
    "ops._EagerTensorBase._numpy": check_eager_tensor_base_class_and_host_copies_counted,
    "ResourceVariable._caching_device, raw_ops.ReadVariableOp": check_read_variable_to_host,
    "ConcreteFunction._call_flat, captured_inputs, FuncGraph.deferred_external_captures": (
        check_flat_call
    ),
    "DistributedValues.values": check_local_replica_values,
    "ParameterServerStrategy._cluster_coordinator, _cluster_resolver, "
    "ClusterCoordinator._cluster.closure_queue, _cluster.workers, "
    "Worker._process_closure, _on_closure_failure": check_cluster_coordinator,
    "cluster_coordinator.PSUnavailableError": check_parameter_server_unavailable_error,
}


@pytest.mark.parametrize("symbol", list(CHECKS))
def test_private_symbol_still_works(symbol: str) -> None:
    try:
        CHECKS[symbol]()
    except Exception as error:
        pytest.fail(
            f"TensorFlow {tf.__version__} changed the private symbol {symbol} that "
            f"monsession._tf_compat relies on: {type(error).__name__}: {error}"
        )


def test_every_function_of_the_module_is_checked() -> None:
    public = {
        name
        for name, value in vars(_tf_compat).items()
        if callable(value) and not name.startswith("_") and value.__module__ == _tf_compat.__name__
    }
    checked = {
        name
        for check in CHECKS.values()
        for name in public
        if f"_tf_compat.{name}(" in _source(check)
    }
    assert public == checked, f"unchecked: {sorted(public - checked)}"


def _source(function: Callable[[], None]) -> str:
    import inspect

    return inspect.getsource(function)
