"""The plugin: installed, registers KerasCallbacksHook lazily, adds no default hook."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys

import monsession
import monsession.hooks
from monsession import plugins
from monsession_hooks_keras import KerasCallbacksHook, _plugin


def test_entry_point_is_installed():
    (entry_point,) = importlib.metadata.entry_points(group="monsession", name="keras")
    assert entry_point.value == "monsession_hooks_keras._plugin"
    assert entry_point.dist.name == "monsession-hooks-keras"
    assert entry_point.load() is _plugin


def test_monsession_hooks_resolves_the_hook_lazily():
    assert monsession.hooks.KerasCallbacksHook is KerasCallbacksHook
    entry = plugins.hook_class_entries()["KerasCallbacksHook"]
    assert entry.plugin == "keras"
    assert entry.distribution == "monsession-hooks-keras"
    assert isinstance(entry.ref, str), "registered lazily"
    assert plugins.KNOWN_HOOK_FAMILIES["KerasCallbacksHook"] == "monsession-hooks-keras"


def test_plugin_serves_no_training_argument_and_adds_no_default_hook():
    assert not hasattr(_plugin, "monsession_training_arguments")
    assert not hasattr(_plugin, "monsession_default_hooks")
    (info,) = [p for p in plugins.plugin_infos().plugins if p.source.name == "keras"]
    assert info.hook_classes == ("KerasCallbacksHook",)
    assert info.training_arguments == ()


def test_listing_and_importing_the_package_import_neither_tensorflow_nor_keras():
    code = (
        "import sys\n"
        "import monsession_hooks_keras\n"
        "from monsession import plugins as pm\n"
        "assert pm.hook_class_entries()['KerasCallbacksHook'].plugin == 'keras'\n"
        "assert 'tensorflow' not in sys.modules and 'keras' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_without_the_family_the_hook_name_gives_the_install_hint():
    code = (
        "import monsession.hooks\n"
        "try:\n"
        "    monsession.hooks.KerasCallbacksHook\n"
        "except ImportError as error:\n"
        "    print(error)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        check=True,
        timeout=60,
        capture_output=True,
        text=True,
        env={"MONSESSION_DISABLED_PLUGINS": "keras", "PATH": ""},
    )
    assert "KerasCallbacksHook is provided by the distribution 'monsession-hooks-keras'" in (
        result.stdout
    )
