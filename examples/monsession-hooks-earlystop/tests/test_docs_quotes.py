"""docs/plugin-authors.md quotes this package's code: the quotes stay true."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "monsession_hooks_earlystop"
GUIDE = Path(__file__).resolve().parents[3] / "docs" / "plugin-authors.md"
PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def quoted_blocks() -> list[str]:
    return PYTHON_BLOCK.findall(GUIDE.read_text(encoding="utf-8"))


@pytest.mark.parametrize(
    ("marker", "module"),
    [
        ("    def before_run(self, run_context: SessionRunContext)", "_early_stopping.py"),
        ("__getattr__, __dir__ = lazy_attributes(", "__init__.py"),
    ],
    ids=["hook-methods", "lazy-init"],
)
def test_the_guide_quotes_the_code_as_it_is(marker: str, module: str) -> None:
    [block] = [block for block in quoted_blocks() if marker in block]
    # Methods are quoted under their imports and class line (so that the
    # block stays valid, formatted Python): the quote starts after them.
    class_line = re.search(r"^class .*:\n", block, re.M)
    if class_line:
        block = block[class_line.end() :]
    source = (PACKAGE / module).read_text(encoding="utf-8")
    assert block in source, (
        f"docs/plugin-authors.md quotes src/monsession_hooks_earlystop/{module}, but the "
        "code changed: update the quote."
    )


def test_the_guide_quotes_the_pyproject_with_its_build_system() -> None:
    """Without `[build-system]` pip builds with setuptools and ignores `[tool.hatch...]`."""
    [block] = re.findall(r"^```toml\n(.*?)^```", GUIDE.read_text(encoding="utf-8"), re.S | re.M)
    pyproject = (PACKAGE.parents[1] / "pyproject.toml").read_text(encoding="utf-8").splitlines()
    assert block.startswith('[build-system]\nrequires = ["hatchling')
    assert 'build-backend = "hatchling.build"' in block
    missing = [line for line in block.splitlines() if line and line not in pyproject]
    assert missing == [], f"docs/plugin-authors.md quotes lines the pyproject.toml lacks: {missing}"
