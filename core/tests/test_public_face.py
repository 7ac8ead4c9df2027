"""The public face: `monsession` for training loops, `monsession.plugins` for hook packages.

Also `TimedHook`, the base that gives timer-scheduled hooks their
`next_action` and their state once.
"""

from __future__ import annotations

import json
import warnings
from typing import TYPE_CHECKING

import pytest
import tensorflow as tf

import monsession
import monsession.plugins
import monsession.testing
from monsession import _attributes

if TYPE_CHECKING:
    from core_plugin_fixtures import PluginSite

pytest_plugins = ["core_plugin_fixtures"]

LOOP_AUTHORS_NAMES = {
    "SessionRunHook", "SessionRunArgs", "SessionRunContext", "SessionRunValues", "NextAction",
    "StatefulHook", "MonitoredSession", "SingularMonitoredSession", "MonitoredTrainingSession",
    "USE_DEFAULT", "Scaffold", "SessionCreator", "ChiefSessionCreator", "WorkerSessionCreator",
    "SecondOrStepTimer", "TimedHook", "StopAtStepHook", "FeedFnHook", "FinalOpsHook",
    "GlobalStepWaiterHook", "hookimpl", "hooks", "plugins", "testing", "tf_logging",
    "EagerSession", "Epochs", "get_or_create_global_step", "get_global_step",
    "create_global_step", "assert_global_step", "global_step", "basic_train_loop",
    "DamagedCheckpointError", "is_chief", "MonsessionDeprecationWarning", "RemovedIn2Warning",
}  # fmt: skip

MOVED = (
    "ORDER_CHECKPOINT_SAVER", "ORDER_OTHER", "ORDER_STEP_COUNTER", "ORDER_SUMMARY_SAVER",
    "DefaultHook", "TrainingSettings", "check_directory", "check_flag", "check_interval",
    "check_schedule", "save_hook_state", "load_hook_state", "attach_hook_state",
    "prune_hook_state", "lock_checkpoint_dir", "DirectoryLockHandle", "DirectoryLockedError",
    "settle", "event_file_writer", "resolve_fetch", "check_scalar", "TensorNotFoundError",
    "lazy_attributes", "read_global_step", "require_global_step", "error_cause",
    "as_run_context", "hook_overrides", "HOOK_METHOD_NAMES",
)  # fmt: skip

# The names of `monsession.plugins` whose modules import TensorFlow.
NEED_TENSORFLOW = {
    "event_file_writer", "resolve_fetch", "check_scalar", "TensorNotFoundError",
    "read_global_step", "require_global_step", "replica_value", "worker_output_dir",
    "fused_target", "Traces", "steps_called",
}  # fmt: skip


def test_the_top_level_holds_what_a_training_loop_uses() -> None:
    assert set(monsession.__all__) == LOOP_AUTHORS_NAMES
    assert len(monsession.__all__) == len(LOOP_AUTHORS_NAMES) == 37
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for name in monsession.__all__:
            assert getattr(monsession, name) is not None
    assert set(monsession.__all__) <= set(dir(monsession))


@pytest.mark.parametrize("name", MOVED)
def test_a_moved_name_lives_in_plugins_and_the_old_spelling_warns(name: str) -> None:
    assert name in monsession.plugins.__all__
    assert name in dir(monsession.plugins)
    assert name not in monsession.__all__
    assert name not in dir(monsession)
    with pytest.warns(monsession.RemovedIn2Warning) as caught:
        old = getattr(monsession, name)
    assert old is getattr(monsession.plugins, name)
    [warning] = caught
    assert str(warning.message) == (
        f"monsession.{name} is deprecated since monsession 0.1.0 and will be removed in "
        f"monsession 2.0: use monsession.plugins.{name} (the API for hook-package authors)."
    )
    assert warning.filename == __file__


def test_from_import_of_a_moved_name_warns_at_the_import() -> None:
    with pytest.warns(
        monsession.RemovedIn2Warning, match=r"monsession\.plugins\.check_flag"
    ) as caught:
        from monsession import check_flag
    assert check_flag is monsession.plugins.check_flag
    assert caught[0].filename == __file__
    check_flag("MyHook", "at_end", True)


def test_moved_names_are_exactly_the_deprecated_ones() -> None:
    registry = {entry.name: entry.alias_of for entry in _attributes.DEPRECATED if entry.alias_of}
    assert registry == {f"monsession.{name}": f"monsession.plugins.{name}" for name in MOVED}


def test_the_deprecation_classes_name_the_removing_release() -> None:
    assert issubclass(monsession.MonsessionDeprecationWarning, DeprecationWarning)
    assert issubclass(monsession.RemovedIn2Warning, monsession.MonsessionDeprecationWarning)
    for entry in _attributes.DEPRECATED:
        assert entry.category.__name__ == f"RemovedIn{entry.removed_in.split('.')[0]}Warning"
        assert f"will be removed in monsession {entry.removed_in}:" in entry.message
        # Removed in a major release, after the series that deprecated it.
        major, minor = (int(part) for part in entry.removed_in.split("."))
        assert minor == 0 and major > int(entry.since.split(".")[0]), entry


def test_our_deprecation_warnings_are_errors_in_our_tests() -> None:
    # The repository's pytest configuration (conftest.py at its root) makes
    # every monsession deprecation an error: a test that means to use a
    # deprecated name says so with `pytest.warns`.
    with pytest.raises(monsession.RemovedIn2Warning, match=r"^monsession\.settle is deprecated"):
        monsession.settle  # noqa: B018


def test_the_plugins_names_are_listed_where_the_api_reference_reads_them() -> None:
    # The site's API reference reads `__all__` and the TYPE_CHECKING imports
    # from the source, without running it: both must name every lazy name.
    assert sorted(monsession.plugins.__all__) == sorted(monsession.plugins._NAMES)


def test_test_helpers_are_in_testing_only() -> None:
    assert callable(monsession.testing.run_signal_phases)
    for module in (monsession, monsession.plugins):
        assert not hasattr(module, "run_signal_phases")
        assert "run_signal_phases" not in dir(module)


def test_importing_plugins_and_its_light_names_does_not_import_tensorflow(
    plugin_site: PluginSite,
) -> None:
    light = sorted(set(monsession.plugins.__all__) - NEED_TENSORFLOW)
    found = plugin_site.run_json(
        f"""
        import json, sys
        import monsession.plugins
        dir(monsession.plugins)
        for name in {light!r}:
            getattr(monsession.plugins, name)
        monsession.plugins.hook_class_entries()
        print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] == "tensorflow")))
        """
    )
    assert found == []


class EveryN(monsession.TimedHook):
    """Records the global step after each run at which its timer triggers."""

    def __init__(self, every_steps: int) -> None:
        super().__init__(every_steps=every_steps)
        self.acted: list[tuple[int, int]] = []  # (global step, silent steps before the run)

    def after_run(self, run_context, run_values):
        step = run_context.global_step_after(self._timer.should_trigger_for_step)
        if step is not None:
            self._timer.update_last_triggered_step(step)
            self.acted.append((step, run_context.silent_steps))


@pytest.fixture
def global_step():
    tf.compat.v1.reset_default_graph()  # Eager mode's global step lives there.
    step = monsession.get_or_create_global_step()
    yield step
    tf.compat.v1.reset_default_graph()


def train(hook: EveryN, global_step, last_step: int, steps_per_execution="auto") -> None:
    step = tf.function(lambda: global_step.assign_add(1))
    hooks = [hook, monsession.StopAtStepHook(last_step=last_step)]
    with monsession.MonitoredSession(hooks=hooks, steps_per_execution=steps_per_execution) as sess:
        while not sess.should_stop():
            sess.run(step)


def test_timed_hook_gives_next_action_for_fused_steps(global_step) -> None:
    hook = EveryN(5)
    assert monsession.plugins.hook_overrides(hook, "next_action")
    train(hook, global_step, 17)
    # Called only at its steps: the steps before each ran fused and silent.
    assert hook.acted == [(1, 0), (6, 4), (11, 4), (16, 4)]
    tf.compat.v1.reset_default_graph()
    single = EveryN(5)
    train(single, monsession.get_or_create_global_step(), 17, steps_per_execution=1)
    assert [step for step, _ in single.acted] == [1, 6, 11, 16]


def test_timed_hook_state_continues_the_schedule_after_a_restart(global_step) -> None:
    first = EveryN(5)
    assert monsession.plugins.hook_overrides(first, "state_dict")
    assert monsession.plugins.hook_overrides(first, "load_state_dict")
    train(first, global_step, 8)
    assert [step for step, _ in first.acted] == [1, 6]
    state = json.loads(json.dumps(first.state_dict()))
    assert list(state) == ["timer"] and state["timer"]["last_triggered_step"] == 6
    restarted = EveryN(5)
    restarted.load_state_dict(state)
    train(restarted, global_step, 17)
    assert [step for step, _ in restarted.acted] == [11, 16]  # A fresh timer: 9, 14.


def test_timed_hook_checks_its_schedule() -> None:
    with pytest.raises(ValueError, match="exactly one of every_steps and every_secs"):
        monsession.TimedHook()
    with pytest.raises(ValueError, match="SecondOrStepTimer state must be a mapping"):
        EveryN(3).load_state_dict({"timer": 7})
