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
* The standard callbacks keep what training has done so far in Python
  attributes (`CALLBACK_STATE`), some private: `ModelCheckpoint` and
  `BackupAndRestore` count the batches since their last save
  (`_batches_seen_since_last_saving`, `_last_batch_seen`) and remember the
  epoch (`_current_epoch`), `TensorBoard` numbers its batch summaries with
  `_global_train_batch`. `KerasCallbacksHook` saves them with its hook
  state, so that after a restart or a recovery ModelCheckpoint saves at the
  batches of the uninterrupted run (without them, a restart at step 15
  with `save_freq=5` saved at steps 18 and 23, not 20 and 25).
"""

from __future__ import annotations

from typing import Any

INITIAL_EPOCH_ATTRIBUTE = "_initial_epoch"
DEFAULT_MARKER = "_is_default"

# The Python state of the standard callbacks (Keras 3.15), by `keras.callbacks`
# class name: (the attributes that follow the batches trained, restored after
# a recovery too; the attributes that sum up the epochs, restored in a new
# process only, since a recovery repeats no epoch's end). A subclass has its
# base's.
CALLBACK_STATE: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "ModelCheckpoint": (
        ("_batches_seen_since_last_saving", "_last_batch_seen"),
        ("_current_epoch", "best"),
    ),
    "BackupAndRestore": (
        ("_batches_seen_since_last_saving", "_last_batch_seen"),
        ("_current_epoch",),
    ),
    "TensorBoard": (("_global_train_batch",), ()),
    "EarlyStopping": ((), ("wait", "stopped_epoch", "best", "best_epoch")),
    "ReduceLROnPlateau": ((), ("wait", "cooldown_counter", "best")),
    "History": ((), ("epoch", "history")),
}


def initial_epoch(model: Any) -> int:
    """The epoch `BackupAndRestore` asked training to resume from (0 if none)."""
    return int(getattr(model, INITIAL_EPOCH_ATTRIBUTE, None) or 0)


def is_default(method: Any) -> bool:
    """Whether `method` is a no-op method of `keras.callbacks.Callback` (Keras's marker)."""
    return bool(getattr(method, DEFAULT_MARKER, False))


def state_attributes(callback: Any) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The attributes of `callback` in `CALLBACK_STATE` (by its class or a base), else none."""
    import keras

    for name, attributes in CALLBACK_STATE.items():
        if isinstance(callback, getattr(keras.callbacks, name)):
            return attributes
    return (), ()


def read_attributes(callback: Any, names: tuple[str, ...]) -> dict[str, Any]:
    """The attributes `names` (of `CALLBACK_STATE`) that `callback` has set so far."""
    return {name: getattr(callback, name) for name in names if hasattr(callback, name)}


def write_attributes(callback: Any, values: dict[str, Any]) -> None:
    """Puts back attributes of `CALLBACK_STATE` read by `read_attributes`."""
    for name, value in values.items():
        setattr(callback, name, value)
