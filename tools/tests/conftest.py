"""The release files, built once per test session by tools/build_dists.py."""

from __future__ import annotations

import pathlib
import sys

import pytest
from release import ROOT, run


@pytest.fixture(scope="session")
def dist(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """A folder holding the wheel and sdist of every released package, twine-checked."""
    out = tmp_path_factory.mktemp("dist")
    result = run(sys.executable, ROOT / "tools" / "build_dists.py", "--out-dir", out)
    assert "PASSED" in result.stdout and "FAILED" not in result.stdout, result.stdout
    return out
