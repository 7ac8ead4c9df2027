"""The documentation site's build: `mkdocs build --strict` fails on what a reader would trip on.

Run by the `site` tox env, after the real build. Each check builds a copy
of the site's sources (mkdocs.yml, docs/, the included READMEs, the packages'
sources for the API reference) with deliberate faults.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).parents[2]
sys.path.insert(0, str(ROOT / "tools"))

import site_hooks  # noqa: E402

SOURCES = (
    "mkdocs.yml",
    "docs",
    "tools/site_hooks.py",
    "tools/griffe_public_bases.py",
    "README.md",
    "examples/distributed/README.md",
    "examples/monsession-hooks-earlystop/README.md",
    "examples/monsession-hooks-broken/README.md",
)
PACKAGES = (
    "core",
    "hooks-checkpoint",
    "hooks-summary",
    "hooks-logging",
    "hooks-debug",
    "hooks-keras",
    "hooks-mlflow",
)


@pytest.fixture
def site_copy(tmp_path: Path) -> Path:
    """A copy of what the site is built from."""
    for source in SOURCES:
        target = tmp_path / source
        target.parent.mkdir(parents=True, exist_ok=True)
        if (ROOT / source).is_dir():
            shutil.copytree(ROOT / source, target, ignore=shutil.ignore_patterns("tests"))
        else:
            shutil.copy(ROOT / source, target)
    for package in PACKAGES:
        shutil.copytree(ROOT / package / "src", tmp_path / package / "src")
        shutil.copy(ROOT / package / "README.md", tmp_path / package / "README.md")
    return tmp_path


def build(folder: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(folder / "out")],
        cwd=folder,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=300,
        check=False,
    )


def append(path: Path, line: str) -> None:
    path.write_text(path.read_text(encoding="utf-8") + f"\n{line}\n", encoding="utf-8")


def test_a_broken_anchor_link_or_api_reference_fails_the_strict_build(site_copy: Path) -> None:
    append(site_copy / "docs/migration.md", "See [there](getting-started.md#no-such-section).")
    # A README shown on the site: its link is checked from the page that includes it.
    append(site_copy / "hooks-summary/README.md", "See [the guide](../docs/no-such-page.md).")
    append(site_copy / "docs/api/hooks.md", "See [a hook][monsession.NoSuchHook].")
    result = build(site_copy)
    assert result.returncode != 0, result.stdout
    # Exactly these three: without them the copy builds clean, as the real build.
    assert "Aborted with 3 warnings in strict mode" in result.stdout, result.stdout
    assert "does not contain an anchor '#no-such-section'" in result.stdout
    assert "'families/summary.md' contains a link '../no-such-page.md'" in result.stdout
    assert "monsession.NoSuchHook" in result.stdout


def test_an_included_readme_links_to_the_pages_that_show_its_targets() -> None:
    config = {"config_file_path": str(ROOT / "mkdocs.yml"), "docs_dir": str(ROOT / "docs")}
    text = (
        "[monsession](../core), [guide](../docs/migration.md#from-keras-callbacks), "
        "[tests](tests/test_x.py), [site](https://example.org/a.md)\n"
        "```\n[not a link](../core)\n```"
    )
    assert site_hooks.rewrite_links(
        text, "hooks-summary/README.md", "families/summary.md", config
    ) == (
        "[monsession](../index.md), [guide](../migration.md#from-keras-callbacks), "
        "[tests](tests/test_x.py), [site](https://example.org/a.md)\n"
        "```\n[not a link](../core)\n```"
    )
    page = SimpleNamespace(file=SimpleNamespace(src_uri="families/summary.md"))
    shown = site_hooks.on_page_markdown(
        "<!-- include hooks-summary/README.md -->\n", page, config, files=None
    )
    assert shown.startswith("# monsession-hooks-summary\n")


def _bases(site: Path) -> list[tuple[str, list[str]]]:
    """(page, names) of every "Bases:" line of the built API reference."""
    shown = []
    for page in sorted((site / "api").rglob("index.html")):
        for line in re.findall(r"Bases: (.*?)</p>", page.read_text(encoding="utf-8")):
            shown.append((page.parent.name, re.findall(r">([\w.]+)</(?:a|span)>", line)))
    return shown


def test_no_public_class_shows_a_private_base(site_copy: Path) -> None:
    """`MonitoredSession(_MonitoredSession)` shows no base; a creator shows `SessionCreator`."""
    result = build(site_copy)
    assert result.returncode == 0, result.stdout[-3000:]
    shown = _bases(site_copy / "out")
    private = [(page, names) for page, names in shown if any(n.startswith("_") for n in names)]
    assert private == []
    assert shown.count(("monsession", ["SessionCreator"])) == 2  # Chief and worker creators.
