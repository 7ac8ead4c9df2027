"""A dead cluster task never holds a session up for long (see `_durability/_retry`).

TensorFlow's `Session.close()` waits for ever on a parameter server that
was SIGKILLed; the real failure is run by the cluster matrix
(examples/distributed/tests/cluster_matrix, the tf1-cluster ps-kill cells).
Here a close that does not end is a thread registered with the session's
coordinator that does not stop, which `close()` waits for (up to the grace
period) as it waits for a dead task.
"""

import contextlib
import gc
import logging
import os
import socket
import subprocess
import sys
import textwrap
import threading
import weakref
from collections.abc import Iterator

import pytest
import tensorflow as tf

import monsession
from monsession._durability import _retry
from monsession._durability._retry import RetryBudget, RetryPolicy, close_within

GRACE_SECS = 30  # The coordinator's grace period: the old close waited this long.
PS = "/job:ps/replica:0/task:0"
# A step of a TF1 cluster's worker after its parameter server was SIGKILLed (TensorFlow 2.21).
PS_LOST = (
    "Graph execution error:\n\n"
    "UNAVAILABLE: From /job:worker/replica:0/task:0:\n"
    "recvmsg:Connection reset by peer\n"
    f"Additional GRPC error information from remote target {PS} while calling "
    "/tensorflow.WorkerService/RecvTensor:\n"
    ':UNKNOWN:Error received from peer  {grpc_message:"recvmsg:Connection reset by peer", '
    "grpc_status:14}"
)


class StuckThread(monsession.SessionRunHook):
    """Registers, with the first session's coordinator, a thread that stops only on `release`."""

    def __init__(self):
        self.release = threading.Event()
        self.threads = []

    def after_create_session(self, session, coord):
        if not self.threads:
            thread = threading.Thread(target=self.release.wait, daemon=True)
            coord.register_thread(thread)
            thread.start()
            self.threads.append(thread)


class FailOnce(monsession.SessionRunHook):
    """Raises `error` in the first `before_run`."""

    def __init__(self, error):
        self.error = error

    def before_run(self, run_context):
        error, self.error = self.error, None
        if error is not None:
            raise error


def _close_warnings(caplog):
    return [r.getMessage() for r in caplog.records if "did not end within" in r.getMessage()]


@pytest.fixture
def short_close(monkeypatch):
    monkeypatch.setattr(_retry, "CLOSE_SECS", 0.2)


def test_the_recovery_does_not_wait_for_the_broken_session_to_close(graph, caplog, short_close):
    step = monsession.get_or_create_global_step().assign_add(1)
    stuck = StuckThread()
    hooks = [stuck, FailOnce(tf.errors.AbortedError(None, None, "preempted"))]
    with caplog.at_level(logging.INFO, logger="monsession"):
        with monsession.MonitoredSession(hooks=hooks, stop_grace_period_secs=GRACE_SECS) as sess:
            assert sess.run(step) == 1  # Run again in the session created after the error.
            assert sess.recoveries == 1
    assert _close_warnings(caplog) == [
        "Closing the session after AbortedError did not end within 0.2 s: a task of its "
        "cluster probably died, and TensorFlow waits for it (tensorflow#21745). It is left "
        "to a background thread; the session goes on without it."
    ]
    assert stuck.threads[0].is_alive()
    stuck.release.set()


def test_the_close_after_an_error_does_not_wait_for_the_broken_session(graph, caplog, short_close):
    step = monsession.get_or_create_global_step().assign_add(1)
    stuck = StuckThread()
    hooks = [stuck, FailOnce(tf.errors.UnavailableError(None, None, PS_LOST))]
    with caplog.at_level(logging.INFO, logger="monsession"):
        with pytest.raises(tf.errors.UnavailableError):
            with monsession.SingularMonitoredSession(
                hooks=hooks, stop_grace_period_secs=GRACE_SECS
            ) as sess:
                sess.run(step)
    assert sess.raw_session() is None
    assert [w.split(" did not")[0] for w in _close_warnings(caplog)] == [
        "Closing the session after UnavailableError"
    ]
    stuck.release.set()


def test_a_healthy_session_is_closed_as_ever(graph, caplog, short_close):
    step = monsession.get_or_create_global_step().assign_add(1)
    with caplog.at_level(logging.INFO, logger="monsession"):
        with monsession.MonitoredSession(hooks=[StuckThread()], stop_grace_period_secs=0) as sess:
            sess.run(step)
    assert _close_warnings(caplog) == []


class Session:
    """Stands for a session whose close waits for `release`; `closed` counts the closes."""

    def __init__(self, release):
        self.release = release
        self.closed = 0

    def close(self):
        self.closed += 1
        self.release.wait()

    def __del__(self):
        self.closed += 1  # As tf.compat.v1.Session's __del__ closes.


def test_an_abandoned_session_lives_until_its_close_ends(caplog):
    release = threading.Event()
    session = Session(release)
    alive = weakref.ref(session)
    with caplog.at_level(logging.INFO, logger="monsession"):
        assert not close_within(session.close, "the test's session", 0.1)
    assert _close_warnings(caplog)[0].startswith("Closing the test's session did not end")
    del session
    gc.collect()
    assert alive() is not None and alive().closed == 1  # Held by the thread: no __del__.
    (thread,) = [t for t in threading.enumerate() if t.name == "monsession-close"]
    release.set()
    thread.join()
    gc.collect()
    assert alive() is None


def test_a_close_that_ends_in_time_returns_or_raises_as_itself():
    release = threading.Event()
    release.set()
    assert close_within(Session(release).close, "a session", 30)

    def fails():
        raise tf.errors.CancelledError(None, None, "cancelled")

    with pytest.raises(tf.errors.CancelledError, match="cancelled"):
        close_within(fails, "a session", 30)


def _budget(answers, bound=20.0):
    policy = RetryPolicy(initial_backoff_secs=0.01, lost_server_secs=bound)
    return RetryBudget(policy, "MonitoredSession", answers)


def test_a_lost_parameter_server_that_does_not_answer_ends_the_job(caplog):
    asked = []

    def answers(task, secs):
        asked.append((task, secs))
        return False

    error = tf.errors.UnavailableError(None, None, PS_LOST)
    with caplog.at_level(logging.INFO, logger="monsession"):
        with pytest.raises(tf.errors.UnavailableError) as raised:
            _budget(answers).failed(error, "running a step")
    ((task, secs),) = asked
    assert task == PS and 0 < secs <= 20
    message = str(raised.value)
    assert message.startswith("MonitoredSession: running a step failed with UnavailableError")
    assert (
        f"parameter server {PS} was lost and did not answer again within 20 s; the variables "
        "it held were lost with it. Restart the whole job (parameter servers and workers): it "
        "resumes from the latest checkpoint."
    ) in message
    waiting = [r for r in caplog.records if "waiting at most" in r.getMessage()]
    assert len(waiting) == 1 and waiting[0].levelno == logging.WARNING


def test_a_parameter_server_that_answers_again_is_retried_at_once():
    asked = []
    budget = _budget(lambda task, secs: asked.append(task) or True)
    error = tf.errors.UnavailableError(None, None, PS_LOST)
    for _ in range(3):  # No backoff: the ps is back.
        budget.failed(error, "creating the session")
    assert asked == [PS] * 3


def test_the_bound_holds_for_the_whole_streak_even_where_the_session_cannot_ask():
    error = tf.errors.AbortedError(None, None, PS_LOST)
    with pytest.raises(tf.errors.AbortedError, match="did not answer again within 0 s"):
        _budget(lambda task, secs: None, bound=0.0).failed(error, "running a step")
    # Other errors keep the usual retries.
    _budget(lambda task, secs: pytest.fail("asked")).failed(
        tf.errors.UnavailableError(None, None, "worker gone"), "running a step"
    )


def test_a_lost_parameter_server_of_a_real_cluster_is_asked():
    # Its own process: the in-process servers can hold up the shutdown.
    program = """
        import os
        import socket
        import tensorflow as tf
        from monsession._durability._retry import answers_within

        def free_port():
            with socket.socket() as sock:
                sock.bind(("127.0.0.1", 0))
                return sock.getsockname()[1]

        ps = [f"127.0.0.1:{free_port()}" for _ in range(2)]
        cluster = tf.train.ClusterSpec({"worker": [f"127.0.0.1:{free_port()}"], "ps": ps})
        worker = tf.distribute.Server(cluster, "worker", 0)
        serving = tf.distribute.Server(cluster, "ps", 0)  # ps 1 never starts: as if dead.
        print(
            answers_within(worker.target, "/job:ps/replica:0/task:0", 60),
            answers_within(worker.target, "/job:ps/replica:0/task:1", 0.5),
            flush=True,
        )
        os._exit(0)
    """
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(program)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"},
    )
    assert done.stdout.split() == ["True", "False"], done.stderr[-2000:]


@contextlib.contextmanager
def _closed_port() -> Iterator[str]:
    """The address of a port nothing listens on, while in use.

    The port stays bound here and never listens: a connection to it is
    refused, and no other process can bind it meanwhile (one that took a
    released port and listened would make the waits below last for ever).
    """
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield f"127.0.0.1:{sock.getsockname()[1]}"


def test_a_listening_address_is_not_gone_and_a_closed_port_is() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        assert not _retry.refuses_connections(f"127.0.0.1:{server.getsockname()[1]}")
    with _closed_port() as address:
        assert _retry.refuses_connections(address)


def test_waiting_for_closures_ends_naming_a_parameter_server_that_is_gone() -> None:
    """TensorFlow's coordinator can wait for the workers for an hour once the ps died (they
    die with it): the wait ends once the ps refused connections for PS_REFUSED_SECS."""
    waited: list[float] = []

    def never_done(secs: float) -> bool:  # Closures that wait for a dead cluster.
        waited.append(secs)
        return False

    task = "/job:ps/replica:0/task:1"
    with _closed_port() as address, pytest.raises(tf.errors.UnavailableError) as raised:
        _retry.join_unless_lost(never_done, {task: address})
    assert f"parameter server {task}" in str(raised.value)
    assert "refuses connections" in str(raised.value)
    assert _retry.lost_parameter_servers(raised.value) == [task]
    assert _retry.why_not_retried(raised.value) is not None
    assert sum(waited) >= _retry.PS_REFUSED_SECS


def test_waiting_for_closures_goes_on_while_the_parameter_server_listens() -> None:
    slices = iter([False] * 6 + [True])
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        address = f"127.0.0.1:{server.getsockname()[1]}"
        _retry.join_unless_lost(lambda secs: next(slices), {PS: address})
    assert next(slices, "all used") == "all used"
