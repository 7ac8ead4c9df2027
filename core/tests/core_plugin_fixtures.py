"""Fixtures for plugin tests: an isolated plugin manager and real installed distributions.

Test modules use them with ``pytest_plugins = ["core_plugin_fixtures"]``.
"""

from __future__ import annotations

import functools
import importlib.metadata
import json
import os
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pluggy
import pytest

from monsession._plugins import _families, _plugin_manager

_PLUGIN_ENV = (
    _plugin_manager.ENV_DISABLE_AUTOLOAD,
    _plugin_manager.ENV_DISABLED_PLUGINS,
    _plugin_manager.ENV_STRICT,
)


@pytest.fixture
def isolated_plugins(monkeypatch: pytest.MonkeyPatch) -> Iterator[pluggy.PluginManager]:
    """A fresh plugin manager holding only core's plugin (autoload off, strict off)."""
    for name in _PLUGIN_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(_plugin_manager.ENV_DISABLE_AUTOLOAD, "1")
    _families.reset_plugin_manager()
    yield _plugin_manager.get_plugin_manager()
    monkeypatch.undo()
    _families.reset_plugin_manager()


@pytest.fixture
def register_plugin(
    isolated_plugins: pluggy.PluginManager,
) -> Iterator[Callable[[object, str], object]]:
    """Registers plugin objects by name on the isolated manager; unregisters them after."""
    names: list[str] = []

    def register(plugin: object, name: str) -> object:
        isolated_plugins.register(plugin, name=name)
        names.append(name)
        return plugin

    yield register
    for name in names:
        if isolated_plugins.has_plugin(name):
            isolated_plugins.unregister(name=name)


class PluginSite:
    """A directory of real installed distributions, and a Python that sees them.

    Args:
      path: The directory, put on ``PYTHONPATH`` of `run`'s subprocesses.
    """

    # Every module installed starts with this line, to prove whether it was imported.
    IMPORT_MARKER = "import pathlib; pathlib.Path(__file__).with_suffix('.imported').touch()\n"

    def __init__(self, path: Path) -> None:
        self.path = path
        path.mkdir()

    def install(
        self,
        name: str,
        version: str,
        entry_points: dict[str, str],
        modules: dict[str, str],
        requires: tuple[str, ...] = (),
    ) -> None:
        """Writes a ``.dist-info`` with `entry_points` (group ``monsession``), `modules`
        and `requires` (its ``Requires-Dist`` lines)."""
        info = self.path / f"{name.replace('-', '_')}-{version}.dist-info"
        info.mkdir()
        requirements = "".join(f"Requires-Dist: {requirement}\n" for requirement in requires)
        (info / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n{requirements}",
            encoding="utf-8",
        )
        lines = "".join(f"{key} = {value}\n" for key, value in entry_points.items())
        (info / "entry_points.txt").write_text(f"[monsession]\n{lines}", encoding="utf-8")
        for module, source in modules.items():
            (self.path / f"{module}.py").write_text(
                self.IMPORT_MARKER + textwrap.dedent(source), encoding="utf-8"
            )

    def marker(self, module: str) -> Path:
        """The file that `module` touches when it is imported."""
        return self.path / f"{module}.imported"

    def run(
        self, *args: str, env: dict[str, str] | None = None, path_entries: int = 1
    ) -> subprocess.CompletedProcess[str]:
        """Runs ``python -S *args`` seeing only this site, core and pluggy.

        `-S` hides site-packages, so hook families installed in the test
        environment (the ``all`` tox env has every one) stay out of the way.
        No plugin switch is set.

        Args:
          *args: The interpreter's arguments, e.g. ``"-c", code``.
          env: Extra environment variables.
          path_entries: How many times to put the site on ``PYTHONPATH``.
        """
        full_env = {key: value for key, value in os.environ.items() if key not in _PLUGIN_ENV}
        full_env.update(env or {})
        python_path = [str(self.path)] * path_entries + [str(_core_only_path())]
        full_env["PYTHONPATH"] = os.pathsep.join(python_path)
        return subprocess.run(
            [sys.executable, "-S", *args],
            env=full_env,
            cwd=self.path.parent,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    def run_json(self, code: str, **env: str) -> Any:
        """Runs `code`, which must succeed and print one JSON document; returns it."""
        result = self.run("-c", textwrap.dedent(code), env=env)
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)


@functools.cache
def _core_only_path() -> Path:
    """A directory linking only core (package and metadata) and pluggy."""
    import monsession

    path = Path(tempfile.mkdtemp(prefix="monsession-core-only-"))
    core = importlib.metadata.distribution("monsession-core")
    links = {
        "monsession": Path(monsession.__file__).parent,
        "pluggy": Path(pluggy.__file__).parent,
        Path(str(core._path)).name: Path(str(core._path)),  # type: ignore[attr-defined]
    }
    for name, target in links.items():
        (path / name).symlink_to(target)
    return path


ACME_MODULES = {
    "acme_plugin": """
    import monsession

    @monsession.hookimpl
    def monsession_hook_classes():
        return ["acme_impl:AcmeHook"]

    @monsession.hookimpl
    def monsession_training_arguments():
        return ["save_summaries_steps"]
    """,
    "acme_impl": """
    import monsession

    class AcmeHook(monsession.SessionRunHook):
        pass
    """,
}


@pytest.fixture
def plugin_site(tmp_path: Path) -> PluginSite:
    """An empty `PluginSite`."""
    return PluginSite(tmp_path / "site")


@pytest.fixture
def acme_site(plugin_site: PluginSite) -> PluginSite:
    """A site with ``acme-hooks 1.0`` (plugin ``acme``, lazy hook class ``AcmeHook``)."""
    plugin_site.install("acme-hooks", "1.0", {"acme": "acme_plugin"}, ACME_MODULES)
    return plugin_site


FUTURE_MODULES = {
    "future_plugin": """
    import monsession

    @monsession.hookimpl
    def monsession_hook_classes():
        return ["future_impl:FutureHook"]

    @monsession.hookimpl
    def monsession_epoch_hooks(settings):
        raise AssertionError("this core has no such hookspec: never called")
    """,
    "future_impl": """
    import monsession

    class FutureHook(monsession.SessionRunHook):
        pass
    """,
}


@pytest.fixture
def newer_core_site(acme_site: PluginSite) -> PluginSite:
    """`acme_site` plus ``future-hooks 3.0`` (plugin ``future``, requiring
    ``monsession-core>=0.1``), which implements the hookspec
    ``monsession_epoch_hooks`` that this core does not declare."""
    acme_site.install(
        "future-hooks",
        "3.0",
        {"future": "future_plugin"},
        FUTURE_MODULES,
        requires=("monsession-core>=0.1", "numpy"),
    )
    return acme_site


@pytest.fixture
def broken_site(acme_site: PluginSite) -> PluginSite:
    """`acme_site` plus ``broken-hooks 2.3`` whose plugin module fails to import."""
    acme_site.install(
        "broken-hooks",
        "2.3",
        {"broken": "broken_plugin"},
        {"broken_plugin": "import acme_missing_dependency\n"},
    )
    return acme_site
