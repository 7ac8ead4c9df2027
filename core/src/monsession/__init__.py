"""monsession: TensorFlow's MonitoredSession for graph and eager mode, with plugins.

`import monsession` does not import TensorFlow: the names that need it are
loaded on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from monsession._control_hooks import FeedFnHook, FinalOpsHook, GlobalStepWaiterHook, StopAtStepHook
from monsession._hook_api import SessionRunArgs, SessionRunContext, SessionRunHook, SessionRunValues
from monsession._hookspecs import (
    ORDER_CHECKPOINT_SAVER,
    ORDER_OTHER,
    ORDER_STEP_COUNTER,
    ORDER_SUMMARY_SAVER,
    DefaultHook,
    TrainingSettings,
    hookimpl,
)
from monsession._lazy import lazy_attributes
from monsession._timer import SecondOrStepTimer

__version__ = "0.1.0"

_LAZY = {
    "MonitoredSession": "monsession._monitored_session",
    "SingularMonitoredSession": "monsession._monitored_session",
    "MonitoredTrainingSession": "monsession._training_session",
    "USE_DEFAULT": "monsession._training_session",
    "Scaffold": "monsession._scaffold",
    "SessionCreator": "monsession._session_creators",
    "ChiefSessionCreator": "monsession._session_creators",
    "WorkerSessionCreator": "monsession._session_creators",
    "EagerSession": "monsession._eager",
    "get_or_create_global_step": "monsession._global_step",
    "get_global_step": "monsession._global_step",
    "require_global_step": "monsession._global_step",
    "read_global_step": "monsession._global_step",
    "resolve_fetch": "monsession._fetches",
    "check_scalar": "monsession._fetches",
    "TensorNotFoundError": "monsession._fetches",
    "testing": "monsession.testing",
    "plugins": "monsession.plugins",
    "is_chief": "monsession._distributed",
    "hooks": "monsession.hooks",
    "DamagedCheckpointError": "monsession._checkpoint_files",
    "DirectoryLockedError": "monsession._directory_lock",
}

if TYPE_CHECKING:
    from monsession import hooks, plugins, testing
    from monsession._checkpoint_files import DamagedCheckpointError
    from monsession._directory_lock import DirectoryLockedError
    from monsession._distributed import is_chief
    from monsession._eager import EagerSession
    from monsession._fetches import TensorNotFoundError, check_scalar, resolve_fetch
    from monsession._global_step import (
        get_global_step,
        get_or_create_global_step,
        read_global_step,
        require_global_step,
    )
    from monsession._monitored_session import MonitoredSession, SingularMonitoredSession
    from monsession._scaffold import Scaffold
    from monsession._session_creators import (
        ChiefSessionCreator,
        SessionCreator,
        WorkerSessionCreator,
    )
    from monsession._training_session import USE_DEFAULT, MonitoredTrainingSession


__getattr__, __dir__ = lazy_attributes(__name__, _LAZY)

__all__ = [
    "ORDER_CHECKPOINT_SAVER",
    "ORDER_OTHER",
    "ORDER_STEP_COUNTER",
    "ORDER_SUMMARY_SAVER",
    "USE_DEFAULT",
    "ChiefSessionCreator",
    "DamagedCheckpointError",
    "DefaultHook",
    "DirectoryLockedError",
    "EagerSession",
    "FeedFnHook",
    "FinalOpsHook",
    "GlobalStepWaiterHook",
    "MonitoredSession",
    "MonitoredTrainingSession",
    "Scaffold",
    "SecondOrStepTimer",
    "SessionCreator",
    "SessionRunArgs",
    "SessionRunContext",
    "SessionRunHook",
    "SessionRunValues",
    "SingularMonitoredSession",
    "StopAtStepHook",
    "TensorNotFoundError",
    "TrainingSettings",
    "WorkerSessionCreator",
    "check_scalar",
    "get_global_step",
    "get_or_create_global_step",
    "hookimpl",
    "hooks",
    "is_chief",
    "lazy_attributes",
    "plugins",
    "read_global_step",
    "require_global_step",
    "resolve_fetch",
    "testing",
]
