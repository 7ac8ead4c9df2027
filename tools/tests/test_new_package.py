"""`monsession new-package` end to end: created, tested with its own tox config, listed.

As a plugin author does it, in real subprocesses: core's wheel is built and
installed alone (no TensorFlow) into a fresh venv, whose `monsession
new-package monsession-hooks-demo` creates the package in an empty folder.
Then the package's own `tox.ini` runs, unchanged: tox builds the package,
installs it with TensorFlow (CPU) from the index and monsession-core from
the wheel just built (`UV_FIND_LINKS`, until core is on an index), and runs
the package's tests, which must all pass. Last, `monsession plugins` of the
env tox made lists the new plugin beside core.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
NAME = "monsession-hooks-demo"


def run(*command: str | os.PathLike[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [str(part) for part in command],
        capture_output=True,
        text=True,
        check=False,
        timeout=900,
        **kwargs,
    )
    assert result.returncode == 0, f"{command}\n{result.stdout}\n{result.stderr}"
    return result


def outside_env(**extra: str) -> dict[str, str]:
    """The environment of a user's shell: nothing of this tox env, no monsession switch."""
    dropped = ("TOX_", "MONSESSION_", "UV_", "PIP_")
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(dropped)
        and key not in {"VIRTUAL_ENV", "PYTHONPATH", "PYTHONDONTWRITEBYTECODE"}
    }
    return {**env, **extra}


def core_version() -> str:
    text = (ROOT / "core" / "pyproject.toml").read_text("utf-8")
    match = re.search(r'^version = "([^"]+)"', text, re.MULTILINE)
    assert match
    return match.group(1)


def test_a_new_package_passes_its_own_tests_and_is_listed(tmp_path: pathlib.Path) -> None:
    wheels, work = tmp_path / "wheels", tmp_path / "work"
    work.mkdir()
    uv = (sys.executable, "-m", "uv")
    run(*uv, "build", "--quiet", "--wheel", "--out-dir", wheels, ROOT / "core")
    [core_wheel] = wheels.glob("monsession_core-*.whl")
    core_only = tmp_path / "core-only"
    run(*uv, "venv", "--quiet", "--python", sys.executable, core_only)
    run(*uv, "pip", "install", "--quiet", "--python", core_only / "bin" / "python", core_wheel)

    created = run(
        core_only / "bin" / "monsession", "new-package", NAME, cwd=work, env=outside_env()
    )
    package = work / NAME
    assert created.stdout == f"Created {NAME}: the hook package {NAME}. Next: cd {NAME} && tox\n"
    # Lint-clean under its own settings (pyproject.toml's [tool.ruff]).
    run(sys.executable, "-m", "ruff", "check", "--no-cache", ".", cwd=package)
    run(sys.executable, "-m", "ruff", "format", "--no-cache", "--check", ".", cwd=package)

    tox = run(
        sys.executable, "-m", "tox", "--workdir", tmp_path / "tox",
        cwd=package, env=outside_env(UV_FIND_LINKS=str(wheels)),
    )  # fmt: skip
    print(tox.stdout[-3000:])
    # pytest adds "(H:MM:SS)" after the seconds of a run over a minute.
    summary = re.search(r"^=+ (\d+) passed in [\d.]+s( \([\d:]+\))? =+$", tox.stdout, re.MULTILINE)
    assert summary is not None, tox.stdout
    assert int(summary.group(1)) >= 10
    assert not re.search(r"\b(failed|skipped|error)\b", summary.group(0))
    assert "congratulations :)" in tox.stdout

    listing = run(
        tmp_path / "tox" / "py" / "bin" / "monsession", "plugins", "--json", env=outside_env()
    )
    document = json.loads(listing.stdout)
    assert document["monsession_version"] == core_version()
    plugins = {plugin["name"]: plugin for plugin in document["plugins"]}
    assert set(plugins) == {"core", "demo"}
    assert plugins["demo"] == {
        "name": "demo",
        "distribution": NAME,
        "version": "0.1.0",
        "entry_point": "monsession_hooks_demo._plugin",
        "hook_classes": ["DemoHook"],
        "other_classes": [],
        "training_arguments": [],
    }
    assert document["failures"] == []
