"""Bounded waits on a cluster task that may have died.

After a preemption error TensorFlow can wait with no end on a task of a
TF1 cluster that died. `tf.compat.v1.Session.close()` waits for the remote
tasks the session used (tensorflow#21745): with the parameter server
SIGKILLed it never returns. And a new session on the cluster waits, when
it is created, until every task it may use answers: that is how a
parameter server restarted at once is recovered from, and why one that
stays dead hangs the retry. Here both waits get a bound:
`close_within` closes in a daemon thread and leaves it there after a few
seconds; `answers_within` asks a task for a no-op, with a deadline.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import tensorflow as tf

logger = logging.getLogger("monsession")

# How long closing a session broken by a preemption error may take. A session
# whose tasks answer closes in milliseconds, its threads stopped.
CLOSE_SECS = 5.0


def close_within(close: Callable[[], None], what: str, secs: float | None = None) -> bool:
    """Calls `close()`, waiting at most `secs` for it.

    `close` runs in a daemon thread. If it ends within `secs`, this call
    returns True, or raises what `close` raised. If not, the thread is left
    to finish (or to hang: it keeps the process from nothing), a WARNING
    names `what`, and this call returns False. The thread holds `close`,
    and so the session it closes, until `close` returns: the session is
    never closed a second time by a `__del__` on another thread.

    Args:
      close: What closes the session.
      what: What is closed, for the WARNING.
      secs: The longest wait; `CLOSE_SECS` by default.

    Returns:
      Whether `close` ended within `secs`.
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
