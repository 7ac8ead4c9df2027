"""Tests of plugin discovery and the plugin manager's queries."""

from __future__ import annotations

import inspect
import json
import logging
import os
import socket
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pluggy
import pytest

import monsession
from monsession import plugins
from monsession._plugins import _families, _hookspecs, _plugin_manager
from monsession._plugins._hookspecs import (
    ORDER_CHECKPOINT_SAVER,
    ORDER_STEP_COUNTER,
    ORDER_SUMMARY_SAVER,
    DefaultHook,
    TrainingSettings,
)

if TYPE_CHECKING:
    from core_plugin_fixtures import PluginSite

pytest_plugins = ["core_plugin_fixtures"]

Register = Callable[[object, str], object]

# Prints what a subprocess discovered, as JSON.
REPORT_CODE = """
import json
from monsession import plugins as pm

listing = pm.plugin_infos()
print(json.dumps({
    "plugins": {i.source.name: [i.source.distribution, i.source.version, i.source.entry_point,
                                list(i.hook_classes), list(i.training_arguments)]
                for i in listing.plugins},
    "failures": [[f.source.name, f.source.entry_point, f.source.distribution,
                  f.source.version, type(f.error).__name__, f.message]
                 for f in listing.failures],
    "blocked": [[b.name, b.distribution] for b in listing.blocked],
    "autoload": listing.autoload,
}))
"""

BROKEN_MESSAGE = (
    "Plugin 'broken' (broken-hooks 2.3) failed to load: ModuleNotFoundError: No module "
    "named 'acme_missing_dependency'; set MONSESSION_DISABLED_PLUGINS=broken to skip it."
)


def _settings(**overrides: Any) -> TrainingSettings:
    values: dict[str, Any] = dict(
        master="",
        is_chief=True,
        checkpoint_dir=None,
        summary_dir=None,
        scaffold=None,
        save_checkpoint_secs=600,
        save_checkpoint_steps=None,
        save_summaries_steps=100,
        save_summaries_secs=None,
        log_step_count_steps=100,
        save_graph_def=True,
        config=None,
        max_wait_secs=7200,
        eager=True,
    )
    values.update(overrides)
    return TrainingSettings(**values)


class _Hook(monsession.SessionRunHook):
    def __init__(self, label: str) -> None:
        self.label = label

    def __repr__(self) -> str:
        return f"_Hook({self.label!r})"


class _DefaultHooksPlugin:
    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.seen: list[TrainingSettings] = []

    @monsession.hookimpl
    def monsession_default_hooks(self, settings: TrainingSettings) -> Any:
        self.seen.append(settings)
        return self.answer


class _HookClassesPlugin:
    def __init__(self, *refs: Any) -> None:
        self.refs = list(refs)

    @monsession.hookimpl
    def monsession_hook_classes(self) -> list[Any]:
        return self.refs


class _ArgumentsPlugin:
    def __init__(self, *arguments: str) -> None:
        self.arguments = list(arguments)

    @monsession.hookimpl
    def monsession_training_arguments(self) -> list[str]:
        return self.arguments


# --- discovery of real installed distributions, in subprocesses -------------


def test_installed_plugin_is_discovered_and_its_hooks_reachable(acme_site: PluginSite) -> None:
    found = acme_site.run_json(
        """
        import json
        from monsession import plugins as pm
        from monsession.hooks import AcmeHook
        entry = pm.hook_class_entries()["AcmeHook"]
        print(json.dumps([AcmeHook.__module__, AcmeHook.__name__, entry.plugin,
                          entry.distribution, entry.version, pm.training_argument_owners()]))
        """
    )
    assert found == ["acme_impl", "AcmeHook", "acme", "acme-hooks", "1.0",
                     {"save_summaries_steps": "acme"}]  # fmt: skip


def test_listing_does_not_import_lazy_hook_classes(acme_site: PluginSite) -> None:
    report = acme_site.run_json(REPORT_CODE)
    assert report["plugins"]["acme"] == [
        "acme-hooks",
        "1.0",
        "acme_plugin",
        ["AcmeHook"],
        ["save_summaries_steps"],
    ]
    assert acme_site.marker("acme_plugin").exists()
    assert not acme_site.marker("acme_impl").exists()


def test_failing_plugin_is_logged_and_skipped(broken_site: PluginSite) -> None:
    result = broken_site.run(
        "-c", "import monsession.hooks as h; print(h.AcmeHook.__name__); print(dir(h))"
    )
    assert result.returncode == 0, result.stderr
    assert BROKEN_MESSAGE in result.stderr
    assert result.stdout.startswith("AcmeHook\n")
    report = broken_site.run_json(REPORT_CODE)
    assert report["failures"] == [
        ["broken", "broken_plugin", "broken-hooks", "2.3", "ModuleNotFoundError", BROKEN_MESSAGE]
    ]
    assert sorted(report["plugins"]) == ["acme", "core"]


@pytest.mark.parametrize("value", ["1", "true", "yes"])
def test_strict_mode_raises_plugin_load_error(broken_site: PluginSite, value: str) -> None:
    found = broken_site.run_json(
        """
        import json
        from monsession import plugins as pm
        try:
            pm.get_plugin_manager()
        except pm.PluginLoadError as error:
            print(json.dumps([str(error), isinstance(error, ImportError),
                              type(error.__cause__).__name__]))
        """,
        MONSESSION_STRICT_PLUGINS=value,
    )
    assert found == [BROKEN_MESSAGE, True, "ModuleNotFoundError"]
    result = broken_site.run(
        "-c", "import monsession.hooks as h; h.AcmeHook", env={"MONSESSION_STRICT_PLUGINS": value}
    )
    assert result.returncode != 0
    assert "PluginLoadError" in result.stderr and BROKEN_MESSAGE in result.stderr


@pytest.mark.parametrize("value", ["", "0", "false", "FALSE"])
def test_false_values_of_switches_are_off(broken_site: PluginSite, value: str) -> None:
    report = broken_site.run_json(
        REPORT_CODE, MONSESSION_STRICT_PLUGINS=value, MONSESSION_DISABLE_PLUGIN_AUTOLOAD=value
    )
    assert report["autoload"] is True
    assert [failure[0] for failure in report["failures"]] == ["broken"]


def test_registration_hook_bad_answer_is_a_load_failure(plugin_site: PluginSite) -> None:
    plugin_site.install(
        "odd-hooks",
        "0.3",
        {"odd": "odd_plugin"},
        {
            "odd_plugin": """
            import monsession

            @monsession.hookimpl
            def monsession_hook_classes():
                return ["no colon here"]
            """
        },
    )
    report = plugin_site.run_json(REPORT_CODE)
    assert sorted(report["plugins"]) == ["core"]
    [failure] = report["failures"]
    assert failure[:5] == ["odd", "odd_plugin", "odd-hooks", "0.3", "TypeError"]
    assert failure[5] == (
        "Plugin 'odd' (odd-hooks 0.3) failed to load: TypeError: Returned 'no colon here' "
        "from monsession_hook_classes; expected a class or a 'package.module:ClassName' "
        "string; set MONSESSION_DISABLED_PLUGINS=odd to skip it."
    )


def test_disable_autoload_loads_no_entry_point_but_keeps_core(broken_site: PluginSite) -> None:
    report = broken_site.run_json(REPORT_CODE, MONSESSION_DISABLE_PLUGIN_AUTOLOAD="1")
    assert list(report["plugins"]) == ["core"]
    assert "StopAtStepHook" in report["plugins"]["core"][3]
    assert report["failures"] == [] and report["autoload"] is False
    assert not broken_site.marker("acme_plugin").exists()
    assert not broken_site.marker("broken_plugin").exists()


@pytest.mark.parametrize("disabled", ["broken", "broken-hooks", "Broken_Hooks", " x , broken "])
def test_disabled_plugin_is_never_imported(broken_site: PluginSite, disabled: str) -> None:
    report = broken_site.run_json(REPORT_CODE, MONSESSION_DISABLED_PLUGINS=disabled)
    assert report["blocked"] == [["broken", "broken-hooks"]]
    assert report["failures"] == []
    assert sorted(report["plugins"]) == ["acme", "core"]
    assert not broken_site.marker("broken_plugin").exists()


def test_same_entry_point_seen_twice_is_loaded_once(acme_site: PluginSite) -> None:
    # A second distribution declaring the same entry point, and the site twice on sys.path.
    acme_site.install("acme-hooks-legacy", "0.9", {"acme": "acme_plugin"}, {})
    result = acme_site.run("-c", REPORT_CODE, path_entries=2)
    assert result.returncode == 0, result.stderr
    assert "failed to load" not in result.stderr
    report = json.loads(result.stdout)
    assert report["failures"] == []
    assert report["plugins"]["acme"][3] == ["AcmeHook"]


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        (
            {},
            "SummarySaverHook is provided by the distribution 'monsession-hooks-summary', but "
            "plugin 'summary' (monsession-hooks-summary 9.9) failed to load: RuntimeError: "
            "summary is broken; set MONSESSION_DISABLED_PLUGINS=summary to skip it.",
        ),
        (
            {"MONSESSION_DISABLED_PLUGINS": "summary"},
            "whose plugin 'summary' is blocked by MONSESSION_DISABLED_PLUGINS",
        ),
        (
            {"MONSESSION_DISABLE_PLUGIN_AUTOLOAD": "1"},
            "which is installed but not loaded because MONSESSION_DISABLE_PLUGIN_AUTOLOAD is set",
        ),
    ],
)
def test_installed_family_that_did_not_load_says_why(
    plugin_site: PluginSite, env: dict[str, str], expected: str
) -> None:
    plugin_site.install(
        "monsession-hooks-summary",
        "9.9",
        {"summary": "fake_summary"},
        {"fake_summary": "raise RuntimeError('summary is broken')\n"},
    )
    result = plugin_site.run("-c", "from monsession.hooks import SummarySaverHook", env=env)
    assert result.returncode != 0
    assert "ImportError: SummarySaverHook is provided by the distribution" in result.stderr
    assert expected in result.stderr


# --- the manager and its queries, in process ---------------------------------


def test_manager_is_cached_and_reset_rebuilds_it(isolated_plugins: pluggy.PluginManager) -> None:
    assert _plugin_manager.get_plugin_manager() is isolated_plugins
    _families.reset_plugin_manager()
    assert _plugin_manager.get_plugin_manager() is not isolated_plugins


def test_core_is_registered_directly(isolated_plugins: pluggy.PluginManager) -> None:
    assert isinstance(isolated_plugins.get_plugin("core"), _plugin_manager.CorePlugin)
    assert isolated_plugins.project_name == "monsession"
    entries = plugins.hook_class_entries()
    assert {name: entry.ref for name, entry in entries.items() if entry.plugin == "core"} == {
        name: f"monsession._api._control_hooks:{name}"
        for name in ("StopAtStepHook", "FeedFnHook", "FinalOpsHook", "GlobalStepWaiterHook")
    }
    assert entries["StopAtStepHook"].distribution == "monsession-core"


def test_hook_class_entries_keep_lazy_refs_unimported(register_plugin: Register) -> None:
    register_plugin(_HookClassesPlugin(_Hook, "no_such_module_xyz.sub:Outer.LazyHook"), "mine")
    entries = plugins.hook_class_entries()
    assert entries["_Hook"] == plugins.HookClassEntry("_Hook", _Hook, "mine")
    assert entries["_Hook"].load() is _Hook
    lazy = entries["LazyHook"]
    assert (lazy.ref, lazy.plugin, lazy.distribution) == (
        "no_such_module_xyz.sub:Outer.LazyHook",
        "mine",
        None,
    )
    with pytest.raises(ModuleNotFoundError, match="no_such_module_xyz"):
        lazy.load()


def test_lazy_ref_to_a_missing_class_is_an_import_error(register_plugin: Register) -> None:
    register_plugin(_HookClassesPlugin("monsession._plugins._plugin_manager:GoneHook"), "mine")
    entry = plugins.hook_class_entries()["GoneHook"]
    with pytest.raises(ImportError) as raised:
        entry.load()
    assert str(raised.value) == (
        "Hook class reference 'monsession._plugins._plugin_manager:GoneHook' of plugin 'mine' "
        "(unknown distribution) does not resolve: module "
        "'monsession._plugins._plugin_manager' has no attribute 'GoneHook'; "
        "upgrade or reinstall the plugin's distribution."
    )


def test_lazy_ref_to_a_non_class_is_a_type_error(register_plugin: Register) -> None:
    register_plugin(_HookClassesPlugin("monsession._plugins._plugin_manager:logger"), "mine")
    entry = plugins.hook_class_entries()["logger"]
    pattern = r"'monsession\._plugins\._plugin_manager:logger' of plugin 'mine'"
    with pytest.raises(TypeError, match=pattern):
        entry.load()


@pytest.fixture
def strict(isolated_plugins: pluggy.PluginManager, monkeypatch: pytest.MonkeyPatch) -> Register:
    """Registers plugins on a fresh manager built with MONSESSION_STRICT_PLUGINS=1."""
    monkeypatch.setenv(_plugin_manager.ENV_STRICT, "1")
    _families.reset_plugin_manager()
    manager = _plugin_manager.get_plugin_manager()

    def register(plugin: object, name: str) -> object:
        manager.register(plugin, name=name)
        return plugin

    return register


@pytest.mark.parametrize("bad", [42, "missing_colon", "mod:", ":Cls", "a b:C"])
def test_bad_hook_class_item_is_reported_and_the_plugin_left_out(
    register_plugin: Register, caplog: pytest.LogCaptureFixture, bad: Any
) -> None:
    register_plugin(_HookClassesPlugin("good_mod:GoodHook", bad), "sloppy")
    with caplog.at_level(logging.WARNING, logger="monsession"):
        entries = plugins.hook_class_entries()
        listing = plugins.plugin_infos()
    assert "GoodHook" not in entries and "StopAtStepHook" in entries
    assert [info.hook_classes for info in listing.plugins if info.source.name == "sloppy"] == [()]
    [message] = caplog.messages
    assert message.startswith(
        f"Plugin 'sloppy' (unknown distribution) failed in monsession_hook_classes: "
        f"TypeError: Returned {bad!r} from monsession_hook_classes; expected a class"
    )
    assert message.endswith(
        "its contribution is skipped. Set MONSESSION_DISABLED_PLUGINS=sloppy to stop loading it."
    )


def test_bad_hook_class_item_is_fatal_in_strict_mode(strict: Register) -> None:
    strict(_HookClassesPlugin("missing_colon"), "sloppy")
    with pytest.raises(plugins.PluginCallError) as raised:
        plugins.hook_class_entries()
    assert str(raised.value).startswith(
        "Plugin 'sloppy' (unknown distribution) failed in monsession_hook_classes: TypeError:"
    )
    assert isinstance(raised.value.__cause__, TypeError)


def test_hook_class_collisions_core_first_then_plugin_name(
    register_plugin: Register, caplog: pytest.LogCaptureFixture
) -> None:
    register_plugin(_HookClassesPlugin("zeta_mod:Shared", "zeta_mod:StopAtStepHook"), "zeta")
    register_plugin(_HookClassesPlugin("alpha_mod:Shared"), "alpha")
    with caplog.at_level(logging.WARNING, logger="monsession"):
        entries = plugins.hook_class_entries()
        plugins.hook_class_entries()
    assert entries["Shared"].ref == "alpha_mod:Shared"
    assert entries["StopAtStepHook"].plugin == "core"
    assert sorted(caplog.messages) == [
        "Hook class 'Shared' of plugin 'zeta' (unknown distribution) is ignored: plugin "
        "'alpha' already provides it. Set MONSESSION_DISABLED_PLUGINS=zeta to silence this "
        "warning.",
        "Hook class 'StopAtStepHook' of plugin 'zeta' (unknown distribution) is ignored: "
        "plugin 'core' already provides it. Set MONSESSION_DISABLED_PLUGINS=zeta to silence "
        "this warning.",
    ]


def test_training_argument_owners(register_plugin: Register) -> None:
    assert plugins.training_argument_owners() == {}
    register_plugin(_ArgumentsPlugin("save_checkpoint_steps", "save_checkpoint_secs"), "ckpt")
    register_plugin(_ArgumentsPlugin("save_checkpoint_steps"), "other")
    assert plugins.training_argument_owners() == {
        "save_checkpoint_steps": "ckpt",
        "save_checkpoint_secs": "ckpt",
    }


def test_bad_training_argument_is_reported_and_the_plugin_left_out(
    register_plugin: Register, caplog: pytest.LogCaptureFixture
) -> None:
    register_plugin(_ArgumentsPlugin("save_checkpoint_steps", "save checkpoint"), "sloppy")
    with caplog.at_level(logging.WARNING, logger="monsession"):
        assert plugins.training_argument_owners() == {}
    [message] = caplog.messages
    assert message.startswith(
        "Plugin 'sloppy' (unknown distribution) failed in monsession_training_arguments: "
        "TypeError: Returned 'save checkpoint' from monsession_training_arguments"
    )


def test_default_hooks_sorted_by_order_then_plugin(register_plugin: Register) -> None:
    first, second, third, fourth = (_Hook(label) for label in "abcd")
    beta = _DefaultHooksPlugin(
        (DefaultHook(first, ORDER_CHECKPOINT_SAVER), DefaultHook(second, ORDER_STEP_COUNTER))
    )
    register_plugin(beta, "beta")
    register_plugin(_DefaultHooksPlugin(None), "empty")
    register_plugin(
        _DefaultHooksPlugin(
            [
                DefaultHook(third, ORDER_CHECKPOINT_SAVER),
                DefaultHook(fourth, ORDER_CHECKPOINT_SAVER),
            ]
        ),
        "alpha",
    )
    settings = _settings()
    hooks = plugins.default_hooks(settings)
    assert hooks == [second, third, fourth, first]
    assert beta.seen == [settings]


def test_default_hooks_order_constants_follow_tensorflow() -> None:
    assert ORDER_STEP_COUNTER < ORDER_SUMMARY_SAVER < ORDER_CHECKPOINT_SAVER


@pytest.mark.parametrize(
    ("answer", "shown"),
    [
        ([_Hook("bare")], "_Hook('bare')"),
        ([DefaultHook(_Hook("x"), order="late")], "order='late'"),  # type: ignore[arg-type]
        (
            [DefaultHook(_Hook("x"), arguments="save_checkpoint_steps")],  # type: ignore[arg-type]
            "arguments='save_checkpoint_steps'",
        ),
        (_Hook("single"), "_Hook('single')"),
    ],
)
def test_default_hooks_bad_answer_is_reported_and_left_out(
    register_plugin: Register, caplog: pytest.LogCaptureFixture, answer: Any, shown: str
) -> None:
    kept = _Hook("kept")
    register_plugin(_DefaultHooksPlugin([DefaultHook(kept)]), "fine")
    register_plugin(_DefaultHooksPlugin(answer), "careless")
    with caplog.at_level(logging.WARNING, logger="monsession"):
        assert plugins.default_hooks(_settings()) == [kept]
    [message] = caplog.messages
    assert message.startswith(
        "Plugin 'careless' (unknown distribution) failed in monsession_default_hooks: TypeError: "
    )
    assert shown in message


def test_default_hooks_bad_answer_is_fatal_in_strict_mode(strict: Register) -> None:
    strict(_DefaultHooksPlugin([DefaultHook(_Hook("kept"))]), "fine")
    strict(_DefaultHooksPlugin([_Hook("bare")]), "careless")
    with pytest.raises(plugins.PluginCallError, match=r"^Plugin 'careless' .* TypeError"):
        plugins.default_hooks(_settings())


class _RaisingPlugin:
    @monsession.hookimpl
    def monsession_default_hooks(self, settings: TrainingSettings) -> Any:
        raise RuntimeError(f"cannot build hooks for {settings.checkpoint_dir}")


def test_default_hooks_plugin_that_raises_is_reported_and_left_out(
    register_plugin: Register, caplog: pytest.LogCaptureFixture
) -> None:
    kept = _Hook("kept")
    register_plugin(_DefaultHooksPlugin([DefaultHook(kept)]), "fine")
    register_plugin(_RaisingPlugin(), "raiser")
    register_plugin(_DefaultHooksPlugin([]), "late")  # Called first (pluggy is LIFO).
    with caplog.at_level(logging.WARNING, logger="monsession"):
        assert plugins.default_hooks(_settings(checkpoint_dir="/ckpt")) == [kept]
    assert caplog.messages == [
        "Plugin 'raiser' (unknown distribution) failed in monsession_default_hooks: "
        "RuntimeError: cannot build hooks for /ckpt; its contribution is skipped. "
        "Set MONSESSION_DISABLED_PLUGINS=raiser to stop loading it."
    ]


class _PickyPlugin:
    @monsession.hookimpl
    def monsession_default_hooks(self, settings: TrainingSettings) -> Any:
        raise ValueError(
            f"save_summaries_steps must be positive, got {settings.save_summaries_steps}"
        )


def test_default_hooks_value_error_is_the_users_and_reaches_them(register_plugin: Register) -> None:
    register_plugin(_DefaultHooksPlugin([]), "fine")
    register_plugin(_PickyPlugin(), "picky")
    with pytest.raises(ValueError, match="save_summaries_steps must be positive, got -3"):
        plugins.default_hooks(_settings(save_summaries_steps=-3))


class _LockingPlugin:
    def __init__(self, directory: str) -> None:
        self.directory = directory

    @monsession.hookimpl
    def monsession_default_hooks(self, settings: TrainingSettings) -> Any:
        monsession.plugins.lock_checkpoint_dir(self.directory)
        return []


def test_default_hooks_directory_locked_error_reaches_the_user(
    register_plugin: Register, tmp_path: Any
) -> None:
    """Another session holds the directory: never a plugin failure that is skipped."""
    (tmp_path / ".monsession.lock").write_text(
        json.dumps({"pid": os.getppid(), "host": socket.gethostname()})
    )
    register_plugin(_LockingPlugin(str(tmp_path)), "locking")
    with pytest.raises(monsession.plugins.DirectoryLockedError, match=f"process {os.getppid()}"):
        plugins.default_hooks(_settings())


def test_default_hooks_plugin_that_raises_is_fatal_in_strict_mode(strict: Register) -> None:
    strict(_RaisingPlugin(), "raiser")
    with pytest.raises(plugins.PluginCallError, match=r"^Plugin 'raiser' ") as raised:
        plugins.default_hooks(_settings())
    assert isinstance(raised.value.__cause__, RuntimeError)


class _FirstPlugin:
    def __init__(self, hook: Any) -> None:
        self.hook = hook

    @monsession.hookimpl(tryfirst=True)
    def monsession_default_hooks(self, settings: TrainingSettings) -> Any:
        return [DefaultHook(self.hook, ORDER_CHECKPOINT_SAVER)]


class _WrapperPlugin:
    def __init__(self, extra: Any) -> None:
        self.extra = extra
        self.wrapped: list[Any] = []

    @monsession.hookimpl(wrapper=True)
    def monsession_default_hooks(self, settings: TrainingSettings) -> Any:
        answers = yield
        self.wrapped.append(answers)
        return [*answers, [DefaultHook(self.extra, ORDER_STEP_COUNTER)]]


def test_pluggy_calls_plugins_with_tryfirst_and_wrappers(register_plugin: Register) -> None:
    first, plain, extra = _Hook("first"), _Hook("plain"), _Hook("extra")
    register_plugin(_FirstPlugin(first), "first")  # Registered first, yet called first.
    register_plugin(_DefaultHooksPlugin([DefaultHook(plain, ORDER_CHECKPOINT_SAVER)]), "plain")
    wrapper = register_plugin(_WrapperPlugin(extra), "wrapper")
    assert plugins.default_hooks(_settings()) == [extra, first, plain]
    assert wrapper.wrapped == [  # type: ignore[attr-defined]
        [[DefaultHook(first, ORDER_CHECKPOINT_SAVER)], [DefaultHook(plain, ORDER_CHECKPOINT_SAVER)]]
    ]


def test_plugin_infos_lists_registered_plugins(register_plugin: Register) -> None:
    register_plugin(_HookClassesPlugin("b_mod:BHook", "b_mod:AHook"), "bee")
    register_plugin(_ArgumentsPlugin("log_step_count_steps"), "arg")
    listing = plugins.plugin_infos()
    assert [info.source.name for info in listing.plugins] == ["core", "arg", "bee"]
    bee = listing.plugins[2]
    assert bee == plugins.PluginInfo(plugins.PluginSource("bee"), ("AHook", "BHook"), ())
    assert listing.plugins[1].training_arguments == ("log_step_count_steps",)
    assert (listing.failures, listing.blocked, listing.autoload) == ((), (), False)


@pytest.mark.parametrize(
    ("value", "expected"),
    [("", False), ("0", False), ("false", False), (" False ", False), ("1", True), ("on", True)],
)
def test_env_flag(monkeypatch: pytest.MonkeyPatch, value: str, expected: bool) -> None:
    monkeypatch.setenv("MONSESSION_TEST_FLAG", value)
    assert _plugin_manager.env_flag("MONSESSION_TEST_FLAG") is expected


def test_known_families_name_our_distributions() -> None:
    families = {
        **plugins.KNOWN_HOOK_FAMILIES,
        **plugins.KNOWN_ARGUMENT_FAMILIES,
    }.values()
    assert set(families) == {
        f"monsession-hooks-{name}"
        for name in ("checkpoint", "summary", "logging", "debug", "keras", "mlflow")
    }


# --- every hookspec is documented and tested ---------------------------------


def _hookspec_names() -> list[str]:
    return [
        name
        for name, function in vars(_hookspecs).items()
        if inspect.isfunction(function) and hasattr(function, "monsession_spec")
    ]


def test_hookspecs_are_found() -> None:
    assert "monsession_default_hooks" in _hookspec_names()
    assert all(name.startswith("monsession_") for name in _hookspec_names())


@pytest.mark.parametrize("name", _hookspec_names())
def test_every_hookspec_is_documented_with_an_example(name: str) -> None:
    doc = inspect.getdoc(getattr(_hookspecs, name)) or ""
    assert "Example::" in doc, f"hookspec {name} needs an 'Example::' section in its docstring"
    assert f"def {name}(" in doc, f"the example of hookspec {name} should implement it"


@pytest.mark.parametrize("name", _hookspec_names())
def test_every_hookspec_is_exercised_by_a_test(name: str) -> None:
    tests_dir = Path(__file__).parent
    implemented = any(
        f"def {name}(" in path.read_text(encoding="utf-8") for path in tests_dir.glob("*.py")
    )
    assert implemented, f"no test in {tests_dir} implements hookspec {name} (def {name}(...))"
