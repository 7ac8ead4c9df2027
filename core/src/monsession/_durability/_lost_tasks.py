"""Bounded waits on a cluster task that may have died.

TensorFlow can wait for ever on a dead task: `Session.close()` on the tasks
the session used (tensorflow#21745), a new session until every task answers,
and `ParameterServerStrategy`'s coordinator for closures once a parameter
server died. `close_within` closes in a daemon thread and leaves it after a
few seconds; `answers_within` asks a task for a no-op with a deadline;
`join_unless_lost` waits in slices and raises once a parameter server
refuses connections.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable

import tensorflow as tf

from monsession._tf_compat import cluster_spec_of, parameter_server_unavailable_error

logger = logging.getLogger("monsession")

# How long closing a session broken by a preemption error may take. A session
# whose tasks answer closes in milliseconds, its threads stopped.
CLOSE_SECS = 5.0

# How long a parameter server may refuse connections while closures wait.
PS_REFUSED_SECS = 3.0


def close_within(close: Callable[[], None], what: str, secs: float | None = None) -> bool:
    """Calls `close()` in a daemon thread, waiting at most `secs` (`CLOSE_SECS`).

    Returns True once it ended (or raises what it raised); else leaves the
    thread (which keeps the session, so no `__del__` closes it twice), warns
    naming `what`, and returns False.
    """
    secs = CLOSE_SECS if secs is None else secs
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            close()
        except BaseException as error:
            outcome.append(error)
        else:
            outcome.append(None)

    thread = threading.Thread(target=run, name="monsession-close", daemon=True)
    thread.start()
    thread.join(secs)
    if not outcome:
        logger.warning(
            "Closing %s did not end within %g s: a task of its cluster probably died, and "
            "TensorFlow waits for it (tensorflow#21745). It is left to a background thread; "
            "the session goes on without it.",
            what,
            secs,
        )
        return False
    if outcome[0] is not None:
        raise outcome[0]
    return True


def answers_within(target: str, task: str, secs: float) -> bool:
    """Whether `task` of the cluster behind `target` runs a no-op within `secs`.

    Args:
      target: The master of a TF1 cluster, such as a `tf.distribute.Server`'s
        target (``"grpc://..."``).
      task: The task's name, such as ``"/job:ps/replica:0/task:0"``.
      secs: The longest wait.
    """
    graph = tf.Graph()
    with graph.as_default(), graph.device(task):
        no_op = tf.no_op()
    config = tf.compat.v1.ConfigProto(
        device_filters=[task], operation_timeout_in_ms=max(1, int(secs * 1000))
    )
    config.rpc_options.use_rpc_for_inprocess_master = True
    session = tf.compat.v1.Session(target, graph=graph, config=config)
    try:
        session.run(no_op)
    except (tf.errors.DeadlineExceededError, tf.errors.UnavailableError, tf.errors.AbortedError):
        return False
    finally:
        close_within(session.close, f"the session that asked {task} for a no-op")
    return True


def refuses_connections(address: str, secs: float = 1.0) -> bool:
    """Whether nothing listens at `address` (``"host:port"``): a task that is gone.

    Only a refused connection says so; a timeout or another error says
    nothing for sure (False).
    """
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=secs):
            return False
    except ConnectionRefusedError:
        return True
    except OSError:
        return False


def join_unless_lost(wait: Callable[[float], bool], parameter_servers: dict[str, str]) -> None:
    """Calls `wait(secs)` until it returns True, checking the parameter servers meanwhile.

    Args:
      wait: Waits at most `secs` for the closures scheduled so far; whether
        they all ran (it raises their error).
      parameter_servers: The address of each parameter server task, by its
        name (``"/job:ps/replica:0/task:0"``).

    Raises:
      UnavailableError: TensorFlow's `PSUnavailableError`, naming the
        parameter server, once one refused connections for `PS_REFUSED_SECS`.
    """
    refused_since: dict[str, float] = {}
    while not wait(1.0):
        now = time.monotonic()
        for task, address in parameter_servers.items():
            if not refuses_connections(address):
                refused_since.pop(task, None)
            elif now - refused_since.setdefault(task, now) >= PS_REFUSED_SECS:
                raise parameter_server_unavailable_error()(
                    tf.errors.UnavailableError(
                        None,
                        None,
                        f"parameter server {task} ({address}) refuses connections: it is gone, "
                        "and the closures scheduled wait for it (TensorFlow's coordinator "
                        "waits for the workers to come back instead of raising)",
                    )
                )


def parameter_server_tasks(strategy: tf.distribute.Strategy) -> dict[str, str]:
    """The address of each parameter server task of `strategy`'s cluster, by task name."""
    spec = cluster_spec_of(strategy)
    if "ps" not in spec.jobs:
        return {}
    return {
        f"/job:ps/replica:0/task:{index}": spec.task_address("ps", index)
        for index in spec.task_indices("ps")
    }
