"""What the release tests share: the released packages, their version, a checked `run`."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess

ROOT = pathlib.Path(__file__).resolve().parents[2]
RELEASED = {
    "monsession-core": "monsession",
    "monsession-hooks-checkpoint": "monsession_hooks_checkpoint",
    "monsession-hooks-summary": "monsession_hooks_summary",
    "monsession-hooks-logging": "monsession_hooks_logging",
    "monsession-hooks-debug": "monsession_hooks_debug",
    "monsession-hooks-keras": "monsession_hooks_keras",
    "monsession-hooks-mlflow": "monsession_hooks_mlflow",
}


def run(*command: str | os.PathLike[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    """Runs `command`, which must succeed; the result, its output as text."""
    result = subprocess.run(
        [str(part) for part in command], capture_output=True, text=True, check=False, **kwargs
    )
    assert result.returncode == 0, f"{command}\n{result.stdout}\n{result.stderr}"
    return result


def file_stem(name: str) -> str:
    """The distribution name as wheel and sdist file names spell it."""
    return name.replace("-", "_")


def version() -> str:
    """The version every released package carries (core's pyproject.toml)."""
    text = (ROOT / "core" / "pyproject.toml").read_text("utf-8")
    match = re.search(r'^version = "([^"]+)"', text, re.MULTILINE)
    assert match
    return match.group(1)
