"""Tests of `monsession.hooks`, the one place every hook class is reached by name."""

from __future__ import annotations

import importlib.metadata
import textwrap
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

import monsession
import monsession.hooks
from monsession import plugins
from monsession._plugins import _families

if TYPE_CHECKING:
    from core_plugin_fixtures import PluginSite

pytest_plugins = ["core_plugin_fixtures"]

Register = Callable[[object, str], object]


class WidgetHook(monsession.SessionRunHook):
    """A hook class a test plugin provides."""


class _WidgetPlugin:
    def __init__(self, *refs: Any) -> None:
        self.refs = list(refs)

    @monsession.hookimpl
    def monsession_hook_classes(self) -> list[Any]:
        return self.refs


def _installed(distribution: str) -> bool:
    try:
        importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def test_registered_class_is_reachable_and_cached(register_plugin: Register) -> None:
    register_plugin(_WidgetPlugin(WidgetHook), "widgets")
    assert "WidgetHook" not in vars(monsession.hooks)
    assert monsession.hooks.WidgetHook is WidgetHook
    assert vars(monsession.hooks)["WidgetHook"] is WidgetHook
    _families.reset_plugin_manager()
    assert "WidgetHook" not in vars(monsession.hooks)


def test_from_import_of_a_lazy_reference(register_plugin: Register) -> None:
    register_plugin(_WidgetPlugin(f"{__name__}:WidgetHook"), "widgets")
    from monsession.hooks import WidgetHook as ImportedHook

    assert ImportedHook is WidgetHook


def test_dir_lists_available_hook_classes(register_plugin: Register) -> None:
    register_plugin(_WidgetPlugin("widget_mod:LazyWidgetHook"), "widgets")
    names = dir(monsession.hooks)
    for name in ("StopAtStepHook", "FeedFnHook", "FinalOpsHook", "GlobalStepWaiterHook"):
        assert name in names
    assert "LazyWidgetHook" in names
    assert names == sorted(names)


@pytest.mark.parametrize("name", sorted(plugins.KNOWN_HOOK_FAMILIES))
def test_missing_family_gives_install_hint(isolated_plugins: object, name: str) -> None:
    distribution = plugins.KNOWN_HOOK_FAMILIES[name]
    with pytest.raises(ImportError) as raised:
        getattr(monsession.hooks, name)
    message = str(raised.value)
    if _installed(distribution):  # Installed, but the fixture turns autoloading off.
        assert f"'{distribution}', which is installed but not loaded" in message
        assert "MONSESSION_DISABLE_PLUGIN_AUTOLOAD" in message
    else:
        folder = distribution.removeprefix("monsession-")
        assert message == (
            f"{name} is provided by the distribution '{distribution}', which is not "
            f"installed. Install it with: pip install {distribution} (or, from a checkout "
            f"of the monsession repository: pip install ./{folder})"
        )
    assert raised.value.name == name


def test_from_import_of_missing_family_keeps_the_hint(plugin_site: PluginSite) -> None:
    """In a Python that sees core alone, the import names the distribution to install."""
    code = """
    try:
        from monsession.hooks import SummarySaverHook
    except ImportError as error:
        print(error)
    """
    result = plugin_site.run("-c", textwrap.dedent(code))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().endswith(
        "pip install monsession-hooks-summary (or, from a checkout of the monsession "
        "repository: pip install ./hooks-summary)"
    )


def test_from_import_of_hooks_callback_says_where_it_lives(plugin_site: PluginSite) -> None:
    """`HooksCallback` is a Keras callback, not a hook: the error gives its import and package."""
    code = """
    try:
        from monsession.hooks import HooksCallback
    except ImportError as error:
        print(error)
    """
    result = plugin_site.run("-c", textwrap.dedent(code))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == (
        "monsession.hooks has no HooksCallback: it is a Keras callback (it runs monsession "
        "hooks inside model.fit), not a hook: `from monsession_hooks_keras import "
        "HooksCallback` (pip install monsession-hooks-keras)."
    )


def test_install_commands_give_the_index_and_the_checkout_forms() -> None:
    assert _families.install_commands("monsession-hooks-debug") == (
        "pip install monsession-hooks-debug (or, from a checkout of the monsession "
        "repository: pip install ./hooks-debug)"
    )
    assert _families.install_commands("monsession-hooks-debug", upgrade=True) == (
        "pip install --upgrade monsession-hooks-debug (or, from an up-to-date checkout of "
        "the monsession repository: pip install ./hooks-debug)"
    )
    # A third party's distribution is not in this repository: the index form only.
    assert _families.install_commands("acme-hooks") == "pip install acme-hooks"


def test_installed_family_that_lacks_the_class_says_upgrade(acme_site: PluginSite) -> None:
    code = """
    from monsession._plugins import _families
    print(_families.missing_family_message("FutureHook", "acme-hooks"))
    """
    result = acme_site.run("-c", textwrap.dedent(code))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == (
        "FutureHook is provided by the distribution 'acme-hooks', which is installed but "
        "does not provide it; upgrade it with: pip install --upgrade acme-hooks"
    )


class _TensorFlowNamed:
    """Classes named like the ones `tf.compat.v1.train` gets from hook families."""

    class SummarySaverHook(monsession.SessionRunHook):
        pass


@pytest.mark.parametrize("name", monsession._TF_FAMILY_NAMES)
def test_tensorflow_names_at_top_level_give_the_same_install_hint(
    isolated_plugins: object, name: str
) -> None:
    assert name in dir(monsession)
    with pytest.raises(ImportError) as from_hooks:
        getattr(monsession.hooks, name)
    with pytest.raises(ImportError) as from_top:
        getattr(monsession, name)
    assert str(from_top.value) == str(from_hooks.value)
    assert plugins.KNOWN_HOOK_FAMILIES[name] in str(from_top.value)
    assert from_top.value.name == name
    assert name not in vars(monsession)


def test_from_monsession_import_of_a_missing_family_gives_the_hint(
    isolated_plugins: object,
) -> None:
    with pytest.raises(ImportError, match="'monsession-hooks-debug'"):
        from monsession import NanTensorHook  # noqa: F401


def test_tensorflow_names_at_top_level_resolve_through_the_plugin_manager(
    register_plugin: Register,
) -> None:
    register_plugin(_WidgetPlugin(f"{__name__}:_TensorFlowNamed.SummarySaverHook"), "s")
    assert monsession.SummarySaverHook is _TensorFlowNamed.SummarySaverHook
    from monsession import SummarySaverHook

    assert SummarySaverHook is monsession.hooks.SummarySaverHook
    _families.reset_plugin_manager()  # The plugin is gone: so is the name.
    with pytest.raises(ImportError, match="monsession-hooks-summary"):
        monsession.SummarySaverHook  # noqa: B018


def test_other_names_of_hook_families_stay_in_monsession_hooks(
    register_plugin: Register,
) -> None:
    register_plugin(_WidgetPlugin(WidgetHook), "widgets")
    assert monsession.hooks.WidgetHook is WidgetHook
    assert "WidgetHook" not in dir(monsession)
    with pytest.raises(AttributeError, match="has no attribute 'WidgetHook'"):
        monsession.WidgetHook  # noqa: B018


def test_installed_family_wins_over_the_hint(register_plugin: Register) -> None:
    register_plugin(_WidgetPlugin(f"{__name__}:WidgetHook", "summary_mod:SummarySaverHook"), "s")
    entry = plugins.hook_class_entries()["SummarySaverHook"]
    assert entry.plugin == "s"
    with pytest.raises(ModuleNotFoundError, match="summary_mod"):
        monsession.hooks.SummarySaverHook  # noqa: B018


def test_unknown_name_lists_available_names(register_plugin: Register) -> None:
    register_plugin(_WidgetPlugin(WidgetHook), "widgets")
    with pytest.raises(AttributeError) as raised:
        monsession.hooks.WidgetHok  # noqa: B018
    assert isinstance(raised.value, plugins.UnknownHookError)
    assert str(raised.value) == (
        "No installed hook family provides a hook class named 'WidgetHok'. Available: "
        "FeedFnHook, FinalOpsHook, GlobalStepWaiterHook, StopAtStepHook, WidgetHook. "
        "Run 'monsession plugins' to see the installed families."
    )
    assert not hasattr(monsession.hooks, "WidgetHok")
    with pytest.raises(ImportError, match="WidgetHok"):
        from monsession.hooks import WidgetHok  # noqa: F401


def test_private_names_are_plain_attribute_errors(isolated_plugins: object) -> None:
    with pytest.raises(AttributeError, match="has no attribute '__wrapped__'") as raised:
        monsession.hooks.__wrapped__  # noqa: B018
    assert not isinstance(raised.value, plugins.UnknownHookError)


def test_plugin_hook_class_resolves_in_a_fresh_process(acme_site: PluginSite) -> None:
    found = acme_site.run_json(
        """
        import json, sys
        import monsession.hooks
        names = dir(monsession.hooks)
        hook = monsession.hooks.AcmeHook
        print(json.dumps([hook.__module__, "AcmeHook" in names, "tensorflow" in sys.modules]))
        """
    )
    assert found == ["acme_impl", True, False]


def test_importing_monsession_and_hooks_does_not_import_tensorflow(
    plugin_site: PluginSite,
) -> None:
    found = plugin_site.run_json(
        """
        import json, sys
        import monsession
        import monsession.hooks
        from monsession import plugins
        dir(monsession)
        dir(monsession.hooks)
        plugins.plugin_infos()
        try:
            monsession.hooks.NoSuchHook
        except AttributeError:
            pass
        try:
            monsession.SummarySaverHook
        except ImportError:
            pass
        print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] == "tensorflow")))
        """
    )
    assert found == []


def test_import_and_dir_of_monsession_load_no_plugin(acme_site: PluginSite) -> None:
    found = acme_site.run_json(
        """
        import json, sys
        import monsession
        listed = "SummarySaverHook" in dir(monsession)
        print(json.dumps([listed, "monsession._plugins._plugin_manager" in sys.modules]))
        """
    )
    assert found == [True, False]
    assert not acme_site.marker("acme_plugin").exists()
