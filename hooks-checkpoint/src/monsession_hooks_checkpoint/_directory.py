"""Checkpoint directories: writable before the first save; checkpoint paths compared."""

from __future__ import annotations

import os
import tempfile


def _is_remote(path: str) -> bool:
    return "://" in path


def ensure_writable_directory(path: str, owner: str) -> None:
    """Creates `path` if needed and checks that files can be created in it.

    Local paths are probed by creating and deleting a small file; remote
    paths (``gs://``, ``s3://``, ...) are only created through `tf.io.gfile`.

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
    not_a_directory = ValueError(
        f"{owner}: checkpoint_dir {path!r} is a file or lies under a file; expected a "
        "directory to write checkpoints to."
    )
    if os.path.exists(path) and not os.path.isdir(path):
        raise not_a_directory
    try:
        os.makedirs(path, exist_ok=True)
    except (NotADirectoryError, FileExistsError) as error:
        raise not_a_directory from error
    except OSError as error:
        raise PermissionError(
            f"{owner}: cannot create checkpoint_dir {path!r}: {error.strerror or error}. "
            "Pass a directory this process can write to."
        ) from error
    try:
        with tempfile.TemporaryFile(dir=path, prefix=".monsession-write-check-"):
            pass
    except OSError as error:
        raise PermissionError(
            f"{owner}: cannot write to checkpoint_dir {path!r}: {error.strerror or error}. "
            "Pass a directory this process can write to."
        ) from error


def same_checkpoint(first: str | None, second: str) -> bool:
    """Whether two checkpoint prefixes name the same files (`first` may be `None`)."""
    if first is None:
        return False
    if _is_remote(first) or _is_remote(second):
        return first == second
    return os.path.abspath(first) == os.path.abspath(second)
