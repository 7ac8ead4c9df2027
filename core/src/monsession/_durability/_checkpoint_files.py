"""Restoring the newest checkpoint of a directory that reads back whole (both modes).

A checkpoint whose files are missing, whose index does not open, or whose data reads back
damaged is skipped with a WARNING naming its files, and the chief rewrites the state file
to name the one restored. Checkpoint files of which none is readable raise
`DamagedCheckpointError`: training never silently starts over.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
from collections.abc import Callable
from typing import TypeVar

import tensorflow as tf

from monsession._durability._files import error_cause, wait_for_writes

logger = logging.getLogger("monsession")

STATE_FILE = "checkpoint"
_DATA_FILE = re.compile(r"^(?P<prefix>.+)\.data-(?P<shard>\d{5})-of-(?P<shards>\d{5})$")
_INDEX_SUFFIX = ".index"
_NUMBERED = re.compile(r"-(\d+)$")
_Restored = TypeVar("_Restored")


class DamagedCheckpointError(RuntimeError):
    """Checkpoint files exist in a directory, but none of them can be restored."""


@dataclasses.dataclass(frozen=True)
class CheckpointChoice:
    """The outcome of looking at a checkpoint directory.

    Attributes:
      directory: The directory looked at.
      path: The prefix of the checkpoint restored (the newest readable one),
        or `None` when the directory holds no checkpoint files at all.
      readable: Every readable checkpoint prefix found, oldest first.
      damaged: One line per unreadable file or checkpoint skipped, naming it.
      state_file_ok: Whether the state file names `path` as its latest.
    """

    directory: str
    path: str | None
    readable: tuple[str, ...] = ()
    damaged: tuple[str, ...] = ()
    state_file_ok: bool = True


def _step_of(prefix: str) -> int:
    match = _NUMBERED.search(prefix)
    return int(match.group(1)) if match else -1


def _mtime(path: str) -> float:
    try:
        return os.path.getmtime(path)
    except OSError:
        return 0.0


def _read_state(directory: str) -> tuple[list[str], str | None]:
    """The state file's checkpoint prefixes (latest last), and what is wrong with it."""
    state_path = os.path.join(directory, STATE_FILE)
    if not tf.io.gfile.exists(state_path):
        return [], None
    try:
        state = tf.train.get_checkpoint_state(directory)
    except Exception as error:
        return (
            [],
            f"{state_path}: unreadable state file ({type(error).__name__}: {error_cause(error)})",
        )
    if state is None:
        return [], f"{state_path}: unreadable state file (not a CheckpointState text proto)"
    if not state.model_checkpoint_path:
        return [], f"{state_path}: the state file names no checkpoint"

    # TensorFlow has made relative paths relative to `directory`.
    latest = state.model_checkpoint_path
    paths = [p for p in state.all_model_checkpoint_paths if p != latest]
    return [*paths, latest], None


def _prefixes_on_disk(directory: str) -> list[str]:
    """Prefixes of the checkpoint files (index or data) directly in `directory`."""
    prefixes = set()
    for name in tf.io.gfile.listdir(directory):
        if name.endswith(_INDEX_SUFFIX):
            prefixes.add(name[: -len(_INDEX_SUFFIX)])
            continue
        match = _DATA_FILE.match(name)
        if match:
            prefixes.add(match.group("prefix"))
    return [os.path.join(directory, prefix) for prefix in prefixes]


def _data_files(prefix: str) -> list[str]:
    return sorted(tf.io.gfile.glob(f"{glob_escape(prefix)}.data-?????-of-?????"))


def glob_escape(path: str) -> str:
    """`path` with glob wildcards escaped (``[*?`` match themselves)."""
    return re.sub(r"([\[\]*?])", r"[\1]", path)


def _missing_files_reason(prefix: str) -> str | None:
    """What is missing of the checkpoint `prefix` (its index, a data shard), naming its files."""
    index = prefix + _INDEX_SUFFIX
    data = _data_files(prefix)
    if not tf.io.gfile.exists(index):
        present = ", ".join(data) if data else "no data file either"
        return f"{index} is missing ({present})"
    if not data:
        return f"{prefix}.data-00000-of-NNNNN is missing (index {index} is present)"
    shards = {
        int(m.group("shards")) for m in map(_DATA_FILE.match, map(os.path.basename, data)) if m
    }
    if len(shards) != 1 or len(data) != next(iter(shards)):
        return f"data shards of {prefix} are missing or mixed: found {', '.join(data)}"
    return None


def unreadable_reason(prefix: str, read_tensors: bool = True) -> str | None:
    """Why the checkpoint `prefix` cannot be restored, in one line naming its files; `None` if
    it can. `read_tensors`: read every tensor back (TensorFlow checks their checksums), which
    finds a damaged data file; else only the files' presence and the index are checked."""
    missing = _missing_files_reason(prefix)
    if missing is not None:
        return missing
    try:
        reader = tf.train.load_checkpoint(prefix)  # Reads the index only.
        if read_tensors:
            for name, dtype in reader.get_variable_to_dtype_map().items():
                if dtype != tf.variant:  # E.g. a tf.data iterator's state: no NumPy value.
                    reader.get_tensor(name)
    except Exception as error:
        files = ", ".join([prefix + _INDEX_SUFFIX, *_data_files(prefix)])
        return f"{prefix} ({files}) cannot be read: {type(error).__name__}: {error_cause(error)}"
    return None


def read_back(prefix: str) -> None:
    """Reads every tensor of the checkpoint `prefix` back; raises `DamagedCheckpointError`
    naming the files and the damage."""
    reason = unreadable_reason(prefix)
    if reason is not None:
        raise DamagedCheckpointError(reason)


def _candidates(directory: str, in_state: list[str]) -> list[str]:
    """The checkpoint prefixes to try: the state file's latest, then all others newest first."""
    others = sorted(
        {*in_state, *_prefixes_on_disk(directory)},
        key=lambda p: (_step_of(p), _mtime(p + _INDEX_SUFFIX)),
        reverse=True,
    )
    seen: set[str] = set()
    candidates = []
    for prefix in [*in_state[-1:], *others]:
        if os.path.normpath(prefix) not in seen:
            seen.add(os.path.normpath(prefix))
            candidates.append(prefix)
    return candidates


def restore_newest(
    directory: str, restore: Callable[[str], _Restored]
) -> tuple[CheckpointChoice, _Restored | None]:
    """Restores the newest checkpoint of `directory` that reads back whole.

    Waits first for the directory's background writes. Each candidate (the state file's latest,
    then all others newest first) is checked without reading its tensors, then handed to
    `restore` (a mode's restore of a prefix). When that raises and the data reads back damaged,
    the next one is handed over, and must restore every variable again; any other error is
    raised.

    Returns:
      A `CheckpointChoice` (`path` `None` for no checkpoint files: a fresh
      start, `restore` not called) and what `restore` returned.

    Raises:
      DamagedCheckpointError: If checkpoint files exist but none is readable.
    """
    wait_for_writes(directory)
    if not tf.io.gfile.isdir(directory):
        return CheckpointChoice(directory, None), None
    in_state, state_problem = _read_state(directory)
    candidates = _candidates(directory, in_state)
    if not candidates and not state_problem:
        return CheckpointChoice(directory, None), None
    damaged = [state_problem] if state_problem else []
    for prefix in candidates:
        reason, restored = _restore_or_reason(prefix, restore)
        if reason is None:
            return _choice(directory, prefix, in_state, state_problem, damaged), restored
        damaged.append(reason)
    raise DamagedCheckpointError(
        f"Checkpoint files exist in {directory!r}, but none can be restored:\n  "
        + "\n  ".join(damaged)
        + "\nTraining does not start over while checkpoints exist: repair or move these "
        "files, or train into another checkpoint_dir."
    )


def _restore_or_reason(
    prefix: str, restore: Callable[[str], _Restored]
) -> tuple[str | None, _Restored | None]:
    """`(None, restore(prefix))`, or `(why prefix is damaged, None)`; other errors raise."""
    reason = unreadable_reason(prefix, read_tensors=False)
    if reason is not None:
        return reason, None
    try:
        return None, restore(prefix)
    except DamagedCheckpointError as error:  # From `read_back`.
        return str(error), None
    except Exception:  # TensorFlow raises OpErrors, but also e.g. IndexError.
        reason = unreadable_reason(prefix)  # Damaged data, or another failure?
        if reason is None:
            raise
        return reason, None


def _choice(
    directory: str, chosen: str, in_state: list[str], state_problem: str | None, damaged: list[str]
) -> CheckpointChoice:
    """The outcome once `chosen` is restored, skipping the `damaged` ones."""
    # Only checkpoints the state file manages are handed on to be managed
    # (and in time deleted) by a Saver or CheckpointManager, as TensorFlow does.
    managed = [os.path.normpath(p) for p in in_state]
    key = os.path.normpath(chosen)
    older = (
        [p for p in in_state[: managed.index(key)] if _missing_files_reason(p) is None]
        if key in managed
        else []
    )
    state_ok = not state_problem and bool(in_state) and os.path.normpath(in_state[-1]) == key
    return CheckpointChoice(directory, chosen, (*older, chosen), tuple(damaged), state_ok)


def report_and_repair(choice: CheckpointChoice, repair: bool) -> None:
    """Warns about the damaged files `choice` skipped; with `repair` (the chief, which owns
    the directory), rewrites the state file to name the restored checkpoint as the latest."""
    if choice.path is None:
        return
    if choice.damaged:
        logger.warning(
            "Damaged checkpoint files in %s were skipped; restoring %s, the newest readable "
            "checkpoint:\n  %s\nThe damaged files are kept; a later save of the same step "
            "replaces them.",
            choice.directory,
            choice.path,
            "\n  ".join(choice.damaged),
        )
    if repair and not choice.state_file_ok:
        _write_state_file(choice.directory, choice.path, choice.readable)
        logger.warning(
            "Rewrote %s: it now names %s as the latest checkpoint.",
            os.path.join(choice.directory, STATE_FILE),
            choice.path,
        )


def _write_state_file(directory: str, latest: str, paths: tuple[str, ...]) -> None:
    """Replaces the state file in one rename, naming `latest` and `paths` (oldest first)."""

    def entry(field: str, path: str) -> str:
        relative = os.path.relpath(path, directory) if "://" not in path else path
        if relative.startswith(".."):
            relative = path
        return f"{field}: {json.dumps(relative)}\n"

    # Timestamps as a CheckpointManager writes them, so that it keeps managing
    # (and in time deletes) these checkpoints rather than preserving them.
    stamps = [_mtime(path + _INDEX_SUFFIX) for path in paths]
    text = (
        entry("model_checkpoint_path", latest)
        + "".join(entry("all_model_checkpoint_paths", path) for path in paths)
        + "".join(f"all_model_checkpoint_timestamps: {stamp!r}\n" for stamp in stamps)
        + f"last_preserved_timestamp: {min(stamps) - 1.0!r}\n"
    )
    state_path = os.path.join(directory, STATE_FILE)
    temporary = f"{state_path}.monsession-tmp-{os.getpid()}"
    with tf.io.gfile.GFile(temporary, "w") as state_file:
        state_file.write(text)
    tf.io.gfile.rename(temporary, state_path, overwrite=True)
