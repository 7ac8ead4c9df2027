"""The pages in docs/: every hookspec is documented, every runnable snippet runs.

A snippet is runnable when the line before its ```` ```python ```` fence is
``<!-- runnable -->``. Each runnable snippet is self-contained: it is written
to a file and run as a script in a temporary working directory, with a fresh
default graph, so it needs nothing but core and TensorFlow.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
import runpy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from monsession import _hookspecs

DOCS = Path(__file__).parents[2] / "docs"
PAGES = ("getting-started.md", "migration.md", "plugin-authors.md", "hookspecs.md")
RUNNABLE_MARKER = "<!-- runnable -->"
HEADING = re.compile(r"^(#{1,6})\s+(.*)$")


@dataclasses.dataclass(frozen=True)
class Snippet:
    page: str
    line: int  # 1-based line of the opening fence
    code: str

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"


def runnable_snippets(page: Path) -> list[Snippet]:
    """The runnable snippets of `page`.

    Raises:
      ValueError: If a marker is not followed by a ```` ```python ```` block.
    """
    lines = page.read_text(encoding="utf-8").splitlines()
    snippets = []
    for index, line in enumerate(lines):
        if line.strip() != RUNNABLE_MARKER:
            continue
        fence = index + 1
        if fence >= len(lines) or lines[fence].strip() != "```python":
            raise ValueError(
                f"{page.name}:{index + 1}: {RUNNABLE_MARKER} must be followed by a ```python block."
            )
        end = next((i for i in range(fence + 1, len(lines)) if lines[i].strip() == "```"), None)
        if end is None:
            raise ValueError(f"{page.name}:{fence + 1}: the ```python block is never closed.")
        snippets.append(Snippet(page.name, fence + 1, "\n".join(lines[fence + 1 : end]) + "\n"))
    return snippets


def all_runnable_snippets() -> list[Snippet]:
    return [snippet for name in PAGES for snippet in runnable_snippets(DOCS / name)]


def hookspecs() -> dict[str, Callable[..., Any]]:
    """The hookspecs of `monsession._hookspecs`, by name."""
    return {
        name: value
        for name, value in vars(_hookspecs).items()
        if getattr(value, f"{_hookspecs.PROJECT_NAME}_spec", None) is not None
    }


def sections(text: str) -> dict[str, str]:
    """Each heading's text (without ``#`` and backticks) -> the text under it."""
    found: dict[str, list[str]] = {}
    current: list[str] | None = None
    in_code = False
    for line in text.splitlines():
        if line.startswith("```"):
            in_code = not in_code
        match = None if in_code else HEADING.match(line)
        if match:
            current = found.setdefault(match.group(2).replace("`", "").strip(), [])
        elif current is not None:
            current.append(line)
    return {heading: "\n".join(lines) for heading, lines in found.items()}


def signature_line(name: str, function: Callable[..., Any]) -> str:
    """``def name(arg: Type) -> Return:`` as written in the hookspec's source."""
    signature = inspect.signature(function)
    parameters = ", ".join(
        f"{parameter.name}: {parameter.annotation}" for parameter in signature.parameters.values()
    )
    return f"def {name}({parameters}) -> {signature.return_annotation}:"


def test_the_pages_exist() -> None:
    assert sorted(path.name for path in DOCS.glob("*.md")) == sorted(PAGES)


def test_the_snippet_parser_finds_the_runnable_snippets() -> None:
    pages = {snippet.page for snippet in all_runnable_snippets()}
    assert {"getting-started.md", "migration.md"} <= pages


def test_hookspecs_are_found() -> None:
    assert set(hookspecs()) >= {
        "monsession_hook_classes",
        "monsession_training_arguments",
        "monsession_default_hooks",
    }


def test_every_hookspec_has_a_heading_and_no_heading_names_another() -> None:
    headings = sections((DOCS / "hookspecs.md").read_text(encoding="utf-8"))
    documented = {name for heading in headings for name in re.findall(r"monsession_\w+", heading)}
    assert documented == set(hookspecs()), (
        "docs/hookspecs.md must have one heading per hookspec of monsession._hookspecs: "
        f"missing {sorted(set(hookspecs()) - documented)}, "
        f"unknown {sorted(documented - set(hookspecs()))}"
    )


@pytest.mark.parametrize("name", sorted(hookspecs()))
def test_hookspec_section_matches_the_source(name: str) -> None:
    headings = sections((DOCS / "hookspecs.md").read_text(encoding="utf-8"))
    [section] = [text for heading, text in headings.items() if name in heading]
    function = hookspecs()[name]
    assert signature_line(name, function) in section
    summary = inspect.getdoc(function).splitlines()[0]  # type: ignore[union-attr]
    assert summary in section, f"the section of {name} must quote its summary line"


@pytest.mark.parametrize("snippet", all_runnable_snippets(), ids=lambda snippet: snippet.id)
def test_runnable_snippet_runs(
    snippet: Snippet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tensorflow as tf

    script = tmp_path / f"{Path(snippet.page).stem}_line_{snippet.line}.py"
    script.write_text(snippet.code, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    tf.compat.v1.reset_default_graph()
    try:
        runpy.run_path(str(script), run_name="__main__")
    finally:
        tf.compat.v1.reset_default_graph()
