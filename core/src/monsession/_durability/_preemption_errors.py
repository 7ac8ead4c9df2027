"""The preemption errors a session is re-created after, and those no retry cures.

`AbortedError` and `UnavailableError` re-create the session (`_retry`). One
kind cannot be cured so: under `ParameterServerStrategy`, a lost parameter
server. The variables live on the parameter servers. When one dies, its variables
die with it, and TensorFlow cannot reconnect the coordinator to a new one:
`ClusterCoordinator`'s documentation says to restart the coordinator (the
whole job), which then restores the latest checkpoint. Re-creating the
session in the same process fails again and again, for minutes with the
default retries, so such an error is raised at once, naming the parameter
server. A dead worker is another matter: the coordinator runs its closures
on the other workers, and that error never reaches the session.

In a TF1 cluster (graph mode, between-graph replication) a parameter server
restarted at once can be recovered from: the chief restores the latest
checkpoint into it. There the lost ps is waited for, a short time only
(`_retry`), and `why_lost_server_not_retried` says why the job ends.
"""

from __future__ import annotations

import re

import tensorflow as tf

from monsession._tf_compat import parameter_server_unavailable_error

# What `_RecoverableSession` catches to re-create the session, as in TensorFlow.
PREEMPTION_ERRORS = (tf.errors.AbortedError, tf.errors.UnavailableError)

# gRPC adds this line to an error for each remote task that did not answer.
# TensorFlow gives the failed task in no structured field: its own
# `ClusterCoordinator` tells parameter server failures from worker failures
# by this same text. The multi-process test of examples/distributed kills a
# parameter server and checks that its name is found here.
_FROM_PARAMETER_SERVER = re.compile(
    r"GRPC error information from remote target (/job:ps/replica:\d+/task:\d+)"
)

# A parameter server task named in the text of a `PSUnavailableError`.
_PARAMETER_SERVER_TASK = re.compile(r"/job:ps/replica:\d+/task:\d+")


def lost_parameter_servers(error: Exception) -> list[str]:
    """The parameter server tasks that a preemption error says did not answer.

    Args:
      error: Any exception.

    Returns:
      Sorted task names such as ``"/job:ps/replica:0/task:0"``; the job,
      ``"/job:ps"``, when a `PSUnavailableError` names no task (TensorFlow's
      coordination service reports a parameter server failure so); empty
      for any other error.
    """
    if not isinstance(error, PREEMPTION_ERRORS):
        return []
    names = sorted(set(_FROM_PARAMETER_SERVER.findall(str(error))))
    if not names and isinstance(error, parameter_server_unavailable_error()):
        return sorted(set(_PARAMETER_SERVER_TASK.findall(str(error)))) or ["/job:ps"]
    return names


def why_not_retried(error: Exception) -> str | None:
    """Why re-creating the session cannot cure `error`: a parameter server is lost; else `None`."""
    lost = lost_parameter_servers(error)
    if not lost:
        return None
    return (
        f"under ParameterServerStrategy it means that parameter server {', '.join(lost)} "
        "was lost, and the variables it held with it; TensorFlow cannot reconnect this "
        "coordinator to it. Restart the whole job (parameter servers, workers and this "
        "coordinator): it resumes from the latest checkpoint"
    )


def why_lost_server_not_retried(lost: list[str], secs: float) -> str:
    """Why the session is not created again after parameter servers `lost` stayed away `secs`."""
    return (
        f"parameter server {', '.join(lost)} was lost and did not answer again within "
        f"{secs:g} s; the variables it held were lost with it. Restart the whole job "
        "(parameter servers and workers): it resumes from the latest checkpoint"
    )
