"""monsession-hooks-earlystop as an installed third-party plugin.

These tests need the real distribution installed (the tox env `thirdparty`):
the entry point, the listing and `MonitoredTrainingSession` see only what
`importlib.metadata` sees.
"""

from __future__ import annotations

import importlib.metadata
import json
import logging
import sys
from collections.abc import Iterator
from pathlib import Path

import monsession_hooks_earlystop
import pytest
from earlystop_testing import (
    BEST,
    BEST_STEP,
    EARLYSTOP_ENV,
    EARLYSTOP_ON,
    PLUGIN_ENV,
    SAFETY_LAST_STEP,
    STOP_STEP,
    make_program,
    mode_context,
    run_process,
    run_python,
    train,
)
from monsession_hooks_earlystop import EarlyStoppingHook
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

import monsession
from monsession import plugins

VERSION = importlib.metadata.version("monsession-hooks-earlystop")
PLUGIN_ROW = {
    "name": "earlystop",
    "distribution": "monsession-hooks-earlystop",
    "version": VERSION,
    "entry_point": "monsession_hooks_earlystop._plugin",
    "hook_classes": ["EarlyStoppingHook"],
    "other_classes": [],
    "training_arguments": [],
}
MONSESSION_SCRIPT = Path(sys.executable).with_name("monsession")


@pytest.fixture
def plugin_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    """No plugin switch and no MONSESSION_EARLYSTOP_* variable; a fresh plugin manager."""
    for name in (*PLUGIN_ENV, *EARLYSTOP_ENV):
        monkeypatch.delenv(name, raising=False)
    plugins.reset_plugin_manager()
    yield monkeypatch
    monkeypatch.undo()
    plugins.reset_plugin_manager()


def test_entry_point_is_installed() -> None:
    [entry_point] = importlib.metadata.entry_points(group="monsession", name="earlystop")
    assert entry_point.value == "monsession_hooks_earlystop._plugin"
    assert entry_point.dist is not None
    assert entry_point.dist.name == "monsession-hooks-earlystop"
    assert entry_point.dist.version == monsession_hooks_earlystop.__version__
    [requirement] = [Requirement(text) for text in entry_point.dist.requires or []]
    assert requirement.name == "monsession-core"
    assert requirement.specifier == SpecifierSet(">=1.0,<2")


@pytest.mark.parametrize("command", ["python -m monsession", "monsession"])
def test_plugins_lists_the_family(command: str) -> None:
    if command == "monsession":
        result = run_process(str(MONSESSION_SCRIPT), "plugins")
    else:
        result = run_python("-m", "monsession", "plugins")
    assert result.returncode == 0, result.stderr
    rows = [line.split() for line in result.stdout.splitlines()]
    assert [
        "earlystop",
        "monsession-hooks-earlystop",
        VERSION,
        "monsession_hooks_earlystop._plugin",
        "EarlyStoppingHook",
    ] in rows


def test_plugins_json_lists_the_family() -> None:
    result = run_python("-m", "monsession", "plugins", "--json")
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    [row] = [plugin for plugin in document["plugins"] if plugin["name"] == "earlystop"]
    assert row == PLUGIN_ROW
    assert document["autoload"] is True


def test_listing_does_not_import_tensorflow() -> None:
    # `python -m monsession plugins`, run in a process that checks afterwards.
    code = (
        "import runpy, sys\n"
        "sys.argv = ['monsession', 'plugins']\n"
        "try:\n"
        "    runpy.run_module('monsession', run_name='__main__', alter_sys=True)\n"
        "except SystemExit as exit:\n"
        "    assert exit.code in (0, None), exit.code\n"
        "assert 'monsession_hooks_earlystop._plugin' in sys.modules\n"
        "assert 'tensorflow' not in sys.modules, 'tensorflow was imported'\n"
    )
    result = run_python("-c", code)
    assert result.returncode == 0, result.stderr
    assert "EarlyStoppingHook" in result.stdout


def test_importing_the_package_does_not_import_tensorflow() -> None:
    code = (
        "import sys\n"
        "import monsession_hooks_earlystop, monsession.hooks\n"
        "assert 'EarlyStoppingHook' in dir(monsession_hooks_earlystop)\n"
        "assert 'EarlyStoppingHook' in dir(monsession.hooks)\n"
        "assert 'tensorflow' not in sys.modules, 'tensorflow was imported'\n"
        "print(monsession_hooks_earlystop.EarlyStoppingHook.__name__)\n"
    )
    result = run_python("-c", code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "EarlyStoppingHook"


@pytest.mark.usefixtures("plugin_env")
def test_monsession_hooks_finds_the_class() -> None:
    from monsession.hooks import EarlyStoppingHook as FromHooks

    assert FromHooks is EarlyStoppingHook
    entry = plugins.hook_class_entries()["EarlyStoppingHook"]
    assert (entry.plugin, entry.distribution, entry.version) == (
        "earlystop",
        "monsession-hooks-earlystop",
        VERSION,
    )
    assert entry.ref == "monsession_hooks_earlystop._early_stopping:EarlyStoppingHook"


@pytest.mark.usefixtures("plugin_env")
def test_plugin_implements_two_hookspecs() -> None:
    manager = plugins.get_plugin_manager()
    plugin = manager.get_plugin("earlystop")
    assert plugin is sys.modules["monsession_hooks_earlystop._plugin"]
    assert sorted(caller.name for caller in manager.get_hookcallers(plugin) or []) == [
        "monsession_default_hooks",
        "monsession_hook_classes",
    ]


@pytest.mark.parametrize("mode", ["graph", "eager"])
def test_monitored_training_session_adds_the_hook_when_asked(
    mode: str, plugin_env: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="tensorflow")
    for name, value in EARLYSTOP_ON.items():
        plugin_env.setenv(name, value)
    with mode_context(mode):
        assert train(make_program(mode), []) == STOP_STEP
    assert [r.getMessage() for r in caplog.records if r.module == "_early_stopping"] == [
        f"Early stopping at global step {STOP_STEP}: loss did not improve by more than 0 in "
        f"3 evaluations (every 2 steps); best: {BEST:g} at global step {BEST_STEP}."
    ]


@pytest.mark.parametrize("mode", ["graph", "eager"])
def test_monitored_training_session_adds_nothing_by_default(
    mode: str, plugin_env: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="tensorflow")
    plugin_env.setenv("MONSESSION_EARLYSTOP_PATIENCE", "3")  # Without a monitor: ignored.
    with mode_context(mode):
        assert train(make_program(mode), []) == SAFETY_LAST_STEP
    assert not [r for r in caplog.records if r.module == "_early_stopping"]


def test_every_setting_reaches_the_hook(plugin_env: pytest.MonkeyPatch) -> None:
    settings = {
        "MONSESSION_EARLYSTOP_MONITOR": "score",
        "MONSESSION_EARLYSTOP_PATIENCE": "3",
        "MONSESSION_EARLYSTOP_EVERY_N_STEPS": "2",
        "MONSESSION_EARLYSTOP_MIN_DELTA": "0.2",
        "MONSESSION_EARLYSTOP_MODE": "max",
    }
    for name, value in settings.items():
        plugin_env.setenv(name, value)
    with mode_context("eager"):
        # -1.0 does not beat -1.0995 by more than 0.2: the last improvement is step 8.
        assert train(make_program("eager"), []) == 14


BAD_SETTINGS = [
    (
        "MONSESSION_EARLYSTOP_PATIENCE",
        "three",
        "MONSESSION_EARLYSTOP_PATIENCE must be an integer >= 1, got 'three'",
    ),
    ("MONSESSION_EARLYSTOP_PATIENCE", "0", "patience must be an int >= 1, got 0"),
    (
        "MONSESSION_EARLYSTOP_MIN_DELTA",
        "tiny",
        "MONSESSION_EARLYSTOP_MIN_DELTA must be a number >= 0, got 'tiny'",
    ),
    ("MONSESSION_EARLYSTOP_MODE", "auto", "mode must be 'min' or 'max', got 'auto'"),
]


@pytest.mark.parametrize(("name", "value", "message"), BAD_SETTINGS)
def test_bad_settings_fail_before_training(
    plugin_env: pytest.MonkeyPatch, name: str, value: str, message: str
) -> None:
    # A ValueError from monsession_default_hooks is the user's bad setting:
    # core passes it on unchanged (it is no failure of the plugin).
    plugin_env.setenv("MONSESSION_EARLYSTOP_MONITOR", "loss")
    plugin_env.setenv(name, value)
    with mode_context("eager"):
        program = make_program("eager")
        with pytest.raises(ValueError) as info:
            monsession.MonitoredTrainingSession()
    assert message in str(info.value)
    assert "MONSESSION_EARLYSTOP_" in str(info.value)
    assert int(program.global_step.numpy()) == 0
