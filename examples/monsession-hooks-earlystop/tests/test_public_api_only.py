"""The example uses only core's public API, as any third-party package must.

Core's private modules (the names starting with an underscore under
`monsession`) may change in any release. This test reads every Python file
of the example's src/ and tests/ (and of the broken example's src/) and
fails on any use of them: an import, an attribute, or code in a string
(e.g. a script run with ``python -c``).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2]
FOLDERS = (
    EXAMPLES / "monsession-hooks-earlystop" / "src",
    EXAMPLES / "monsession-hooks-earlystop" / "tests",
    EXAMPLES / "monsession-hooks-broken" / "src",
)
# A private name of core in any text: an attribute path or a from-import.
PRIVATE_TEXT = re.compile(
    r"\bmonsession\s*\.\s*_(?!_)\w*"
    r"|\bfrom\s+monsession\s+import\s+\(?\s*(?:\w+\s*,\s*)*_(?!_)\w*"
)


def private_uses(source: str) -> list[str]:
    """Returns each use of a private name of core in `source`, as written."""
    found = [match.group(0) for match in PRIVATE_TEXT.finditer(source)]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module == "monsession" and node.level == 0:
            found += [
                f"from monsession import {alias.name}"
                for alias in node.names
                if alias.name.startswith("_") and not alias.name.startswith("__")
            ]
    return found


def python_files() -> list[Path]:
    return sorted(path for folder in FOLDERS for path in folder.rglob("*.py"))


# Samples for the check, written with a placeholder so that this file does
# not trip the check itself.
SAMPLES = [
    ("from CORE._lazy import lazy_attributes\n", True),
    ("import CORE._plugin_manager as pm\n", True),
    ("from CORE import _plugin_manager\n", True),
    ("from CORE import (\n    hookimpl,\n    _cli,\n)\n", True),
    ("code = 'from CORE import _cli'\n", True),
    ("import CORE\nCORE._global_step.read(1)\n", True),
    ("import CORE\nprint(CORE.__version__, CORE.plugins)\n", False),
    ("from CORE import plugins, testing\nimport CORE_hooks_x._plugin\n", False),
]


@pytest.mark.parametrize(("sample", "expected"), SAMPLES)
def test_the_check_finds_private_uses(sample: str, expected: bool) -> None:
    source = sample.replace("CORE", "monsession")
    assert bool(private_uses(source)) is expected, private_uses(source)


def test_the_check_reads_the_example() -> None:
    names = {path.name for path in python_files()}
    assert {
        "_early_stopping.py",
        "_plugin.py",
        "earlystop_testing.py",
        "test_earlystop_plugin.py",
        Path(__file__).name,
    } <= names


def test_no_private_core_api() -> None:
    uses = {
        str(path.relative_to(EXAMPLES)): sorted(set(found))
        for path in python_files()
        if (found := private_uses(path.read_text(encoding="utf-8")))
    }
    assert not uses, (
        f"Private core API used (use monsession's public names instead): {uses}. "
        "See docs/plugin-authors.md, 'Public helpers for hook authors'."
    )
