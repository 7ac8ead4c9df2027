"""A plugin built for a newer core is named at discovery with both versions, never ignored.

``future-hooks 3.0`` (core_plugin_fixtures.py) is a real installed
distribution whose plugin implements ``monsession_epoch_hooks``, a hookspec
this core does not declare, beside ``monsession_hook_classes``, which it does.
"""

from __future__ import annotations

import importlib.metadata
import json
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from monsession._plugins import _plugin_manager, _plugin_types

if TYPE_CHECKING:
    from core_plugin_fixtures import PluginSite

pytest_plugins = ["core_plugin_fixtures"]

CORE = _plugin_manager.core_version()
MESSAGE = (
    "Plugin 'future' (future-hooks 3.0) implements the hookspec monsession_epoch_hooks, which "
    f"monsession-core {CORE} does not declare: it was built for a newer core (it requires "
    "monsession-core>=0.1) or misspells a hookspec name, and monsession never calls that "
    "hookimpl. Upgrade monsession-core "
    "(pip install --upgrade monsession-core), or set MONSESSION_DISABLED_PLUGINS=future to "
    "skip the plugin."
)
STRICT = {"MONSESSION_STRICT_PLUGINS": "1"}
LISTING_CODE = """
import json
from monsession import plugins as pm

listing = pm.plugin_infos()
print(json.dumps({
    "plugins": sorted(info.source.name for info in listing.plugins),
    "newer_core": [[n.source.name, n.source.distribution, n.source.version,
                    list(n.unknown_hookspecs), n.core_version, n.core_requirement, n.message]
                   for n in listing.newer_core],
}))
"""


def test_it_is_a_warning_with_both_versions_and_its_known_hooks_still_work(
    newer_core_site: PluginSite,
) -> None:
    result = newer_core_site.run(
        "-c", "from monsession.hooks import AcmeHook, FutureHook; print(FutureHook.__module__)"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "future_impl\n"
    assert result.stderr.count(MESSAGE) == 1, result.stderr


def test_the_listing_names_it(newer_core_site: PluginSite) -> None:
    report = newer_core_site.run_json(LISTING_CODE)
    assert report["plugins"] == ["acme", "core", "future"]
    assert report["newer_core"] == [
        ["future", "future-hooks", "3.0", ["monsession_epoch_hooks"], CORE, ">=0.1", MESSAGE]
    ]


def test_a_plugin_of_this_cores_hookspecs_is_not_named(acme_site: PluginSite) -> None:
    result = acme_site.run("-c", LISTING_CODE)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["newer_core"] == []
    assert "built for a newer core" not in result.stderr


def test_strict_mode_makes_it_an_error(newer_core_site: PluginSite) -> None:
    found = newer_core_site.run_json(
        """
        import json
        from monsession import plugins as pm
        try:
            pm.get_plugin_manager()
        except pm.PluginLoadError as error:
            print(json.dumps([str(error), error.name]))
        """,
        **STRICT,
    )
    assert found == [MESSAGE, "future"]
    result = newer_core_site.run("-c", "import monsession.hooks as h; h.AcmeHook", env=STRICT)
    assert result.returncode != 0
    assert f"PluginLoadError: {MESSAGE}" in result.stderr


def test_monsession_plugins_shows_it(newer_core_site: PluginSite) -> None:
    result = newer_core_site.run("-m", "monsession", "plugins")
    assert result.returncode == 0, result.stderr
    assert MESSAGE in result.stderr
    lines = result.stdout.splitlines()
    assert "future  future-hooks     3.0      future_plugin  FutureHook" in lines
    at = lines.index(
        f"Built for a newer core (1): monsession-core {CORE} does not declare these hookspecs "
        "and never calls them; upgrade monsession-core:"
    )
    assert lines[at + 1] == (
        "  'future' (future-hooks 3.0), entry point future_plugin: monsession_epoch_hooks "
        "(requires monsession-core>=0.1)"
    )
    document = json.loads(newer_core_site.run("-m", "monsession", "plugins", "--json").stdout)
    assert document["newer_core"] == [
        {
            "name": "future",
            "distribution": "future-hooks",
            "version": "3.0",
            "entry_point": "future_plugin",
            "unknown_hookspecs": ["monsession_epoch_hooks"],
            "core_requirement": ">=0.1",
            "message": MESSAGE,
        }
    ]
    strict = newer_core_site.run("-m", "monsession", "plugins", env=STRICT)
    assert strict.returncode == 1
    assert strict.stderr.strip() == f"monsession: error: {MESSAGE}"


@pytest.mark.parametrize(
    ("requires", "expected"),
    [
        (["numpy", "monsession-core>=0.1,<0.2"], ">=0.1,<0.2"),
        (["monsession_core (>=0.3)"], ">=0.3"),
        (['monsession-core>=0.2; python_version >= "3.10"'], ">=0.2"),
        (["monsession-core"], ""),
        (["monsession-core-extras>=1.0", "pluggy"], None),
        ([], None),
    ],
)
def test_core_requirement_reads_the_distributions_range(
    tmp_path: Path, requires: list[str], expected: str | None
) -> None:
    info = tmp_path / "future_hooks-3.0.dist-info"
    info.mkdir()
    lines = "".join(f"Requires-Dist: {requirement}\n" for requirement in requires)
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: future-hooks\nVersion: 3.0\n{lines}", encoding="utf-8"
    )
    dist = importlib.metadata.PathDistribution(info)
    assert _plugin_types.core_requirement(dist) == expected
