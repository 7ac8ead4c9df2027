"""Every private TensorFlow symbol this family uses, in one place.

`tests/test_checkpoint_hook_state.py` calls every entry, so a TensorFlow
release that removes one fails there, naming it. Everything else in the
family uses public TensorFlow.

Import this module only where TensorFlow is already needed.
"""

from __future__ import annotations

from typing import Any


class TensorFlowAPIMissingError(AttributeError):
    """A private TensorFlow attribute this family relies on is gone."""


def manager_checkpoint_prefix(manager: Any) -> str:
    """The path prefix of the checkpoints a `tf.train.CheckpointManager` writes.

    Why private: the manager's `checkpoint_name` argument has no public
    getter, and the hook-state file of a checkpoint must be written before
    `CheckpointManager.save()` names the checkpoint in the state file, so
    the name cannot be taken from the path `save()` returns. A manager the
    hook creates itself does not need this (the hook knows the name).

    Raises:
      TensorFlowAPIMissingError: If the manager has no `_checkpoint_prefix`.
    """
    prefix = getattr(manager, "_checkpoint_prefix", None)
    if not isinstance(prefix, str):
        raise TensorFlowAPIMissingError(
            "monsession-hooks-checkpoint needs tf.train.CheckpointManager._checkpoint_prefix "
            "(the prefix of its checkpoints, to save the hooks' state beside them), which this "
            "TensorFlow does not have."
        )
    return prefix


def _require(owner: Any, name: str, what: str) -> Any:
    found = getattr(owner, name, None)
    if found is None:
        raise TensorFlowAPIMissingError(
            f"monsession-hooks-checkpoint needs {what} (to save checkpoints in the background), "
            "which this TensorFlow does not have; pass async_save=False to save synchronously."
        )
    return found


def snapshot_checkpoint(checkpoint: Any) -> dict[Any, Any]:
    """The values `checkpoint.write()` would save now, as tensors that stay as they are.

    Why private: `tf.train.Checkpoint` has no public way to separate reading
    the values (which must happen at the step boundary) from writing the
    files. `TrackableSaver._gather_serialized_tensors` gives, per object, the
    tensors to save under their checkpoint keys, the object graph included
    (the same keys a synchronous save writes); a variable's entry is a
    callable that reads it, called here. A read shares the variable's buffer
    until the next update, which TensorFlow then makes into a new buffer, so
    the snapshot costs no copy at the step boundary.

    Raises:
      TensorFlowAPIMissingError: If the private API is gone.
      NotImplementedError: If the checkpoint holds objects with a registered
        saver (they write their own files and cannot be read in advance).
    """
    import tensorflow as tf
    from tensorflow.python.training.saving.saveable_object import SaveSpec

    gather = _require(
        _require(checkpoint, "_saver", "tf.train.Checkpoint._saver"),
        "_gather_serialized_tensors",
        "TrackableSaver._gather_serialized_tensors",
    )
    serialized, _, registered, _ = gather(None)
    if registered:
        raise NotImplementedError(
            f"objects with registered savers ({', '.join(map(str, registered))}) "
            "cannot be saved from a snapshot"
        )

    def read(value: Any) -> Any:
        if isinstance(value, dict):
            return {spec: read(tensor) for spec, tensor in value.items()}
        if isinstance(value, SaveSpec):
            # `.tensor` calls a variable's reading function; the new SaveSpec
            # keeps the tensor read, not the function.
            return SaveSpec(value.tensor, value.slice_spec, value.name, value.dtype, value.device)
        if value is None or isinstance(value, tf.Tensor):
            return value
        # A variable itself (a Keras 3 variable holding a distributed one
        # serializes so): read now, not when the thread writes.
        return tf.identity(value)

    for owner, tensors in serialized.items():  # Keyed by identity: changed in place.
        serialized[owner] = {key: read(value) for key, value in tensors.items()}
    return serialized


def write_snapshot(snapshot: dict[Any, Any], file_prefix: str, options: Any) -> None:
    """Writes a `snapshot_checkpoint` result as the checkpoint `file_prefix`.

    Why private: `MultiDeviceSaver` is the writer behind every object-based
    save (temporary shard files merged into ``<prefix>.index`` and
    ``<prefix>.data-*``); it has no public entry that takes tensors.
    """
    from tensorflow.python.checkpoint import functional_saver

    saver_class = _require(
        functional_saver, "MultiDeviceSaver", "tensorflow.python.checkpoint.MultiDeviceSaver"
    )
    saver_class(snapshot).save(file_prefix, options=options)


def install_checkpoint_writer(checkpoint: Any, writer: Any) -> Any:
    """Makes `writer` what `checkpoint` saves with when asked to save asynchronously.

    Why private: `tf.train.Checkpoint` hands an asynchronous `write` (the
    one `CheckpointManager.save` makes with
    `CheckpointOptions(experimental_enable_async_checkpoint=True)`) and its
    `sync()` to the object in `_async_checkpointer_impl`. Installing a writer
    there keeps the manager's own bookkeeping (state file, `max_to_keep`,
    `latest_checkpoint`), which it does in the write's callbacks.

    Returns:
      The object installed before (`None`, or TensorFlow's own helper), to
      put back with `install_checkpoint_writer(checkpoint, previous)`.

    Raises:
      TensorFlowAPIMissingError: If `checkpoint` has no such attribute.
    """
    if not hasattr(checkpoint, "_async_checkpointer_impl"):
        raise TensorFlowAPIMissingError(
            "monsession-hooks-checkpoint needs tf.train.Checkpoint._async_checkpointer_impl "
            "(to save checkpoints in the background), which this TensorFlow does not have; "
            "pass async_save=False to save synchronously."
        )
    previous = checkpoint._async_checkpointer_impl
    checkpoint._async_checkpointer_impl = writer
    return previous


def forget_async_request(checkpoint: Any) -> None:
    """Makes `checkpoint`'s later `restore()`/`read()` run as usual, not through its async saver.

    Why private: a `tf.train.Checkpoint` remembers the options of its last
    asynchronous write in `_checkpoint_options` and then hands every
    `restore()` and `read()` to its asynchronous saver too; the
    `BackgroundWriter` saves only and lets the checkpoint restore itself.
    """
    if getattr(checkpoint, "_checkpoint_options", None) is not None:
        checkpoint._checkpoint_options = None
