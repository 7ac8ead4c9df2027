"""monsession: TensorFlow's MonitoredSession for graph and eager mode, with plugins.

`import monsession` does not import TensorFlow: the names that need it are
loaded on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from monsession._api._arguments import check_directory, check_flag, check_interval, check_schedule
from monsession._api._control_hooks import (
    FeedFnHook,
    FinalOpsHook,
    GlobalStepWaiterHook,
    StopAtStepHook,
)
from monsession._api._hook_api import (
    HOOK_METHOD_NAMES,
    NextAction,
    SessionRunArgs,
    SessionRunContext,
    SessionRunHook,
    SessionRunValues,
    StatefulHook,
    as_run_context,
    hook_overrides,
)
from monsession._api._timer import SecondOrStepTimer
from monsession._durability._error_text import error_cause
from monsession._lazy import lazy_attributes
from monsession._plugins._hookspecs import (
    ORDER_CHECKPOINT_SAVER,
    ORDER_OTHER,
    ORDER_STEP_COUNTER,
    ORDER_SUMMARY_SAVER,
    DefaultHook,
    TrainingSettings,
    hookimpl,
)

__version__ = "0.1.0"

_LAZY = {
    "MonitoredSession": "monsession._session._monitored_session",
    "SingularMonitoredSession": "monsession._session._monitored_session",
    "MonitoredTrainingSession": "monsession._factory._training_session",
    "USE_DEFAULT": "monsession._factory._training_session",
    "Scaffold": "monsession._session._scaffold",
    "SessionCreator": "monsession._session._session_creators",
    "ChiefSessionCreator": "monsession._session._session_creators",
    "WorkerSessionCreator": "monsession._session._session_creators",
    "EagerSession": "monsession._backends._eager",
    "Epochs": "monsession._backends._epochs",
    "event_file_writer": "monsession._durability._event_files",
    "save_hook_state": "monsession._durability._hook_state",
    "load_hook_state": "monsession._durability._hook_state",
    "attach_hook_state": "monsession._durability._hook_state",
    "prune_hook_state": "monsession._durability._hook_state",
    "get_or_create_global_step": "monsession._api._global_step",
    "get_global_step": "monsession._api._global_step",
    "require_global_step": "monsession._api._global_step",
    "read_global_step": "monsession._api._global_step",
    "resolve_fetch": "monsession._backends._fetches",
    "check_scalar": "monsession._backends._fetches",
    "TensorNotFoundError": "monsession._backends._fetches",
    "testing": "monsession.testing",
    "tf_logging": "monsession.tf_logging",
    "plugins": "monsession.plugins",
    "is_chief": "monsession._distribution._distributed",
    "settle": "monsession._backends._pending",
    "hooks": "monsession.hooks",
    "DamagedCheckpointError": "monsession._durability._checkpoint_files",
    "DirectoryLockedError": "monsession._durability._directory_lock",
    "DirectoryLockHandle": "monsession._durability._directory_lock",
    "lock_checkpoint_dir": "monsession._durability._directory_lock",
}

# The names of `tf.compat.v1.train` whose classes live in hook families.
# `monsession.NAME` resolves them through `monsession.hooks` on first use,
# so nothing is imported until then; without the family it raises an
# `ImportError` naming the distribution to install.
_TF_FAMILY_NAMES = (
    "CheckpointSaverHook",
    "CheckpointSaverListener",
    "LoggingTensorHook",
    "NanLossDuringTrainingError",
    "NanTensorHook",
    "ProfilerHook",
    "StepCounterHook",
    "SummarySaverHook",
)

if TYPE_CHECKING:
    from monsession import hooks, plugins, testing, tf_logging
    from monsession._api._global_step import (
        get_global_step,
        get_or_create_global_step,
        read_global_step,
        require_global_step,
    )
    from monsession._backends._eager import EagerSession
    from monsession._backends._epochs import Epochs
    from monsession._backends._fetches import TensorNotFoundError, check_scalar, resolve_fetch
    from monsession._backends._pending import settle
    from monsession._distribution._distributed import is_chief
    from monsession._durability._checkpoint_files import DamagedCheckpointError
    from monsession._durability._directory_lock import (
        DirectoryLockedError,
        DirectoryLockHandle,
        lock_checkpoint_dir,
    )
    from monsession._durability._event_files import event_file_writer
    from monsession._durability._hook_state import (
        attach_hook_state,
        load_hook_state,
        prune_hook_state,
        save_hook_state,
    )
    from monsession._factory._training_session import USE_DEFAULT, MonitoredTrainingSession
    from monsession._session._monitored_session import MonitoredSession, SingularMonitoredSession
    from monsession._session._scaffold import Scaffold
    from monsession._session._session_creators import (
        ChiefSessionCreator,
        SessionCreator,
        WorkerSessionCreator,
    )


_lazy_getattr, _lazy_dir = lazy_attributes(__name__, _LAZY)


def __getattr__(name: str) -> Any:
    if name in _TF_FAMILY_NAMES:
        from monsession import hooks

        return getattr(hooks, name)
    return _lazy_getattr(name)


def __dir__() -> list[str]:
    return sorted({*_lazy_dir(), *_TF_FAMILY_NAMES})


__all__ = [
    "HOOK_METHOD_NAMES",
    "ORDER_CHECKPOINT_SAVER",
    "ORDER_OTHER",
    "ORDER_STEP_COUNTER",
    "ORDER_SUMMARY_SAVER",
    "USE_DEFAULT",
    "ChiefSessionCreator",
    "DamagedCheckpointError",
    "DefaultHook",
    "DirectoryLockHandle",
    "DirectoryLockedError",
    "EagerSession",
    "Epochs",
    "FeedFnHook",
    "FinalOpsHook",
    "GlobalStepWaiterHook",
    "MonitoredSession",
    "MonitoredTrainingSession",
    "NextAction",
    "Scaffold",
    "SecondOrStepTimer",
    "SessionCreator",
    "SessionRunArgs",
    "SessionRunContext",
    "SessionRunHook",
    "SessionRunValues",
    "SingularMonitoredSession",
    "StatefulHook",
    "StopAtStepHook",
    "TensorNotFoundError",
    "TrainingSettings",
    "WorkerSessionCreator",
    "as_run_context",
    "attach_hook_state",
    "check_directory",
    "check_flag",
    "check_interval",
    "check_scalar",
    "check_schedule",
    "error_cause",
    "event_file_writer",
    "get_global_step",
    "get_or_create_global_step",
    "hook_overrides",
    "hookimpl",
    "hooks",
    "is_chief",
    "lazy_attributes",
    "load_hook_state",
    "lock_checkpoint_dir",
    "plugins",
    "prune_hook_state",
    "read_global_step",
    "require_global_step",
    "resolve_fetch",
    "save_hook_state",
    "settle",
    "testing",
    "tf_logging",
]
