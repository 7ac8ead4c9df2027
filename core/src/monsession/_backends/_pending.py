"""Steps still in flight: `settle(session)` waits for them.

Under `ParameterServerStrategy` with a `ClusterCoordinator`, a step
schedules closures that run later on the workers, while the session counts
the step at once. Before something that must see exactly the steps counted
(a checkpoint, the end of the session), `settle` joins the coordinator.
Elsewhere it does nothing.
"""

from __future__ import annotations

from typing import Any


def settle(session: Any) -> None:
    """Waits until every step run so far has executed (joins the coordinator).

    For hooks that save or read state that the global step must describe,
    e.g. `CheckpointSaverHook` before each save and in `end()`. After the
    join the session compares the global step with the steps it ran, and
    warns once if a closure advanced it more than once (run again after its
    worker died). In graph mode, and in eager mode without a
    `ClusterCoordinator`, steps are done when `run()` returns: it returns at
    once.

    Args:
      session: The session a hook was given (`after_create_session`,
        `run_context.session`, `end`).

    Raises:
      Exception: Whatever a scheduled closure raised (as `ClusterCoordinator.join()`).
    """
    from monsession._backends._eager import EagerSession  # TensorFlow is loaded: a session exists.

    if isinstance(session, EagerSession):
        session.settle()
