"""A plugin built for an older core is named at discovery with its range and the fix.

``old-hooks 0.1.0`` is a real installed distribution (a ``.dist-info``)
requiring ``monsession-core>=0.1,<0.2``, as the 0.1 package template wrote
it; pip would refuse it beside this core, ``--no-deps`` does not.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

from monsession._plugins import _plugin_manager, _plugin_types

if TYPE_CHECKING:
    from core_plugin_fixtures import PluginSite

pytest_plugins = ["core_plugin_fixtures"]

CORE = _plugin_manager.core_version() or ""
SERIES = _plugin_types.core_range(CORE)
MESSAGE = (
    "Plugin 'old' (old-hooks 0.1.0) requires monsession-core>=0.1,<0.2, which excludes the "
    f"installed monsession-core {CORE}: it was built for an older core. It is loaded and may "
    f"work; to support this core, widen its requirement to monsession-core{SERIES} and "
    "release it again (or make the package again with `monsession new-package`), or install a "
    "monsession-core in its range. Set MONSESSION_DISABLED_PLUGINS=old to skip the plugin."
)
OLD_MODULES = {
    "old_plugin": """
    import monsession

    @monsession.hookimpl
    def monsession_hook_classes():
        return ["old_impl:OldHook"]
    """,
    "old_impl": """
    import monsession

    class OldHook(monsession.SessionRunHook):
        pass
    """,
}


@pytest.fixture
def older_core_site(acme_site: PluginSite) -> PluginSite:
    """`acme_site` plus ``old-hooks 0.1.0`` (plugin ``old``), built for core 0.1."""
    acme_site.install(
        "old-hooks", "0.1.0", {"old": "old_plugin"}, OLD_MODULES, ("monsession-core>=0.1,<0.2",)
    )
    return acme_site


def test_it_is_a_warning_naming_the_range_and_the_fix_and_it_still_loads(
    older_core_site: PluginSite,
) -> None:
    result = older_core_site.run("-c", "from monsession.hooks import OldHook; print(OldHook)")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "<class 'old_impl.OldHook'>\n"
    assert result.stderr.count(MESSAGE) == 1, result.stderr


def test_strict_mode_makes_it_an_error(older_core_site: PluginSite) -> None:
    strict = {"MONSESSION_STRICT_PLUGINS": "1"}
    result = older_core_site.run("-c", "import monsession.hooks as h; h.AcmeHook", env=strict)
    assert result.returncode != 0
    assert f"PluginLoadError: {MESSAGE}" in result.stderr
    listing = older_core_site.run("-m", "monsession", "plugins", env=strict)
    assert listing.returncode == 1
    assert listing.stderr.strip() == f"monsession: error: {MESSAGE}"


def test_monsession_plugins_lists_it(older_core_site: PluginSite) -> None:
    result = older_core_site.run("-m", "monsession", "plugins")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "old     old-hooks        0.1.0    old_plugin   OldHook" in lines
    at = lines.index(
        f"Built for an older core (1): their monsession-core range excludes monsession-core "
        f"{CORE}; they are loaded and may work until their authors widen the range:"
    )
    assert lines[at + 1] == (
        "  'old' (old-hooks 0.1.0), entry point old_plugin (requires monsession-core>=0.1,<0.2)"
    )
    document = json.loads(older_core_site.run("-m", "monsession", "plugins", "--json").stdout)
    assert document["older_core"] == [
        {
            "name": "old",
            "distribution": "old-hooks",
            "version": "0.1.0",
            "entry_point": "old_plugin",
            "core_requirement": ">=0.1,<0.2",
            "message": MESSAGE,
        }
    ]


def test_a_plugin_of_this_cores_series_is_not_named(acme_site: PluginSite) -> None:
    acme_site.install("new-hooks", "1.0", {"new": "old_plugin"}, {}, (f"monsession-core{SERIES}",))
    result = acme_site.run("-m", "monsession", "plugins", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["older_core"] == []
    assert "older core" not in result.stderr


@pytest.mark.parametrize(
    ("requirement", "core", "expected"),
    [
        (">=0.1,<0.2", "1.0.0", True),
        ("<1.0", "1.0.0", True),
        ("<=0.9", "1.0.0", True),
        ("==0.1.*", "1.0.0", True),
        ("~=0.1", "1.0.0", True),
        ("==0.1.0", "1.0.0", True),
        (">=1.0,<2", "1.0.0", False),
        (">=1.0,<2", "1.9.3rc1", False),
        ("==1.0.*", "1.0.5", False),
        ("~=1.0", "1.4.0", False),
        (">=2.0", "1.0.0", False),  # Built for a newer core: not this check.
        ("~=2.0", "1.0.0", False),
        (">=0.1", "1.0.0", False),
        ("", "1.0.0", False),
        (">=0.1,<0.2", None, False),
    ],
)
def test_ends_below(requirement: str, core: str | None, expected: bool) -> None:
    assert _plugin_types.ends_below(requirement, core) is expected
