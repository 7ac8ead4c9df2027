"""Installed by name from a real package index, as a user installs the release.

Every wheel and sdist is published with ``twine upload`` to a pypiserver on
loopback (local_index.py). A fresh venv gets TensorFlow first (the user's
pick of build, as the README says; from uv's cache), then exactly
``pip install monsession-core monsession-hooks-summary`` with the local
index as pip's index and this machine's usual indexes as extra ones. A
third-party family is published and installed by name the same way, and a
family whose core range excludes the installed core is refused by pip. A
family built for a newer core (a hookimpl of a hookspec this core lacks)
installs, and `monsession plugins` names it with both versions.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
import shutil
import subprocess
import sys
from collections.abc import Iterator

import pytest
from local_index import LocalIndex, pip_environment, running
from release import RELEASED, ROOT, run, version

INSTALL = ("pip", "install", "monsession-core", "monsession-hooks-summary")  # exactly this
FRESH = {"monsession-core", "monsession-hooks-summary"}
EARLYSTOP = ROOT / "examples" / "monsession-hooks-earlystop"

# Runs in the fresh venv: an eager training loop with SummarySaverHook; the
# event files are read back with TensorBoard's own reader.
TRAIN = """
import json, pathlib, sys
import tensorflow as tf
import monsession as ms
import monsession_hooks_summary
from monsession.hooks import SummarySaverHook
from tensorboard.backend.event_processing import event_accumulator
from tensorboard.util import tensor_util

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
reader = event_accumulator.EventAccumulator(str(logdir), size_guidance={"tensors": 0})
reader.Reload()
print(json.dumps({
    "monsession": ms.__file__,
    "family": monsession_hooks_summary.__file__,
    "step": int(global_step.numpy()),
    "tags": reader.Tags()["tensors"],
    "loss": [[event.step, float(tensor_util.make_ndarray(event.tensor_proto))]
             for event in reader.Tensors("loss")],
}))
"""

# Runs in the fresh venv: the third-party family's hook, reached by name.
EARLY_STOP = """
import json
import tensorflow as tf
import monsession as ms
from monsession.hooks import EarlyStoppingHook

global_step = ms.get_or_create_global_step()

@tf.function
def train_step():
    global_step.assign_add(1)
    return {"loss": tf.constant(1.0)}  # never improves after the first evaluation

hook = EarlyStoppingHook("loss", patience=2, every_n_steps=1)
with ms.MonitoredSession(hooks=[hook, ms.StopAtStepHook(last_step=50)]) as sess:
    while not sess.should_stop():
        sess.run(train_step)
print(json.dumps({"module": type(hook).__module__, "best_step": hook.best_step,
                  "stopped_step": hook.stopped_step, "step": int(global_step.numpy())}))
"""


# A family built against a later core: it implements a hookspec this core lacks.
NEWER_PYPROJECT = """
[build-system]
requires = ["hatchling>=1.18"]
build-backend = "hatchling.build"

[project]
name = "monsession-hooks-newer"
version = "0.3.0"
description = "A family built for a newer monsession-core (a test fixture)."
readme = "README.md"
requires-python = ">=3.10"
dependencies = ["monsession-core>=0.1"]

[project.entry-points.monsession]
newer = "monsession_hooks_newer._plugin"

[tool.hatch.build.targets.wheel]
packages = ["src/monsession_hooks_newer"]
"""
NEWER_PLUGIN = """
import monsession

@monsession.hookimpl
def monsession_hook_classes():
    return []

@monsession.hookimpl
def monsession_epoch_hooks(settings):
    return []
"""


@dataclasses.dataclass(frozen=True)
class Venv:
    """The fresh venv, and what `INSTALL` did in it."""

    path: pathlib.Path
    env: dict[str, str]  # pip installs by name from the local index first
    output: str  # what the install printed
    report: dict  # pip's installation report (PIP_REPORT)
    before: set[str]  # the distributions installed before it (TensorFlow and its own)
    after: set[str]

    @property
    def python(self) -> pathlib.Path:
        return self.path / "bin" / "python"

    def pip(
        self, *args: str, report: pathlib.Path | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Runs the venv's ``pip ARGS``; does not check the exit status."""
        env = dict(self.env, **({"PIP_REPORT": str(report)} if report else {}))
        return subprocess.run(
            [str(self.path / "bin" / "pip"), *args],
            capture_output=True, text=True, check=False, env=env, cwd=self.path.parent,
        )  # fmt: skip

    def distributions(self) -> set[str]:
        listed = run(self.python, "-m", "pip", "list", "--format", "json", env=self.env).stdout
        return {item["name"].lower() for item in json.loads(listed)}


def monsession_names(names: set[str]) -> set[str]:
    return {name for name in names if name.startswith("monsession")}


def installed_from(report: dict) -> dict[str, tuple[str, str]]:
    """Each distribution a pip report installed: (version, the URL it came from)."""
    return {
        item["metadata"]["name"].lower(): (
            item["metadata"]["version"],
            item["download_info"]["url"],
        )
        for item in report["install"]
    }


def build(source: pathlib.Path, out: pathlib.Path, *kinds: str) -> list[pathlib.Path]:
    """Builds the package in `source` into `out`: its sdist and wheel, or `kinds` (``--wheel``)."""
    run(sys.executable, "-m", "uv", "build", "--quiet", *kinds, "--out-dir", out, source)
    return sorted([*out.glob("*.whl"), *out.glob("*.tar.gz")])


def edit(path: pathlib.Path, old: str, new: str) -> None:
    text = path.read_text("utf-8")
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new, 1), "utf-8")


def plugin_env() -> dict[str, str]:
    return {"TF_CPP_MIN_LOG_LEVEL": "2", "MONSESSION_STRICT_PLUGINS": "1"}


@pytest.fixture(scope="session")
def index(dist: pathlib.Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalIndex]:
    """A pypiserver on loopback to which every released wheel and sdist is published."""
    with running(tmp_path_factory.mktemp("index") / "packages") as server:
        server.upload(sorted(dist.glob("*.whl")) + sorted(dist.glob("*.tar.gz")))
        yield server


@pytest.fixture(scope="session")
def venv(index: LocalIndex, tmp_path_factory: pytest.TempPathFactory) -> Venv:
    """A fresh venv: TensorFlow, then ``pip install monsession-core monsession-hooks-summary``."""
    root = tmp_path_factory.mktemp("fresh")
    path = root / "venv"
    run(sys.executable, "-m", "uv", "venv", "--seed", "--quiet", "--python", sys.executable, path)
    python = path / "bin" / "python"
    run(sys.executable, "-m", "uv", "pip", "install", "--quiet", "--python", python,
        "tensorflow-cpu>=2.16")  # fmt: skip
    env = pip_environment(python, index)
    # A user's Python writes bytecode: TensorFlow compiles once, not in every process.
    for name in ("VIRTUAL_ENV", "PYTHONDONTWRITEBYTECODE"):
        env.pop(name, None)
    env.update(plugin_env())
    fresh = Venv(path, env, "", {}, set(), set())
    before = fresh.distributions()
    report = root / "install-report.json"
    result = fresh.pip(*INSTALL[1:], report=report)
    assert result.returncode == 0, f"{INSTALL}\n{result.stdout}\n{result.stderr}"
    report_data = json.loads(report.read_text("utf-8"))
    return dataclasses.replace(
        fresh, output=result.stdout, report=report_data, before=before, after=fresh.distributions()
    )


def test_the_index_serves_every_released_distribution(
    index: LocalIndex, dist: pathlib.Path
) -> None:
    published = {path.name for path in index.folder.iterdir()}
    released = {path.name for path in dist.iterdir() if path.suffix in (".whl", ".gz")}
    assert len(released) == 2 * len(RELEASED) and released <= published  # a wheel and an sdist each
    assert "monsession-core" in index.names()


def test_pip_install_by_name_installs_exactly_core_and_the_family(venv: Venv) -> None:
    assert not monsession_names(venv.before)
    assert monsession_names(venv.after) == FRESH
    installed = installed_from(venv.report)
    for name in FRESH:  # Both came from the local index, in the release's version.
        got_version, url = installed[name]
        assert got_version == version(), installed
        assert url.startswith(venv.env["PIP_INDEX_URL"].removesuffix("simple/")), installed
    assert monsession_names(set(installed)) == FRESH
    assert "Successfully installed" in venv.output


def test_the_installed_family_trains_and_its_summaries_read_back(
    venv: Venv, tmp_path: pathlib.Path
) -> None:
    script = tmp_path / "train.py"
    script.write_text(TRAIN, "utf-8")
    result = run(venv.python, script, tmp_path / "logs", cwd=tmp_path, env=venv.env)
    report = json.loads(result.stdout.strip().splitlines()[-1])
    site = venv.path.resolve()
    assert pathlib.Path(report["monsession"]).resolve().is_relative_to(site), report
    assert pathlib.Path(report["family"]).resolve().is_relative_to(site), report
    assert report["step"] == 3
    assert report["tags"] == ["loss"]
    # w = 4 - 0.8 = 3.2 - 0.64 = 2.56: the loss w**2 before each step's update.
    assert [step for step, _ in report["loss"]] == [1, 2, 3]
    assert [loss for _, loss in report["loss"]] == pytest.approx([16.0, 10.24, 6.5536])


def test_monsession_plugins_lists_the_installed_family(venv: Venv) -> None:
    result = run(venv.path / "bin" / "monsession", "plugins", "--json", env=venv.env)
    listing = json.loads(result.stdout)
    plugins = {plugin["distribution"]: plugin for plugin in listing["plugins"]}
    assert set(plugins) == FRESH
    summary = plugins["monsession-hooks-summary"]
    assert summary["version"] == version()
    assert {"SummarySaverHook", "StepCounterHook"} <= set(summary["hook_classes"])
    assert listing["monsession_version"] == version()
    assert listing["failures"] == []


def test_a_third_party_family_published_there_installs_by_name_lists_and_runs(
    venv: Venv, index: LocalIndex, tmp_path: pathlib.Path
) -> None:
    index.upload(build(EARLYSTOP, tmp_path / "dist"))
    report = tmp_path / "report.json"
    result = venv.pip("install", "monsession-hooks-earlystop", report=report)
    try:
        assert result.returncode == 0, result.stderr
        installed = installed_from(json.loads(report.read_text("utf-8")))
        assert set(installed) == {"monsession-hooks-earlystop"}, "core was already there"
        assert installed["monsession-hooks-earlystop"][1].startswith(index.url)
        listing = json.loads(
            run(venv.path / "bin" / "monsession", "plugins", "--json", env=venv.env).stdout
        )
        plugins = {plugin["name"]: plugin for plugin in listing["plugins"]}
        assert plugins["earlystop"]["distribution"] == "monsession-hooks-earlystop"
        assert plugins["earlystop"]["hook_classes"] == ["EarlyStoppingHook"]
        script = tmp_path / "early_stop.py"
        script.write_text(EARLY_STOP, "utf-8")
        ran = json.loads(run(venv.python, script, cwd=tmp_path, env=venv.env).stdout)
        # Loss 1.0 at step 1 is the best; steps 2 and 3 do not improve: patience 2 stops at 3.
        assert ran == {
            "module": "monsession_hooks_earlystop._early_stopping",
            "best_step": 1,
            "stopped_step": 3,
            "step": 3,
        }
    finally:
        venv.pip("uninstall", "--yes", "monsession-hooks-earlystop")
    assert monsession_names(venv.distributions()) == FRESH


def test_a_family_whose_core_range_excludes_the_installed_core_is_refused(
    venv: Venv, index: LocalIndex, tmp_path: pathlib.Path
) -> None:
    source = tmp_path / "monsession-hooks-nextcore"
    shutil.copytree(EARLYSTOP, source, ignore=shutil.ignore_patterns("tests", "__pycache__"))
    pyproject = source / "pyproject.toml"
    edit(pyproject, 'name = "monsession-hooks-earlystop"', 'name = "monsession-hooks-nextcore"')
    edit(pyproject, '"monsession-core>=1.0,<2"', '"monsession-core>=2.0,<3"')
    index.upload(build(source, tmp_path / "dist", "--wheel"))
    result = venv.pip("install", "monsession-hooks-nextcore")
    assert result.returncode != 0, result.stdout
    # pip names the range, the family that requires it and the core versions there are:
    # "Could not find a version that satisfies the requirement monsession-core<3,>=2.0
    # (from monsession-hooks-nextcore) (from versions: 0.1.0)".
    for part in (
        "requirement monsession-core<3,>=2.0",
        "(from monsession-hooks-nextcore)",
        f"(from versions: {version()})",
        "No matching distribution found for monsession-core<3,>=2.0",
    ):
        assert part in result.stderr, result.stderr
    assert monsession_names(venv.distributions()) == FRESH


def newer_family(folder: pathlib.Path) -> pathlib.Path:
    """Writes the sources of monsession-hooks-newer 0.3.0 into `folder`."""
    package = folder / "src" / "monsession_hooks_newer"
    package.mkdir(parents=True)
    (folder / "pyproject.toml").write_text(NEWER_PYPROJECT, "utf-8")
    (folder / "README.md").write_text("# monsession-hooks-newer\n\nA test fixture.\n", "utf-8")
    (package / "__init__.py").write_text('__version__ = "0.3.0"\n', "utf-8")
    (package / "_plugin.py").write_text(NEWER_PLUGIN, "utf-8")
    return folder


def test_a_family_built_for_a_newer_core_is_named_with_both_versions(
    venv: Venv, index: LocalIndex, tmp_path: pathlib.Path
) -> None:
    index.upload(build(newer_family(tmp_path / "newer"), tmp_path / "dist", "--wheel"))
    installed = venv.pip("install", "monsession-hooks-newer")
    message = (
        "Plugin 'newer' (monsession-hooks-newer 0.3.0) implements the hookspec "
        f"monsession_epoch_hooks, which monsession-core {version()} does not declare: it was "
        "built for a newer core (it requires monsession-core>=0.1) or misspells a hookspec "
        "name, and monsession never calls that hookimpl."
    )
    command = (venv.path / "bin" / "monsession", "plugins")
    try:
        assert installed.returncode == 0, installed.stderr
        listed = run(*command, env=dict(venv.env, MONSESSION_STRICT_PLUGINS=""))
        assert message in listed.stderr, listed.stderr  # the WARNING
        assert (
            "  'newer' (monsession-hooks-newer 0.3.0), entry point monsession_hooks_newer._plugin: "
            "monsession_epoch_hooks (requires monsession-core>=0.1)"
        ) in listed.stdout.splitlines(), listed.stdout
        strict = subprocess.run(
            [str(part) for part in command], capture_output=True, text=True, env=venv.env
        )
        assert strict.returncode == 1, strict.stdout
        assert strict.stderr.startswith(f"monsession: error: {message}"), strict.stderr
    finally:
        venv.pip("uninstall", "--yes", "monsession-hooks-newer")
    assert monsession_names(venv.distributions()) == FRESH
