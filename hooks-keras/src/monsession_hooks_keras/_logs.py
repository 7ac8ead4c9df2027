"""Keras `logs`: which callbacks need them per batch, and their host values."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from monsession_hooks_keras._keras_compat import is_default


def overrides(callback: Any, name: str) -> bool:
    """Whether `callback` has its own `name` method (its class's, or set on it).

    `LambdaCallback` sets the functions it is given on the instance.
    """
    method = getattr(callback, name, None)
    return method is not None and not is_default(method)


def acts_on(callback: Any, when: str) -> bool:
    """Whether `callback` does something at batch `when` ("begin" or "end").

    `model.fit` calls `on_train_batch_<when>`, which by default calls the
    older `on_batch_<when>`: either may be the callback's own.
    """
    return overrides(callback, f"on_train_batch_{when}") or overrides(callback, f"on_batch_{when}")


def needs_batch_logs(callbacks: Iterable[Any]) -> bool:
    """Whether some callback reads the logs of each batch (Keras's own rule).

    Keras converts a batch's logs for the callbacks as soon as one of them
    has its own `on_train_batch_end` or `on_batch_end`.
    """
    return any(acts_on(callback, "end") for callback in callbacks)


def needs_logs(callbacks: Sequence[Any]) -> bool:
    """Whether some callback reads logs: of each batch, or of an epoch or training's end.

    An epoch's logs default to its last step's, so they are fetched with each step.
    """
    return needs_batch_logs(callbacks) or any(
        overrides(callback, name)
        for callback in callbacks
        for name in ("on_epoch_end", "on_train_end")
    )


def host_value(value: Any) -> Any:
    """A log value on the host: a Python float for one number, else a NumPy array."""
    array = np.asarray(value)
    if array.size == 1 and array.dtype.kind in "biuf":
        return float(array.reshape(()))
    return array


def host_logs(values: Mapping[str, Any]) -> dict[str, Any]:
    """The fetched step outputs as Keras logs (host values)."""
    return {name: host_value(value) for name, value in values.items()}
