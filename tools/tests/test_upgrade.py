"""Upgrades lose nothing: what the previous release (0.1.0) started, this one continues.

Two fresh venvs with TensorFlow (from uv's cache): one holds the previous
release's wheels (data/release-0.1.0, core and the checkpoint and summary
families), the other this release's (built by the session's `dist`
fixture). A job started under 0.1.0 and stopped in the middle of an epoch
resumes under this release exactly as a run that was never interrupted: the
same steps and batches, hook state, summary steps (each once), checkpoint
schedule and weights. A hook package made by the 0.1 template (it requires
``monsession-core>=0.1,<0.2``), installed beside this core with
``--no-deps``, passes its own test suite, and discovery names it with its
range and the fix (a WARNING; an error in strict mode).
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
from typing import Any

import pytest
from release import ROOT, run, version

PREVIOUS = "0.1.0"
WHEELS = pathlib.Path(__file__).parent / "data" / f"release-{PREVIOUS}"
FAMILIES = ("monsession_core", "monsession_hooks_checkpoint", "monsession_hooks_summary")
JOB = pathlib.Path(__file__).parent / "upgrade_job.py"
STOP = 7  # Mid-epoch: epochs have 5 batches.
LAST = 15  # 3 epochs.
EVERY = 3  # Steps between checkpoints.
SAVER = "CheckpointSaverHook[0]"  # Its key in the hooks' state.
WALL_CLOCK = "secs_since_trigger"


def _env(**extra: str) -> dict[str, str]:
    """This process's environment without the plugin switches, plus `extra`."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("MONSESSION_")}
    return {**env, "TF_CPP_MIN_LOG_LEVEL": "2", **extra}


def _venv(path: pathlib.Path, *requirements: str | pathlib.Path) -> pathlib.Path:
    """A fresh venv at `path` holding TensorFlow and `requirements`; its python."""
    uv = (sys.executable, "-m", "uv")
    run(*uv, "venv", "--quiet", "--python", sys.executable, path)
    python = path / "bin" / "python"
    run(*uv, "pip", "install", "--quiet", "--python", python, "tensorflow-cpu>=2.16", *requirements)
    return python


@pytest.fixture(scope="module")
def previous(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """The python of a venv with monsession 0.1.0: core, checkpoint and summary families."""
    wheels = [WHEELS / f"{name}-{PREVIOUS}-py3-none-any.whl" for name in FAMILIES]
    return _venv(tmp_path_factory.mktemp("previous") / "venv", *wheels)


@pytest.fixture(scope="module")
def current(dist: pathlib.Path, tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """The python of a venv with this release: core, checkpoint and summary families, pytest."""
    wheels = [dist / f"{name}-{version()}-py3-none-any.whl" for name in FAMILIES]
    return _venv(tmp_path_factory.mktemp("current") / "venv", "pytest>=8", *wheels)


def _job(python: pathlib.Path, directory: pathlib.Path, last_step: int) -> subprocess.Popen[str]:
    """Starts the job (upgrade_job.py) with strict plugins: a family that fails, fails it."""
    return subprocess.Popen(
        [str(python), str(JOB), str(directory), str(last_step)],
        env=_env(MONSESSION_STRICT_PLUGINS="1"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _result(job: subprocess.Popen[str]) -> dict[str, Any]:
    out, err = job.communicate(timeout=600)
    assert job.returncode == 0, f"{job.args}\n{out}\n{err}"
    return json.loads(out)


def _schedules(hook_state: dict[str, Any]) -> dict[str, Any]:
    """The hooks' saved state without its wall-clock part (seconds since the last action)."""
    assert hook_state["format"] == 1
    return {
        key: {
            part: {k: v for k, v in value.items() if k != WALL_CLOCK}
            for part, value in state.items()
        }
        for key, state in hook_state["hooks"].items()
    }


def test_a_job_started_under_the_previous_release_resumes_exactly(
    previous: pathlib.Path, current: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    straight_job = _job(current, tmp_path / "straight", 100)  # Runs beside the first part.
    first = _result(_job(previous, tmp_path / "resumed", STOP))
    resumed = _result(_job(current, tmp_path / "resumed", 100))
    straight = _result(straight_job)
    assert (first["version"], resumed["version"], straight["version"]) == (
        PREVIOUS,
        version(),
        version(),
    )

    # The same steps, each on the same batch: the next one after the stop first.
    assert [step for step, _ in first["steps"]] == list(range(1, STOP + 1))
    assert resumed["steps"][0][0] == STOP + 1
    assert first["steps"] + resumed["steps"] == straight["steps"]
    assert (first["epochs"], resumed["epochs"], straight["epochs"]) == ([0], [1, 2], [0, 1, 2])

    # Each summary step once, as in the uninterrupted run (TensorFlow's reader).
    assert len({tuple(record) for record in resumed["summaries"]}) == len(resumed["summaries"])
    assert resumed["summaries"] == straight["summaries"]
    assert {tag for tag, _ in straight["summaries"]} == {"w", "global_step/sec"}

    # The hooks' schedules go on from the state the previous release saved beside the
    # checkpoint of the stop, which is restored (the first step after it is STOP + 1).
    # The summary saver's and the step counter's: as in the uninterrupted run (above,
    # and their final state). The checkpoint saver's: 0.1.0 counted its save at the
    # stop as a trigger (1.0 does not: a save off the schedule leaves it alone), and
    # this release keeps the trigger it finds, so its next saves come a period later.
    assert STOP in resumed["checkpoints"] and STOP not in straight["checkpoints"]
    trigger = first["hook_state"]["hooks"][SAVER]["timer"]["last_triggered_step"]
    assert [step for step in resumed["checkpoints"] if step > STOP] == [
        *range(trigger + EVERY, LAST, EVERY),
        LAST,
    ]
    assert resumed["checkpoint"] == straight["checkpoint"] == LAST
    schedules, expected = _schedules(resumed["hook_state"]), _schedules(straight["hook_state"])
    assert schedules.pop(SAVER) == {
        "timer": {"last_triggered_step": range(trigger + EVERY, LAST + 1, EVERY)[-1]}
    }
    del expected[SAVER]
    assert schedules == expected

    # The same weights, global step (monsession_global_step) and epoch counter; one more
    # save (the one at the stop).
    saves = "save_counter/.ATTRIBUTES/VARIABLE_VALUE"
    assert resumed["variables"].pop(saves) == straight["variables"].pop(saves) + 1
    assert resumed["variables"] == straight["variables"]
    assert straight["variables"]["monsession_global_step/.ATTRIBUTES/VARIABLE_VALUE"] == LAST
    assert straight["variables"]["data/epoch/.ATTRIBUTES/VARIABLE_VALUE"] == 3


def test_a_package_made_by_the_previous_template_runs_and_is_named(
    previous: pathlib.Path, current: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    monsession = previous.parent / "monsession"
    run(monsession, "new-package", "monsession-hooks-csv", "--dir", tmp_path, env=_env())
    package = tmp_path / "monsession-hooks-csv"
    assert (
        'dependencies = ["monsession-core>=0.1,<0.2"]' in (package / "pyproject.toml").read_text()
    )
    uv = (sys.executable, "-m", "uv")
    run(*uv, "build", "--quiet", "--wheel", "--out-dir", tmp_path / "wheel", package)
    [wheel] = (tmp_path / "wheel").glob("*.whl")
    run(*uv, "pip", "install", "--quiet", "--no-deps", "--python", current, wheel)
    try:
        # It keeps loading and running: its own test suite passes under this core.
        tests = run(
            current,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-q",
            "tests",
            cwd=package,
            env=_env(),
        )
        assert " passed" in tests.stdout and "failed" not in tests.stdout, tests.stdout

        # And discovery names it, with its declared range and the fix.
        listing = run(current.parent / "monsession", "plugins", "--json", env=_env())
        [older] = json.loads(listing.stdout)["older_core"]
        assert (older["name"], older["distribution"], older["version"]) == (
            "csv",
            "monsession-hooks-csv",
            "0.1.0",
        )
        message = older["message"]
        assert listing.stderr.count(message) == 1, listing.stderr
        for part in (
            "'csv' (monsession-hooks-csv 0.1.0)",
            "monsession-core<0.2,>=0.1",  # The range as the wheel's metadata spells it.
            f"excludes the installed monsession-core {version()}",
            "widen its requirement to monsession-core>=1.0,<2",
            "`monsession new-package`",
        ):
            assert part in message, message

        strict = subprocess.run(
            [current.parent / "monsession", "plugins"],
            env=_env(MONSESSION_STRICT_PLUGINS="1"),
            capture_output=True,
            text=True,
            check=False,
        )
        assert strict.returncode == 1
        assert strict.stderr.strip() == f"monsession: error: {message}"
    finally:
        run(*uv, "pip", "uninstall", "--quiet", "--python", current, "monsession-hooks-csv")


def test_the_previous_releases_wheels_are_kept() -> None:
    names = sorted(path.name for path in WHEELS.glob("*.whl"))
    assert names == sorted(
        f"{name}-{PREVIOUS}-py3-none-any.whl"
        for name in (
            *FAMILIES,
            "monsession_hooks_logging",
            "monsession_hooks_debug",
            "monsession_hooks_keras",
        )
    )
    assert (ROOT / "tools" / "tests" / "data" / f"release-{PREVIOUS}" / "README.md").is_file()
