"""The release files: built by tools/build_dists.py, checked, installed into a fresh venv.

Builds every wheel and sdist once per session (`twine check --strict` runs in
the build), installs core and monsession-hooks-summary from the wheels, plus
tensorflow-cpu from the index, into a new virtual environment, and trains
there in a subprocess: a summary hook writes an event file that is read back.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys
import tarfile
import zipfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
RELEASED = {
    "monsession-core": "monsession",
    "monsession-hooks-checkpoint": "monsession_hooks_checkpoint",
    "monsession-hooks-summary": "monsession_hooks_summary",
    "monsession-hooks-logging": "monsession_hooks_logging",
    "monsession-hooks-debug": "monsession_hooks_debug",
    "monsession-hooks-keras": "monsession_hooks_keras",
}

FRESH = ("monsession-core", "monsession-hooks-summary")  # installed into the fresh venv

# Runs in the fresh environment: an eager training loop with SummarySaverHook,
# then the event file read back with TensorFlow's own reader.
TRAIN = """
import json, pathlib, sys
import tensorflow as tf
import monsession as ms
import monsession_hooks_summary
from monsession.hooks import SummarySaverHook

global_step = ms.get_or_create_global_step()
w = tf.Variable(4.0)

@tf.function
def train_step():
    with tf.GradientTape() as tape:
        loss = tf.square(w)
    w.assign_sub(0.1 * tape.gradient(loss, w))
    global_step.assign_add(1)
    tf.summary.scalar("loss", loss, step=global_step)
    return {"loss": loss}

logdir = pathlib.Path(sys.argv[1])
hooks = [SummarySaverHook(save_steps=1, output_dir=str(logdir)), ms.StopAtStepHook(last_step=3)]
with ms.MonitoredSession(hooks=hooks) as sess:
    while not sess.should_stop():
        sess.run(train_step)
recorded = [
    [event.step, value.tag]
    for path in sorted(logdir.glob("events.out.tfevents.*"))
    for event in tf.compat.v1.train.summary_iterator(str(path))
    for value in event.summary.value
]
print(json.dumps({
    "monsession": ms.__file__,
    "family": monsession_hooks_summary.__file__,
    "step": int(global_step.numpy()),
    "recorded": recorded,
}))
"""


def run(*command: str | os.PathLike[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [str(part) for part in command], capture_output=True, text=True, check=False, **kwargs
    )
    assert result.returncode == 0, f"{command}\n{result.stdout}\n{result.stderr}"
    return result


def file_stem(name: str) -> str:
    """The distribution name as wheel and sdist file names spell it."""
    return name.replace("-", "_")


def version() -> str:
    text = (ROOT / "core" / "pyproject.toml").read_text("utf-8")
    match = re.search(r'^version = "([^"]+)"', text, re.MULTILINE)
    assert match
    return match.group(1)


@pytest.fixture(scope="session")
def dist(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    out = tmp_path_factory.mktemp("dist")
    result = run(sys.executable, ROOT / "tools" / "build_dists.py", "--out-dir", out)
    assert "PASSED" in result.stdout and "FAILED" not in result.stdout, result.stdout
    return out


@pytest.fixture(scope="session")
def venv(dist: pathlib.Path, tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """A fresh virtual environment with core and the summary family from the wheels."""
    path = tmp_path_factory.mktemp("fresh") / "venv"
    run(sys.executable, "-m", "uv", "venv", "--quiet", "--python", sys.executable, path)
    python = path / "bin" / "python"
    wheels = [next(dist.glob(f"{file_stem(name)}-*.whl")) for name in FRESH]
    run(
        sys.executable, "-m", "uv", "pip", "install", "--quiet", "--python", python,
        *wheels, "tensorflow-cpu>=2.16",
    )  # fmt: skip
    return path


def fresh_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "VIRTUAL_ENV"}}
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    env["MONSESSION_STRICT_PLUGINS"] = "1"
    return env


def test_one_wheel_and_one_sdist_per_package_all_of_one_version(dist: pathlib.Path) -> None:
    expected = {
        f"{file_stem(name)}-{version()}{suffix}"
        for name in RELEASED
        for suffix in ("-py3-none-any.whl", ".tar.gz")
    }
    built = {path.name for path in dist.iterdir() if path.name.endswith((".whl", ".tar.gz"))}
    assert built == expected


@pytest.mark.parametrize("name", sorted(RELEASED))
def test_the_wheel_holds_its_package_metadata_and_entry_point(
    dist: pathlib.Path, name: str
) -> None:
    module = RELEASED[name]
    [wheel] = dist.glob(f"{file_stem(name)}-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        files = archive.namelist()
        info = f"{file_stem(name)}-{version()}.dist-info"
        metadata = archive.read(f"{info}/METADATA").decode()
        entry_points = archive.read(f"{info}/entry_points.txt").decode()
    assert f"{module}/__init__.py" in files
    assert {path.split("/")[0] for path in files} == {module, info}, "only its own package"
    assert f"Name: {name}\n" in metadata
    assert "Description-Content-Type: text/markdown" in metadata
    if name == "monsession-core":
        assert "monsession = monsession._plugins._cli:main" in entry_points
    else:
        [requirement] = re.findall(r"^Requires-Dist: monsession-core(.*)$", metadata, re.M)
        assert requirement.strip(), f"{name} must require a monsession-core range"
        assert f"[monsession]\n{name.removeprefix('monsession-hooks-')} = {module}._plugin" in (
            entry_points
        )


@pytest.mark.parametrize("name", sorted(RELEASED))
def test_the_sdist_holds_sources_readme_and_tests(dist: pathlib.Path, name: str) -> None:
    [sdist] = dist.glob(f"{file_stem(name)}-*.tar.gz")
    top = f"{file_stem(name)}-{version()}"
    with tarfile.open(sdist) as archive:
        files = set(archive.getnames())
    assert {f"{top}/pyproject.toml", f"{top}/README.md", f"{top}/PKG-INFO"} <= files
    assert f"{top}/src/{RELEASED[name]}/__init__.py" in files
    assert any(path.startswith(f"{top}/tests/") for path in files)


def test_core_and_a_family_from_the_wheels_train_in_a_fresh_venv(
    venv: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    script = tmp_path / "train.py"
    script.write_text(TRAIN, "utf-8")
    result = run(venv / "bin" / "python", script, tmp_path / "logs", cwd=tmp_path, env=fresh_env())
    report = json.loads(result.stdout.strip().splitlines()[-1])
    site = str(venv.resolve())
    assert pathlib.Path(report["monsession"]).resolve().is_relative_to(site), report
    assert pathlib.Path(report["family"]).resolve().is_relative_to(site), report
    assert report["step"] == 3
    assert sorted(report["recorded"]) == [[1, "loss"], [2, "loss"], [3, "loss"]]


def test_monsession_plugins_lists_the_installed_family(venv: pathlib.Path) -> None:
    result = run(venv / "bin" / "monsession", "plugins", "--json", env=fresh_env())
    listing = json.loads(result.stdout)
    plugins = {plugin["distribution"]: plugin for plugin in listing["plugins"]}
    assert set(plugins) == set(FRESH)
    summary = plugins["monsession-hooks-summary"]
    assert summary["version"] == version()
    assert {"SummarySaverHook", "StepCounterHook"} <= set(summary["hook_classes"])
    assert listing["monsession_version"] == version()
