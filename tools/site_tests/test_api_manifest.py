"""The API check (`tools/api_manifest.py`): the sources against the last release's manifest.

Run by the `site` env (griffe, no TensorFlow). The faults are made in a copy
of the packages' sources, which the check reads as it reads the real ones.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
sys.path.insert(0, str(ROOT / "tools"))

import api_manifest  # noqa: E402

PACKAGES = (
    "core",
    "hooks-checkpoint",
    "hooks-summary",
    "hooks-logging",
    "hooks-debug",
    "hooks-keras",
    "hooks-mlflow",
)


@pytest.fixture(scope="module")
def released() -> dict:
    path = api_manifest.baseline(api_manifest.core_version())
    assert path is not None, "no manifest in api/ for this release or an older one"
    return json.loads(path.read_text("utf-8"))


@pytest.fixture
def sources(tmp_path: Path) -> Path:
    """A copy of every package's sources, to break."""
    for package in PACKAGES:
        shutil.copytree(ROOT / package / "src", tmp_path / package / "src")
    return tmp_path


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text("utf-8")
    assert text.count(old) == 1, f"{old!r} is not once in {path}"
    path.write_text(text.replace(old, new), "utf-8")


def _check(sources: Path, released: dict, version: str) -> api_manifest.Report:
    return api_manifest.compare(
        released, api_manifest.extract(sources), version, api_manifest.registry(ROOT)
    )


def _new(added: list[str], before: list[str]) -> list[str]:
    """The additions an edit made, beyond those the sources hold since the release."""
    return [name for name in added if name not in before]


def test_the_sources_keep_every_name_and_signature_of_the_last_release(capsys) -> None:
    assert api_manifest.check() == 0, capsys.readouterr().out
    assert " 0 incompatible changes" in capsys.readouterr().out


def test_the_manifest_records_names_signatures_hookspecs_and_switches(released: dict) -> None:
    timer = released["modules"]["monsession"]["SecondOrStepTimer"]
    assert timer["parameters"] == [
        {"name": "every_secs", "kind": "positional or keyword", "default": "None"},
        {"name": "every_steps", "kind": "positional or keyword", "default": "None"},
    ]
    assert "should_trigger_for_step" in timer["members"]
    assert released["hookspecs"]["monsession_default_hooks"] == ["settings"]
    assert released["entry_point_group"] == "monsession"
    assert "MONSESSION_STRICT_PLUGINS" in released["environment_variables"]
    assert set(released["modules"]) >= {
        "monsession",
        "monsession.plugins",
        "monsession_hooks_summary",
    }


def test_a_removed_name_fails(sources: Path, released: dict) -> None:
    _edit(sources / "core/src/monsession/__init__.py", '    "Epochs",\n', "")
    report = _check(sources, released, "1.1.0")
    assert report.incompatible == ["monsession.Epochs: removed"]


def test_an_incompatible_signature_fails(sources: Path, released: dict) -> None:
    timer = sources / "core/src/monsession/_api/_control_hooks.py"
    # SecondOrStepTimer's constructor (TimedHook's, beside it, has the same parameters).
    _edit(
        timer,
        "every_steps: int | None = None) -> None:\n        check_schedule(",
        "every_steps: int | None = 10) -> None:\n        check_schedule(",
    )
    _edit(
        timer,
        "def should_trigger_for_step(self, step: int)",
        "def should_trigger_for_step(self, global_step: int)",
    )
    report = _check(sources, released, "1.1.0")
    assert report.incompatible == [
        "monsession.SecondOrStepTimer: parameter 'every_steps' default changed from None to 10",
        "monsession.SecondOrStepTimer.should_trigger_for_step: parameter 'step' removed",
        "monsession.SecondOrStepTimer.should_trigger_for_step: "
        "new required parameter 'global_step'",
    ]


def test_reordered_positional_parameters_fail(sources: Path, released: dict) -> None:
    creators = sources / "core/src/monsession/_session/_session_creators.py"
    text = creators.read_text("utf-8")
    worker = text.index("class WorkerSessionCreator")
    old = '        scaffold: Scaffold | None = None,\n        master: str = "",\n'
    new = '        master: str = "",\n        scaffold: Scaffold | None = None,\n'
    assert text.index(old, worker) > worker
    creators.write_text(text[:worker] + text[worker:].replace(old, new, 1), "utf-8")
    report = _check(sources, released, "1.1.0")
    assert report.incompatible == [
        "monsession.WorkerSessionCreator: positional parameters reordered: "
        "['scaffold', 'master', 'config', 'max_wait_secs'] -> "
        "['master', 'scaffold', 'config', 'max_wait_secs']"
    ]


def test_a_removed_hookspec_argument_fails_and_an_added_one_passes(
    sources: Path, released: dict
) -> None:
    before = _check(sources, released, "1.1.0").added  # Added since the release already.
    _edit(
        sources / "core/src/monsession/_plugins/_hookspecs.py",
        "def monsession_default_hooks(settings: TrainingSettings)",
        "def monsession_default_hooks(training: TrainingSettings)",
    )
    report = _check(sources, released, "1.1.0")
    assert report.incompatible == ["hookspec monsession_default_hooks: argument 'settings' removed"]
    assert _new(report.added, before) == ["hookspec monsession_default_hooks(training)"]


def test_additions_pass_and_are_listed(sources: Path, released: dict) -> None:
    before = _check(sources, released, "1.1.0").added  # Added since the release already.
    _edit(
        sources / "core/src/monsession/_api/_control_hooks.py",
        "def reset(self) -> None:",
        "def reset(self, *, keep: bool = False) -> None:",
    )
    init = sources / "core/src/monsession/__init__.py"
    _edit(init, "__all__ = [\n", '__all__ = [\n    "NEW_NAME",\n')
    _edit(init, '__version__ = "', 'NEW_NAME = 1\n"""A new public name."""\n__version__ = "')
    report = _check(sources, released, "1.1.0")
    assert report.incompatible == []
    assert _new(report.added, before) == ["monsession.NEW_NAME"]


def test_a_deprecated_name_goes_only_in_its_removing_release(sources: Path, released: dict) -> None:
    _edit(sources / "core/src/monsession/__init__.py", '    "Epochs",\n', "")
    registry = sources / "core/src/monsession/_attributes.py"
    entry = 'Deprecated("monsession.Epochs", "1.1.0", "2.0", "use x")'
    registry.write_text(
        registry.read_text("utf-8") + f'_BY_NAME["monsession.Epochs"] = {entry}\n', "utf-8"
    )
    new, removable = api_manifest.extract(sources), api_manifest.registry(sources)
    assert api_manifest.compare(released, new, "1.9.0", removable).incompatible == [
        "monsession.Epochs: removed"
    ]
    assert api_manifest.compare(released, new, "2.0.0", removable).incompatible == []


def test_the_command_fails_on_a_removed_name(sources: Path, capsys) -> None:
    _edit(sources / "core/src/monsession/__init__.py", '    "Epochs",\n', "")
    assert api_manifest.main(["check", "--root", str(sources)]) == 1
    out = capsys.readouterr().out
    assert "  INCOMPATIBLE: monsession.Epochs: removed\n" in out
    assert "deprecate it first" in out
