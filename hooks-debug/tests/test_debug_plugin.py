"""The debug family as a monsession plugin."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys

import pytest
from debug_testing import first_bad_step, make_program, mode_context, run_until_stopped

import monsession
import monsession.hooks
from monsession import plugins
from monsession_hooks_debug import (
    HookTimingHook,
    NanLossDuringTrainingError,
    NanTensorHook,
    ProfilerHook,
)

CLASSES = {
    "NanTensorHook": NanTensorHook,
    "NanLossDuringTrainingError": NanLossDuringTrainingError,
    "ProfilerHook": ProfilerHook,
    "HookTimingHook": HookTimingHook,
}


def test_entry_point_is_installed():
    [entry_point] = importlib.metadata.entry_points(group="monsession", name="debug")
    assert entry_point.value == "monsession_hooks_debug._plugin"
    assert entry_point.dist.name == "monsession-hooks-debug"


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_monsession_hooks_resolves_our_classes(name):
    assert getattr(monsession.hooks, name) is CLASSES[name]
    entry = plugins.hook_class_entries()[name]
    assert entry.plugin == "debug"
    assert entry.distribution == "monsession-hooks-debug"


def test_plugin_only_registers_classes():
    manager = plugins.get_plugin_manager()
    plugin = manager.get_plugin("debug")
    assert sorted(caller.name for caller in manager.get_hookcallers(plugin)) == [
        "monsession_hook_classes",
        "monsession_other_classes",
    ]


def test_listing_does_not_import_tensorflow():
    code = (
        "import sys, monsession_hooks_debug._plugin as p\n"
        "refs = p.monsession_hook_classes() + p.monsession_other_classes()\n"
        "assert not any('Error' in r for r in p.monsession_hook_classes())\n"
        "import monsession_hooks_debug as d\n"
        "d.HookTimingHook\n"
        "assert 'tensorflow' not in sys.modules, 'tensorflow was imported'\n"
        "print(sorted(r.split(':')[1] for r in refs))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip() == str(sorted(CLASSES))


@pytest.mark.parametrize("mode", ["graph", "eager"])
def test_monitored_training_session_runs_our_hooks(mode):
    # The family adds no default hook (test_plugin_only_registers_classes);
    # hooks passed by the user run inside MonitoredTrainingSession.
    with mode_context(mode):
        program = make_program(mode)
        hook = NanTensorHook(program.loss)
        timed = HookTimingHook.wrap([hook])
        with pytest.raises(NanLossDuringTrainingError) as info:
            with monsession.MonitoredTrainingSession(
                checkpoint_dir=None, hooks=timed, log_step_count_steps=None
            ) as sess:
                run_until_stopped(sess, program.step)
    assert info.value.step == first_bad_step("nan")
    assert timed[-1].timings()["NanTensorHook"]["after_run"].calls == first_bad_step("nan")
