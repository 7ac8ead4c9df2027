"""The version check refuses a release whose packages disagree (run as the release runs it)."""

from __future__ import annotations

import pathlib
import re
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tools" / "check_versions.py"
PACKAGES = {
    "core": "monsession",
    "hooks-checkpoint": "monsession_hooks_checkpoint",
    "hooks-summary": "monsession_hooks_summary",
    "hooks-logging": "monsession_hooks_logging",
    "hooks-debug": "monsession_hooks_debug",
    "hooks-keras": "monsession_hooks_keras",
    "hooks-mlflow": "monsession_hooks_mlflow",
}


def check(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, check=False
    )


def repo_version() -> str:
    text = (ROOT / "core" / "pyproject.toml").read_text("utf-8")
    match = re.search(r'^version = "([^"]+)"', text, re.MULTILINE)
    assert match
    return match.group(1)


@pytest.fixture
def tree(tmp_path: pathlib.Path) -> pathlib.Path:
    """A copy of the files the check reads: each package's pyproject.toml and __init__.py."""
    for folder, module in PACKAGES.items():
        init = pathlib.Path(folder, "src", module, "__init__.py")
        (tmp_path / init).parent.mkdir(parents=True)
        shutil.copy(ROOT / folder / "pyproject.toml", tmp_path / folder / "pyproject.toml")
        shutil.copy(ROOT / init, tmp_path / init)
    return tmp_path


def edit(path: pathlib.Path, old: str, new: str) -> None:
    text = path.read_text("utf-8")
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new, 1), "utf-8")


def test_the_checkout_agrees_on_one_version_and_matches_its_tag() -> None:
    version = repo_version()
    result = check("--tag", f"v{version}")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == version


def test_the_copy_agrees(tree: pathlib.Path) -> None:
    result = check("--root", str(tree))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == repo_version()


def test_a_pyproject_version_that_differs_is_refused(tree: pathlib.Path) -> None:
    version = repo_version()
    edit(tree / "hooks-summary" / "pyproject.toml", f'version = "{version}"', 'version = "9.9.9"')
    result = check("--root", str(tree))
    assert result.returncode == 1
    assert "pyproject.toml versions differ" in result.stderr
    assert "monsession-hooks-summary 9.9.9" in result.stderr
    assert "Release refused" in result.stderr


def test_a_module_version_that_differs_is_refused(tree: pathlib.Path) -> None:
    version = repo_version()
    init = tree / "hooks-debug" / "src" / "monsession_hooks_debug" / "__init__.py"
    edit(init, f'__version__ = "{version}"', '__version__ = "0.0.1"')
    result = check("--root", str(tree))
    assert result.returncode == 1
    assert "monsession-hooks-debug: __version__ is '0.0.1'" in result.stderr


def test_a_core_range_that_excludes_the_version_is_refused(tree: pathlib.Path) -> None:
    pyproject = tree / "hooks-logging" / "pyproject.toml"
    text = pyproject.read_text("utf-8")
    [requirement] = re.findall(r'"(monsession-core[^"]*)"', text)
    edit(pyproject, requirement, "monsession-core>=99")
    result = check("--root", str(tree))
    assert result.returncode == 1
    assert "monsession-hooks-logging requires monsession-core>=99, which excludes" in result.stderr


def test_a_hook_package_without_core_is_refused(tree: pathlib.Path) -> None:
    pyproject = tree / "hooks-checkpoint" / "pyproject.toml"
    [requirement] = re.findall(r'"(monsession-core[^"]*)"', pyproject.read_text("utf-8"))
    edit(pyproject, f'"{requirement}"', '"pluggy"')
    result = check("--root", str(tree))
    assert result.returncode == 1
    assert "monsession-hooks-checkpoint does not require monsession-core" in result.stderr


def test_a_tag_that_names_another_version_is_refused() -> None:
    result = check("--tag", "v99.0.0")
    assert result.returncode == 1
    assert "The tag 'v99.0.0' does not name the packages' version" in result.stderr
