"""`monsession new-package NAME`: names, files, refusals, and no TensorFlow.

That the created package's own tests pass once it is installed, and that
`monsession plugins` then lists it, is tested end to end in the `packaging`
env (tools/tests/test_new_package.py).
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

import monsession.__main__ as cli
from monsession.__main__ import NewPackageError, package_names
from monsession._plugins import _plugin_manager
from monsession._plugins._plugin_types import core_range

FILES = {
    "README.md",
    "pyproject.toml",
    "tox.ini",
    "src/monsession_hooks_my_metric/__init__.py",
    "src/monsession_hooks_my_metric/_hook.py",
    "src/monsession_hooks_my_metric/_plugin.py",
    "tests/test_my_metric_hook.py",
    "tests/test_my_metric_plugin.py",
}


def new_package(*argv: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    status = cli.main(["new-package", *argv])
    out, err = capsys.readouterr()
    return status, out, err


def test_names_of_a_package() -> None:
    names = package_names("monsession-hooks-my-metric", "0.1.0")
    assert names == cli.PackageNames(
        distribution="monsession-hooks-my-metric",
        import_name="monsession_hooks_my_metric",
        module_name="my_metric",
        plugin_name="my-metric",
        hook_class="MyMetricHook",
        core_range=">=0.1,<0.2",
    )


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        ("0.1.0", ">=0.1,<0.2"),
        ("1.0.0", ">=1.0,<2"),
        ("1.12", ">=1.12,<2"),
        ("2.0.0rc1", ">=2.0.0rc1,<3"),
    ],
)
def test_the_core_range_is_the_major_series(version: str, expected: str) -> None:
    assert core_range(version) == expected


def test_creates_the_package_with_every_placeholder_filled(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, err = new_package(
        "monsession-hooks-my-metric", "--dir", str(tmp_path), capsys=capsys
    )
    assert (status, err) == (0, "")
    root = tmp_path / "monsession-hooks-my-metric"
    assert out.startswith(f"Created {root}: the hook package monsession-hooks-my-metric.")
    files = {path.relative_to(root).as_posix() for path in root.rglob("*") if path.is_file()}
    assert files == FILES
    for name in files:
        text = (root / name).read_text("utf-8")
        assert "{{" not in text and "}}" not in text, name
        if name.endswith(".py"):
            ast.parse(text, name)  # Valid Python.
    project = tomllib.loads((root / "pyproject.toml").read_text("utf-8"))
    series = core_range(_plugin_manager.core_version() or "")
    assert project["project"]["name"] == "monsession-hooks-my-metric"
    assert project["project"]["dependencies"] == [f"monsession-core{series}"]
    assert project["project"]["entry-points"]["monsession"] == {
        "my-metric": "monsession_hooks_my_metric._plugin"
    }
    assert project["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"] == [
        "src/monsession_hooks_my_metric"
    ]
    readme = (root / "README.md").read_text("utf-8")
    assert "pip install monsession-core monsession-hooks-my-metric\n" in readme
    assert "from monsession.hooks import MyMetricHook\n" in readme
    hook = (root / "src/monsession_hooks_my_metric/_hook.py").read_text("utf-8")
    assert "class MyMetricHook(TimedHook):" in hook


@pytest.mark.parametrize(
    ("name", "hint"),
    [
        ("demo", ""),
        ("monsession-hooks-", ""),
        ("monsession-hooks-2fa", ""),
        ("monsession-hooks-a--b", " Did you mean 'monsession-hooks-a-b'?"),
        ("monsession-hooks-demo ", " Did you mean 'monsession-hooks-demo'?"),
        ("Monsession_Hooks_Demo", " Did you mean 'monsession-hooks-demo'?"),
        ("monsession.hooks.my_metric", " Did you mean 'monsession-hooks-my-metric'?"),
    ],
)
def test_refuses_a_bad_name(
    name: str, hint: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, err = new_package(name, "--dir", str(tmp_path), capsys=capsys)
    assert (status, out) == (2, "")
    assert err == (
        f"monsession new-package: error: {name!r} is not a valid hook package name: expected "
        "monsession-hooks-<name>, where <name> is lowercase letters, digits and single "
        "hyphens, starting with a letter (e.g. monsession-hooks-demo). It gives the import "
        f"name monsession_hooks_<name> and the plugin name <name>.{hint}\n"
    )
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", ["monsession-hooks-summary", "monsession-hooks-checkpoint"])
def test_refuses_the_name_of_a_first_party_family(name: str, tmp_path: Path) -> None:
    with pytest.raises(NewPackageError, match=r"is a distribution of monsession itself"):
        cli.create_package(name, tmp_path, "0.1.0")
    assert list(tmp_path.iterdir()) == []


def test_never_overwrites_an_existing_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    existing = tmp_path / "monsession-hooks-demo"
    existing.mkdir()
    (existing / "pyproject.toml").write_text("mine", "utf-8")
    status, out, err = new_package("monsession-hooks-demo", "--dir", str(tmp_path), capsys=capsys)
    assert (status, out) == (2, "")
    assert err == (
        f"monsession new-package: error: {str(existing)!r} already exists; new-package never "
        "overwrites it. Remove it or create the package elsewhere (--dir).\n"
    )
    assert [path.name for path in existing.iterdir()] == ["pyproject.toml"]
    assert (existing / "pyproject.toml").read_text("utf-8") == "mine"


def test_refuses_a_missing_parent_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nowhere"
    status, _, err = new_package("monsession-hooks-demo", "--dir", str(missing), capsys=capsys)
    assert status == 2
    assert (
        err == f"monsession new-package: error: --dir {str(missing)!r} is not an existing folder.\n"
    )
    assert not missing.exists()


def test_the_console_script_creates_it_in_the_current_folder_without_tensorflow(
    tmp_path: Path,
) -> None:
    code = """
import json, runpy, sys
sys.argv = ["monsession", "new-package", "monsession-hooks-demo"]
try:
    runpy.run_module("monsession", run_name="__main__")
except SystemExit as exit:
    assert exit.code == 0, exit.code
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] == "tensorflow")))
"""
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    created, imported = result.stdout.splitlines()
    assert created.startswith("Created monsession-hooks-demo: the hook package")
    assert json.loads(imported) == []
    assert (tmp_path / "monsession-hooks-demo" / "src" / "monsession_hooks_demo").is_dir()
