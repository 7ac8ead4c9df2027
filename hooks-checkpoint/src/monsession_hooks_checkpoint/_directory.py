"""Checkpoint directories: writable before the first save; paths compared; failed saves tidied."""

from __future__ import annotations

import os

from monsession.plugins import check_directory


def _is_remote(path: str) -> bool:
    return "://" in path


def ensure_writable_directory(path: str, owner: str) -> None:
    """Creates `path` if needed, after `monsession.plugins.check_directory` accepts it.

    Remote paths (``gs://``, ``s3://``, ...) are created through `tf.io.gfile`.

    Args:
      path: The directory.
      owner: Who asks (used in error messages), e.g. ``"CheckpointSaverHook"``.

    Raises:
      ValueError: If `path` or one of its parents is a file.
      PermissionError: If the directory cannot be created or written to.
    """
    if _is_remote(path):
        import tensorflow as tf

        tf.io.gfile.makedirs(path)
        if not tf.io.gfile.isdir(path):
            raise ValueError(f"{owner}: checkpoint_dir {path!r} is not a directory.")
        return
    check_directory(owner, "checkpoint_dir", path)  # Again: it may have changed since.
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as error:
        raise PermissionError(
            f"{owner}: cannot create checkpoint_dir {path!r}: {error.strerror or error}. "
            "Pass a directory this process can write to."
        ) from error


def same_checkpoint(first: str | None, second: str) -> bool:
    """Whether two checkpoint prefixes name the same files (`first` may be `None`)."""
    if first is None:
        return False
    if _is_remote(first) or _is_remote(second):
        return first == second
    return os.path.abspath(first) == os.path.abspath(second)


def remove_unmerged_shards(prefix: str) -> None:
    """Removes the partial files of a save of `prefix` that failed.

    Sharded saves (graph mode's default `Saver`, every object-based save)
    write their shards into ``<prefix>_temp``, then merge them into the
    checkpoint's files and remove it; a file being written is named
    ``...tempstate<N>`` until complete. A save cut short (a full disk, a
    parameter server killed while writing) leaves them behind.
    """
    import tensorflow as tf

    try:
        if tf.io.gfile.isdir(prefix + "_temp"):
            tf.io.gfile.rmtree(prefix + "_temp")
        for partial in tf.io.gfile.glob(prefix + ".*tempstate*"):
            tf.io.gfile.remove(partial)
    except (tf.errors.OpError, OSError):
        pass  # Only tidying: the save's own error is what the user sees.
