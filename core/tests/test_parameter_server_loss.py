"""Under ParameterServerStrategy a preemption error that names a parameter
server is not retried: its variables are gone, the whole job must restart.

The real failure (a parameter server SIGKILLed under a running coordinator)
is the cluster matrix's `pss` x `ps-kill` cells (examples/distributed/tests/
cluster_matrix); the messages here are the ones TensorFlow 2.21 gave there.
"""

import logging
import os
import subprocess
import sys
import textwrap

import pytest
import tensorflow as tf

import monsession
from monsession import _tf_compat
from monsession._durability._retry import (
    RetryPolicy,
    in_current_strategy,
    lost_parameter_servers,
    why_not_retried,
)

# A closure that failed on a worker because parameter server 0 was gone.
CLOSURE_FAILED = (
    "Graph execution error:\n\n"
    "failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:42177: "
    "Failed to connect to remote host: Connection refused\n"
    "Additional GRPC error information from remote target /job:ps/replica:0/task:0/device:CPU:0 "
    "while calling /tensorflow.eager.EagerService/RunComponentFunction:\n"
    ':UNKNOWN:Error received from peer  {grpc_status:14, grpc_message:"failed to connect"}\n'
    "Additional GRPC error information from remote target /job:worker/replica:0/task:0 "
    "while calling /tensorflow.eager.EagerService/Enqueue:\n"
    ":UNKNOWN:Error received from peer  {grpc_status:14} [Op:__inference_worker_fn_11]"
)
# The coordinator's own read of a variable on parameter server 1.
READ_FAILED = (
    "failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:42178: "
    "Failed to connect to remote host: Connection refused\n"
    "Additional GRPC error information from remote target /job:ps/replica:0/task:1 "
    "while calling /tensorflow.eager.EagerService/Enqueue:\n"
    ":UNKNOWN:Error received from peer  {grpc_status:14} [Op:ReadVariableOp] name: "
)
# A worker that did not answer: TensorFlow's coordinator handles that itself.
WORKER_FAILED = (
    "Socket closed\n"
    "Additional GRPC error information from remote target /job:worker/replica:0/task:1 "
    "while calling /tensorflow.eager.EagerService/Enqueue:\n"
    ':UNKNOWN:Error received from peer  {grpc_status:14, grpc_message:"Socket closed"}'
)


def test_the_lost_parameter_server_is_read_from_the_preemption_error():
    assert lost_parameter_servers(tf.errors.UnavailableError(None, None, CLOSURE_FAILED)) == [
        "/job:ps/replica:0/task:0"
    ]
    assert lost_parameter_servers(tf.errors.AbortedError(None, None, READ_FAILED)) == [
        "/job:ps/replica:0/task:1"
    ]
    both = tf.errors.UnavailableError(None, None, READ_FAILED + "\n" + CLOSURE_FAILED)
    assert lost_parameter_servers(both) == ["/job:ps/replica:0/task:0", "/job:ps/replica:0/task:1"]


def test_other_errors_name_no_parameter_server():
    assert lost_parameter_servers(tf.errors.UnavailableError(None, None, WORKER_FAILED)) == []
    # Only preemption errors: anything else is not retried anyway.
    assert lost_parameter_servers(tf.errors.InvalidArgumentError(None, None, READ_FAILED)) == []
    assert lost_parameter_servers(RuntimeError(READ_FAILED)) == []


def test_the_coordination_services_report_names_the_job_when_not_the_task():
    reported = _tf_compat.parameter_server_unavailable_error()(
        tf.errors.UnavailableError(None, None, "heartbeat timeout")
    )
    assert lost_parameter_servers(reported) == ["/job:ps"]


def test_outside_parameter_server_strategy_the_policy_is_unchanged():
    policy = RetryPolicy(max_attempts=3)
    assert in_current_strategy(policy) is policy
    with tf.distribute.OneDeviceStrategy("/cpu:0").scope():
        assert in_current_strategy(policy) is policy


def test_inside_parameter_server_strategy_every_creators_policy_gets_the_rule():
    # Its own process: ParameterServerStrategy connects the eager context to the cluster.
    program = """
        import os
        import socket
        import tensorflow as tf
        import monsession
        from monsession._durability._retry import RetryPolicy, why_not_retried
        from monsession._durability._retry import retry_policy_of as policy_for

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
        chief = monsession.ChiefSessionCreator()
        creators = [chief, monsession.WorkerSessionCreator(max_wait_secs=9)]
        assert [policy_for(creator).cannot_retry for creator in creators] == [None, None]
        with strategy.scope():
            policies = [policy_for(creator) for creator in creators]
        assert [policy.cannot_retry for policy in policies] == [why_not_retried] * 2
        assert policies[0].max_attempts == RetryPolicy().max_attempts
        assert policies[1].deadline_secs == 9
        print("ok", flush=True)
        os._exit(0)  # the in-process servers can hold up the shutdown
    """
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(program)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"},
    )
    assert done.stdout.split() == ["ok"], done.stderr[-2000:]


class LostParameterServerCreator(monsession.SessionCreator):
    """Fails with `messages` in turn (an UnavailableError each), then creates a session."""

    def __init__(self, messages, policy):
        self.messages = list(messages)
        self.calls = 0
        self.retry_policy = policy

    def create_session(self):
        self.calls += 1
        if self.messages:
            raise tf.errors.UnavailableError(None, None, self.messages.pop(0))
        return monsession.ChiefSessionCreator().create_session()


def _policy_of_the_parameter_server_rule():
    """The rule `in_current_strategy` adds under ParameterServerStrategy."""
    return RetryPolicy(max_attempts=5, initial_backoff_secs=0.01, cannot_retry=why_not_retried)


def test_a_lost_parameter_server_raises_at_once_with_the_restart_advice(caplog):
    creator = LostParameterServerCreator(
        [WORKER_FAILED, READ_FAILED], _policy_of_the_parameter_server_rule()
    )
    with caplog.at_level(logging.INFO, logger="monsession"):
        with pytest.raises(tf.errors.UnavailableError) as raised:
            monsession.MonitoredSession(session_creator=creator)
    # The worker's error is retried (bounded, as ever); the parameter server's is not.
    assert creator.calls == 2
    message = str(raised.value)
    assert message.startswith(
        "MonitoredSession: creating the session failed with UnavailableError (failed to connect"
    )
    assert "parameter server /job:ps/replica:0/task:1 was lost" in message
    assert "Restart the whole job (parameter servers, workers and this coordinator)" in message
    assert isinstance(raised.value.__cause__, tf.errors.UnavailableError)
    assert READ_FAILED in str(raised.value.__cause__)
    retries = [r for r in caplog.records if "creating the session again" in r.getMessage()]
    assert len(retries) == 1 and "Socket closed" in retries[0].getMessage()
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert [r.getMessage() for r in errors] == [message]
