"""monsession-hooks-mlflow: MLflow experiment tracking, each step once across restarts.

    from monsession.hooks import MlflowHook

Importing this package imports neither TensorFlow nor MLflow; the hook is
loaded on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from monsession.plugins import lazy_attributes

__version__ = "1.0.0"

_LAZY = {"MlflowHook": "monsession_hooks_mlflow._mlflow_hook"}

if TYPE_CHECKING:
    from monsession_hooks_mlflow._mlflow_hook import MlflowHook

__getattr__, __dir__ = lazy_attributes(__name__, _LAZY)

__all__ = ["MlflowHook"]
