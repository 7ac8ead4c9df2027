"""Keras's private API used by this family, each name tested in tests/test_keras_compat.py.

* `BackupAndRestore` hands the epoch to resume from to `model.fit` through
  the model's private `_initial_epoch` attribute (Keras 3.0 to 3.15 at
  least); `KerasCallbacksHook.initial_epoch` reads it so a custom loop
  resumes at the same epoch as `fit` would.
* Keras marks the no-op methods of `keras.callbacks.Callback` with a
  `_is_default` attribute and converts a batch's logs to host values only
  when some callback's batch-end method lacks it; `KerasCallbacksHook` uses
  the same rule to fetch nothing on steps where no callback reads logs (an
  eager-loop step costs ~240 µs here, a fetch and host copy adds to it on
  every step: see benchmarks/bench_keras.py).
"""

from __future__ import annotations

from typing import Any

INITIAL_EPOCH_ATTRIBUTE = "_initial_epoch"
DEFAULT_MARKER = "_is_default"


def initial_epoch(model: Any) -> int:
    """The epoch `BackupAndRestore` asked training to resume from (0 if none)."""
    return int(getattr(model, INITIAL_EPOCH_ATTRIBUTE, None) or 0)


def is_default(method: Any) -> bool:
    """Whether `method` is a no-op method of `keras.callbacks.Callback` (Keras's marker)."""
    return bool(getattr(method, DEFAULT_MARKER, False))
