"""The standard callbacks' Python state, as JSON data saved with `KerasCallbacksHook`'s state."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from monsession_hooks_keras import _keras_compat

_NAME = "KerasCallbacksHook"


def plain(value: Any) -> Any:
    """`value` as JSON data: NumPy numbers and arrays become Python numbers and lists."""
    if isinstance(value, dict):
        return {str(key): plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    if isinstance(value, (np.generic, np.ndarray)):
        return value.tolist()
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if hasattr(value, "numpy"):  # A tensor or variable.
        return plain(value.numpy())
    raise TypeError(f"{_NAME}: cannot save {value!r} of a callback's state.")


def collect(callbacks: Sequence[Any]) -> list[dict[str, Any]]:
    """Each callback's class name and the attributes of `CALLBACK_STATE` it has set."""
    found = []
    for callback in callbacks:
        steps, epochs = _keras_compat.state_attributes(callback)
        values = _keras_compat.read_attributes(callback, steps + epochs)
        found.append({"class": type(callback).__name__, "state": plain(values)})
    return found


def check(callbacks: Sequence[Any], saved: Any) -> None:
    """Raises `ValueError` unless `saved` was collected from callbacks of the same classes."""
    classes = [type(callback).__name__ for callback in callbacks]
    saved_classes = [entry.get("class") for entry in saved] if isinstance(saved, list) else None
    if saved_classes != classes:
        raise ValueError(
            f"{_NAME}: the saved state is of the callbacks {saved_classes}, and this hook has "
            f"{classes}; their counters start afresh."
        )


def restore(callbacks: Sequence[Any], saved: list[dict[str, Any]], *, epochs: bool) -> None:
    """Puts back the saved attributes: those that follow the batches, and with `epochs` all.

    `saved` has passed `check`.
    """
    for callback, entry in zip(callbacks, saved, strict=True):
        steps, epoch_names = _keras_compat.state_attributes(callback)
        names = steps + epoch_names if epochs else steps
        values = {name: value for name, value in entry["state"].items() if name in names}
        _keras_compat.write_attributes(callback, values)
