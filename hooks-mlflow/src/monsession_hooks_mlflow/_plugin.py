"""Plugin registration for monsession-hooks-mlflow.

Importing this module imports neither TensorFlow nor MLflow: the hook class
is named by a lazy reference.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import monsession
from monsession.plugins import ORDER_CHECKPOINT_SAVER, DefaultHook, TrainingSettings

_PACKAGE = "monsession_hooks_mlflow"


@monsession.hookimpl
def monsession_hook_classes() -> Sequence[str]:
    return [f"{_PACKAGE}._mlflow_hook:MlflowHook"]


@monsession.hookimpl
def monsession_default_hooks(settings: TrainingSettings) -> Sequence[DefaultHook] | None:
    """When MLflow's environment names a run (``MLFLOW_RUN_ID``, as `mlflow run` sets it):
    an `MlflowHook` logging the step rate into it every `log_step_count_steps`."""
    if not os.environ.get("MLFLOW_RUN_ID"):
        return None
    every = settings.log_step_count_steps
    if not every or every <= 0:
        return None
    from monsession_hooks_mlflow._mlflow_hook import MlflowHook

    hook = MlflowHook(every_n_steps=int(every))
    hook.state_key = "MlflowHook[MLFLOW_RUN_ID]"  # Beside a user's own MlflowHook.
    # Before the checkpoint saver: the state saved with a checkpoint includes its step.
    return [DefaultHook(hook, ORDER_CHECKPOINT_SAVER - 1, arguments=("log_step_count_steps",))]
