"""Tests of the `monsession` command line."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

import monsession
import monsession.__main__ as cli
from monsession._plugins import _plugin_manager

if TYPE_CHECKING:
    from core_plugin_fixtures import PluginSite

pytest_plugins = ["core_plugin_fixtures"]

Register = Callable[[object, str], object]

BROKEN_MESSAGE = (
    "Plugin 'broken' (broken-hooks 2.3) failed to load: ModuleNotFoundError: No module "
    "named 'acme_missing_dependency'; set MONSESSION_DISABLED_PLUGINS=broken to skip it."
)


@pytest.fixture
def listing_site(broken_site: PluginSite) -> PluginSite:
    """acme (loads), broken (fails to load) and blocked-hooks (blocked when asked)."""
    broken_site.install(
        "blocked-hooks", "0.1", {"blocked": "blocked_plugin"}, {"blocked_plugin": "raise 1/0\n"}
    )
    return broken_site


BLOCK = {"MONSESSION_DISABLED_PLUGINS": "blocked"}


def test_plugins_prints_aligned_table_failures_and_blocked(listing_site: PluginSite) -> None:
    result = listing_site.run("-m", "monsession", "plugins", env=BLOCK)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    header, core, acme = lines[:3]
    assert header == "PLUGIN  DISTRIBUTION     VERSION  ENTRY POINT  HOOK CLASSES"
    assert core.split()[:4] == ["core", "monsession-core", _plugin_manager.core_version(), "(built"]
    assert acme.split() == ["acme", "acme-hooks", "1.0", "acme_plugin", "AcmeHook"]
    columns = {
        "DISTRIBUTION": "acme-hooks",
        "VERSION": "1.0",
        "ENTRY POINT": "acme_plugin",
        "HOOK CLASSES": "AcmeHook",
    }
    for column, value in columns.items():
        assert header.index(column) == acme.index(value)
    assert lines[3:] == [
        "",
        "Failed to load (1):",
        "  'broken' (broken-hooks 2.3), entry point broken_plugin: ModuleNotFoundError: "
        "No module named 'acme_missing_dependency'",
        "",
        "Blocked by MONSESSION_DISABLED_PLUGINS (1):",
        "  'blocked' (blocked-hooks 0.1), entry point blocked_plugin",
    ]
    assert BROKEN_MESSAGE in result.stderr  # the warning, logged as well
    assert not listing_site.marker("blocked_plugin").exists()
    assert not listing_site.marker("acme_impl").exists()


def test_plugins_json(listing_site: PluginSite) -> None:
    result = listing_site.run("-m", "monsession", "plugins", "--json", env=BLOCK)
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["monsession_version"] == _plugin_manager.core_version()
    assert document["autoload"] is True
    assert [plugin["name"] for plugin in document["plugins"]] == ["core", "acme"]
    assert document["plugins"][1] == {
        "name": "acme",
        "distribution": "acme-hooks",
        "version": "1.0",
        "entry_point": "acme_plugin",
        "hook_classes": ["AcmeHook"],
        "training_arguments": ["save_summaries_steps"],
        "other_classes": [],
    }
    assert document["plugins"][0]["entry_point"] is None
    assert document["failures"] == [
        {
            "name": "broken",
            "distribution": "broken-hooks",
            "version": "2.3",
            "entry_point": "broken_plugin",
            "error": "ModuleNotFoundError: No module named 'acme_missing_dependency'",
            "message": BROKEN_MESSAGE,
        }
    ]
    assert document["blocked"] == [
        {"name": "blocked", "distribution": "blocked-hooks", "version": "0.1",
         "entry_point": "blocked_plugin"}
    ]  # fmt: skip


def test_strict_mode_exits_non_zero_with_the_message(listing_site: PluginSite) -> None:
    result = listing_site.run(
        "-m", "monsession", "plugins", env={"MONSESSION_STRICT_PLUGINS": "1", **BLOCK}
    )
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr == f"monsession: error: {BROKEN_MESSAGE}\n"


def test_console_script(listing_site: PluginSite) -> None:
    script = shutil.which("monsession", path=str(Path(sys.executable).parent))
    assert script is not None, "core installs a `monsession` console script"
    # The script is a Python file: run it with `-S` too, so it sees only the site.
    result = listing_site.run(script, "plugins", env=BLOCK)
    assert result.returncode == 0, result.stderr
    assert "acme-hooks" in result.stdout and "Failed to load (1):" in result.stdout


def test_listing_never_imports_tensorflow(listing_site: PluginSite) -> None:
    found = listing_site.run_json(
        """
        import contextlib, io, json, runpy, sys
        for argv in (["plugins"], ["plugins", "--json"]):
            sys.argv = ["monsession", *argv]
            with contextlib.redirect_stdout(io.StringIO()):
                try:
                    runpy.run_module("monsession", run_name="__main__")
                except SystemExit as exit:
                    assert exit.code == 0, exit.code
        print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] == "tensorflow")))
        """
    )
    assert found == []


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as raised:
        cli.main(["--version"])
    assert raised.value.code == 0
    assert capsys.readouterr().out == f"monsession {_plugin_manager.core_version()}\n"


def test_a_command_is_required(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as raised:
        cli.main([])
    assert raised.value.code == 2
    assert "COMMAND" in capsys.readouterr().err


class _Plugin:
    @monsession.hookimpl
    def monsession_hook_classes(self) -> list[Any]:
        return ["somewhere:ZHook", "somewhere:AHook"]


def test_in_process_listing_shows_hand_registered_plugins_and_autoload_note(
    register_plugin: Register, capsys: pytest.CaptureFixture[str]
) -> None:
    register_plugin(_Plugin(), "handmade")
    assert cli.main(["plugins"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[2].split() == ["handmade", "-", "-", "-", "AHook,", "ZHook"]
    assert lines[-1] == (
        "Entry-point autoloading is off (MONSESSION_DISABLE_PLUGIN_AUTOLOAD is set); "
        "only core's plugin and plugins registered by hand are loaded."
    )
    assert cli.main(["plugins", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["autoload"] is False
    assert document["plugins"][1]["hook_classes"] == ["AHook", "ZHook"]


@pytest.mark.parametrize("argv", [["plugins"], ["plugins", "--json"]])
def test_a_closed_pipe_ends_it_quietly_with_sigpipes_status(argv: list[str]) -> None:
    """`monsession plugins | head`: the reader is gone before it writes."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        result = subprocess.run(
            [sys.executable, "-m", "monsession", *argv],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        os.close(write_end)
    assert result.stderr == ""
    assert result.returncode == 128 + signal.SIGPIPE


def test_piped_into_head_it_prints_no_error() -> None:
    result = subprocess.run(
        f"{shlex.quote(sys.executable)} -m monsession plugins --json | head -n 2",
        shell=True,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert result.stdout.splitlines() == ["{", result.stdout.splitlines()[1]]
    assert result.stderr == ""


def test_classes_that_are_not_hooks_are_listed_apart(plugin_site: PluginSite) -> None:
    plugin_site.install(
        "cache-hooks",
        "1.0",
        {"cache": "cache_plugin"},
        {
            "cache_plugin": """
import monsession

@monsession.hookimpl
def monsession_hook_classes():
    return ["cache_impl:CacheHook"]

@monsession.hookimpl
def monsession_other_classes():
    return ["cache_impl:WriterCache"]
""",
            "cache_impl": "class CacheHook: pass\nclass WriterCache: pass\n",
        },
    )
    text = plugin_site.run("-m", "monsession", "plugins")
    assert text.returncode == 0, text.stderr
    [row] = [line for line in text.stdout.splitlines() if line.startswith("cache ")]
    assert row.split()[-1] == "CacheHook"
    assert text.stdout.endswith("\n\nOther classes (not hooks):\n  cache: WriterCache\n")
    document = json.loads(plugin_site.run("-m", "monsession", "plugins", "--json").stdout)
    [cache] = [plugin for plugin in document["plugins"] if plugin["name"] == "cache"]
    assert (cache["hook_classes"], cache["other_classes"]) == (["CacheHook"], ["WriterCache"])
    # Users import them from monsession.hooks all the same.
    found = plugin_site.run_json(
        "import json, monsession.hooks as h; print(json.dumps(h.WriterCache.__name__))"
    )
    assert found == "WriterCache"
