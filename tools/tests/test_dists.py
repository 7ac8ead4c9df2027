"""The release files: built by tools/build_dists.py (the `dist` fixture), then checked.

Every wheel and sdist is built once per session (`twine check --strict` runs
in the build); these tests read the files. test_index.py publishes them to a
local package index and installs them by name.
"""

from __future__ import annotations

import pathlib
import re
import tarfile
import zipfile

import pytest
from release import RELEASED, file_stem, version


def test_one_wheel_and_one_sdist_per_package_all_of_one_version(dist: pathlib.Path) -> None:
    expected = {
        f"{file_stem(name)}-{version()}{suffix}"
        for name in RELEASED
        for suffix in ("-py3-none-any.whl", ".tar.gz")
    }
    built = {path.name for path in dist.iterdir() if path.name.endswith((".whl", ".tar.gz"))}
    assert built == expected


@pytest.mark.parametrize("name", sorted(RELEASED))
def test_the_wheel_holds_its_package_metadata_and_entry_point(
    dist: pathlib.Path, name: str
) -> None:
    module = RELEASED[name]
    [wheel] = dist.glob(f"{file_stem(name)}-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        files = archive.namelist()
        info = f"{file_stem(name)}-{version()}.dist-info"
        metadata = archive.read(f"{info}/METADATA").decode()
        entry_points = archive.read(f"{info}/entry_points.txt").decode()
    assert f"{module}/__init__.py" in files
    assert {path.split("/")[0] for path in files} == {module, info}, "only its own package"
    assert f"Name: {name}\n" in metadata
    assert "Description-Content-Type: text/markdown" in metadata
    if name == "monsession-core":
        assert "monsession = monsession.__main__:main" in entry_points
    else:
        [requirement] = re.findall(r"^Requires-Dist: monsession-core(.*)$", metadata, re.M)
        assert requirement.strip(), f"{name} must require a monsession-core range"
        assert f"[monsession]\n{name.removeprefix('monsession-hooks-')} = {module}._plugin" in (
            entry_points
        )


@pytest.mark.parametrize("name", sorted(RELEASED))
def test_the_sdist_holds_sources_readme_and_tests(dist: pathlib.Path, name: str) -> None:
    [sdist] = dist.glob(f"{file_stem(name)}-*.tar.gz")
    top = f"{file_stem(name)}-{version()}"
    with tarfile.open(sdist) as archive:
        files = set(archive.getnames())
    assert {f"{top}/pyproject.toml", f"{top}/README.md", f"{top}/PKG-INFO"} <= files
    assert f"{top}/src/{RELEASED[name]}/__init__.py" in files
    assert any(path.startswith(f"{top}/tests/") for path in files)
