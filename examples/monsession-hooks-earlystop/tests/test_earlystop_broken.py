"""A plugin that fails to load never takes a training run down, unless asked.

monsession-hooks-broken is installed next to this package (the tox env
`thirdparty`): its plugin module imports a module that does not exist. The
training runs with and without strict mode, and the listings, run in fresh
processes, reading the plugin switches as a user's script does; the run with
the plugin disabled runs in this process, with a fresh plugin manager.
"""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys

import earlystop_testing
import pytest
from earlystop_testing import (
    EARLYSTOP_ENV,
    EARLYSTOP_ON,
    PLUGIN_ENV,
    STOP_STEP,
    finish_process,
    make_program,
    mode_context,
    run_python,
    start_process,
    train,
)

from monsession import plugins

BROKEN_VERSION = importlib.metadata.version("monsession-hooks-broken")
ERROR = "ModuleNotFoundError: No module named 'monsession_hooks_broken_native'"
WARNING = (
    f"Plugin 'broken' (monsession-hooks-broken {BROKEN_VERSION}) failed to load: {ERROR}; "
    "set MONSESSION_DISABLED_PLUGINS=broken to skip it."
)
BROKEN_SOURCE = {
    "name": "broken",
    "distribution": "monsession-hooks-broken",
    "version": BROKEN_VERSION,
    "entry_point": "monsession_hooks_broken._plugin",
}
SWITCHES = {"default": {}, "strict": {"MONSESSION_STRICT_PLUGINS": "1"}}


@pytest.fixture(scope="module")
def training_runs() -> dict[str, subprocess.CompletedProcess[str]]:
    """A graph-mode `MonitoredTrainingSession` run per plugin switch, run side by side.

    Early stopping is on (`EARLYSTOP_ON`), so a run that goes through stops at
    `STOP_STEP` and prints it.
    """
    script = earlystop_testing.__file__
    processes = {
        name: start_process(sys.executable, script, env={**EARLYSTOP_ON, **switch})
        for name, switch in SWITCHES.items()
    }
    return {name: finish_process(process) for name, process in processes.items()}


def test_training_goes_on_with_one_warning(
    training_runs: dict[str, subprocess.CompletedProcess[str]],
) -> None:
    run = training_runs["default"]
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout) == {"global_step": STOP_STEP}
    assert run.stderr.count(WARNING) == 1


def test_strict_mode_fails_the_training_run(
    training_runs: dict[str, subprocess.CompletedProcess[str]],
) -> None:
    run = training_runs["strict"]
    assert run.returncode == 1
    assert run.stdout == ""
    # The traceback shows the error class and the sentence naming the plugin.
    assert f"PluginLoadError: {WARNING}\n" in run.stderr
    assert f"\n{ERROR}\n" in run.stderr  # The cause is chained.


def test_disabled_plugin_is_never_imported(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    for name in (*PLUGIN_ENV, *EARLYSTOP_ENV):
        monkeypatch.delenv(name, raising=False)
    for name, value in EARLYSTOP_ON.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("MONSESSION_DISABLED_PLUGINS", "broken")
    # Importing the plugin module would import its package first, which works.
    sys.modules.pop("monsession_hooks_broken", None)
    plugins.reset_plugin_manager()
    try:
        with mode_context("graph"):
            assert train(make_program("graph"), []) == STOP_STEP
        listing = plugins.plugin_infos()
    finally:
        monkeypatch.undo()
        plugins.reset_plugin_manager()
    assert "monsession_hooks_broken" not in sys.modules
    assert not [r for r in caplog.records if "failed to load" in r.getMessage()]
    assert (listing.failures, [source.name for source in listing.blocked]) == ((), ["broken"])


def test_plugins_lists_the_failure() -> None:
    result = run_python("-m", "monsession", "plugins")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    failures = lines.index("Failed to load (1):")
    assert lines[failures + 1 :] == [
        f"  'broken' (monsession-hooks-broken {BROKEN_VERSION}), entry point "
        f"monsession_hooks_broken._plugin: {ERROR}"
    ]
    assert any(line.startswith("earlystop ") for line in lines[:failures])
    assert WARNING in result.stderr


def test_plugins_json_lists_the_failure() -> None:
    result = run_python("-m", "monsession", "plugins", "--json")
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["failures"] == [{**BROKEN_SOURCE, "error": ERROR, "message": WARNING}]
    assert "broken" not in [plugin["name"] for plugin in document["plugins"]]
    assert "earlystop" in [plugin["name"] for plugin in document["plugins"]]


def test_plugins_lists_a_disabled_plugin_as_blocked() -> None:
    result = run_python(
        "-m", "monsession", "plugins", "--json", env={"MONSESSION_DISABLED_PLUGINS": "broken"}
    )
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert (document["failures"], document["blocked"]) == ([], [BROKEN_SOURCE])
    assert "failed to load" not in result.stderr


def test_plugins_fails_in_strict_mode() -> None:
    result = run_python("-m", "monsession", "plugins", env={"MONSESSION_STRICT_PLUGINS": "1"})
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr == f"monsession: error: {WARNING}\n"


def test_a_blocked_third_party_hook_names_the_variable_that_blocks_it() -> None:
    """As for this project's families: not a bare `cannot import name`."""
    code = "from monsession.hooks import EarlyStoppingHook"
    result = run_python("-c", code, env={"MONSESSION_DISABLED_PLUGINS": "earlystop,broken"})
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(
        "ImportError: No loaded hook family provides a hook class named 'EarlyStoppingHook'; "
        "MONSESSION_DISABLED_PLUGINS blocks the plugin(s) 'earlystop' (monsession-hooks-earlystop "
    ), last
    assert "remove it from that variable to use it." in last
