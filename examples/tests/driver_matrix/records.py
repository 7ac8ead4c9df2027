"""What a training program records for the matrix: JSON lines in `<run dir>/records.jsonl`.

Every record has a `kind` and the wall time `t`; a process appends, so a
killed process leaves what it recorded before the kill. Log records come
from TensorFlow's logger, where every hook logs.
"""

from __future__ import annotations

import json
import logging
import os
import time
from typing import Any

_PATH: list[str] = []


def open_records(directory: str) -> None:
    """Records from now on go to `directory`."""
    os.makedirs(directory, exist_ok=True)
    _PATH[:] = [os.path.join(directory, "records.jsonl")]


def record(kind: str, t: float | None = None, **data: Any) -> None:
    append(_PATH[0], kind, t, **data)


def record_in(directory: str, kind: str, **data: Any) -> None:
    """A record in `directory`'s records, from a process that does not train there."""
    os.makedirs(directory, exist_ok=True)
    append(os.path.join(directory, "records.jsonl"), kind, None, **data)


def append(path: str, kind: str, t: float | None, **data: Any) -> None:
    line = json.dumps({"kind": kind, "t": time.time() if t is None else t, **data})
    with open(path, "a") as stream:
        stream.write(line + "\n")


class LogRecords(logging.Handler):
    """Records every message of TensorFlow's logger."""

    def emit(self, entry: logging.LogRecord) -> None:
        if _PATH:
            record("log", t=entry.created, msg=entry.getMessage())


def capture_logs() -> None:
    logger = logging.getLogger("tensorflow")
    logger.setLevel(logging.INFO)
    logger.addHandler(LogRecords())


def read(directory: str) -> list[dict[str, Any]]:
    path = os.path.join(directory, "records.jsonl")
    if not os.path.exists(path):
        return []
    with open(path) as stream:
        return [json.loads(line) for line in stream if line.strip()]
