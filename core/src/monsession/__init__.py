"""monsession: TensorFlow's MonitoredSession for graph and eager mode, with plugins.

The top level holds what a training loop uses; what only hook packages need is in
`monsession.plugins`, helpers for tests in `monsession.testing`. `import monsession` does not
import TensorFlow: the names that need it are loaded on first use.
"""

from __future__ import annotations

import importlib as _importlib
from typing import TYPE_CHECKING, Any

from monsession._api._control_hooks import (
    FeedFnHook,
    FinalOpsHook,
    GlobalStepWaiterHook,
    SecondOrStepTimer,
    StopAtStepHook,
    TimedHook,
)
from monsession._api._hook_api import NextAction, SessionRunHook, StatefulHook
from monsession._api._run_context import SessionRunArgs, SessionRunContext, SessionRunValues
from monsession._attributes import MonsessionDeprecationWarning, RemovedIn2Warning
from monsession._attributes import deprecated as _deprecated
from monsession._attributes import lazy_attributes as _lazy_attributes
from monsession._plugins._hookspecs import hookimpl

__version__ = "1.0.0"

# Each module, and the names taken from it on first use (they need TensorFlow).
_FROM = {
    "monsession._session._monitored_session": "MonitoredSession SingularMonitoredSession",
    "monsession._factory._training_session": "MonitoredTrainingSession USE_DEFAULT",
    "monsession._session._scaffold": "Scaffold",
    "monsession._session._session_creators": "SessionCreator ChiefSessionCreator "
    "WorkerSessionCreator",
    "monsession._backends._eager": "EagerSession",
    "monsession._loops": "Epochs basic_train_loop",
    "monsession._api._types": "get_or_create_global_step get_global_step "
    "create_global_step assert_global_step global_step",
    "monsession._distribution._distributed": "is_chief",
    "monsession._durability._checkpoint_files": "DamagedCheckpointError",
}
_LAZY = {name: module for module, names in _FROM.items() for name in names.split()}
_LAZY.update({name: f"monsession.{name}" for name in ("hooks", "plugins", "testing", "tf_logging")})

# The names of `tf.compat.v1.train` whose classes live in hook families.
# `monsession.NAME` resolves them through `monsession.hooks` on first use,
# so nothing is imported until then; without the family it raises an
# `ImportError` naming the distribution to install.
_TF_FAMILY_NAMES = tuple(
    "CheckpointSaverHook CheckpointSaverListener LoggingTensorHook NanLossDuringTrainingError "
    "NanTensorHook ProfilerHook StepCounterHook SummarySaverHook".split()
)

if TYPE_CHECKING:
    from monsession import hooks, plugins, testing, tf_logging
    from monsession._api._types import (
        assert_global_step,
        create_global_step,
        get_global_step,
        get_or_create_global_step,
        global_step,
    )
    from monsession._backends._eager import EagerSession
    from monsession._distribution._distributed import is_chief
    from monsession._durability._checkpoint_files import DamagedCheckpointError
    from monsession._factory._training_session import USE_DEFAULT, MonitoredTrainingSession
    from monsession._loops import Epochs, basic_train_loop
    from monsession._session._monitored_session import MonitoredSession, SingularMonitoredSession
    from monsession._session._scaffold import Scaffold
    from monsession._session._session_creators import (
        ChiefSessionCreator,
        SessionCreator,
        WorkerSessionCreator,
    )


_lazy_getattr, _lazy_dir = _lazy_attributes(__name__, _LAZY)


def __getattr__(name: str) -> Any:
    if name in _TF_FAMILY_NAMES:
        from monsession import hooks

        return getattr(hooks, name)
    moved = _deprecated(f"monsession.{name}")
    if moved is not None and moved.alias_of is not None:
        # Hook-package authors' names that moved to `monsession.plugins`:
        # not in `__all__` nor in `dir(monsession)`.
        moved.warn(stacklevel=2)
        module, _, attribute = moved.alias_of.rpartition(".")
        return getattr(_importlib.import_module(module), attribute)
    return _lazy_getattr(name)


def __dir__() -> list[str]:
    return sorted({*_lazy_dir(), *_TF_FAMILY_NAMES})


__all__ = [
    "USE_DEFAULT",
    "ChiefSessionCreator",
    "DamagedCheckpointError",
    "EagerSession",
    "Epochs",
    "FeedFnHook",
    "FinalOpsHook",
    "GlobalStepWaiterHook",
    "MonitoredSession",
    "MonitoredTrainingSession",
    "MonsessionDeprecationWarning",
    "NextAction",
    "RemovedIn2Warning",
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
    "TimedHook",
    "WorkerSessionCreator",
    "assert_global_step",
    "basic_train_loop",
    "create_global_step",
    "get_global_step",
    "get_or_create_global_step",
    "global_step",
    "hookimpl",
    "hooks",
    "is_chief",
    "plugins",
    "testing",
    "tf_logging",
]
