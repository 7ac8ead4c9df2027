"""The pages in docs/: every hookspec is documented, every runnable snippet runs.

A snippet is runnable when the line before its ```` ```python ```` fence is
``<!-- runnable -->``, or ``<!-- runnable needs DIST ... -->`` when it needs
hook families. Each runnable snippet is self-contained: it is written to a
file and run as a script in a temporary working directory, with a fresh
default graph. A snippet whose families are all installed runs (the `all`
env); otherwise it must fail with the `ImportError` that names a missing
family (the `core` env), as a reader without that family would see it.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
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
RUNNABLE_MARKER = re.compile(r"^<!-- runnable(?: needs ((?:[\w.-]+ ?)+))? -->$")
HEADING = re.compile(r"^(#{1,6})\s+(.*)$")


@dataclasses.dataclass(frozen=True)
class Snippet:
    page: str
    line: int  # 1-based line of the opening fence
    code: str
    needs: tuple[str, ...] = ()  # the distributions it needs besides core

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
        if not line.strip().startswith("<!-- runnable"):
            continue
        marker = RUNNABLE_MARKER.match(line.strip())
        if marker is None:
            raise ValueError(
                f"{page.name}:{index + 1}: expected <!-- runnable --> or "
                f"<!-- runnable needs DIST ... -->, got {line.strip()!r}."
            )
        fence = index + 1
        if fence >= len(lines) or lines[fence].strip() != "```python":
            raise ValueError(
                f"{page.name}:{index + 1}: {line.strip()} must be followed by a ```python block."
            )
        end = next((i for i in range(fence + 1, len(lines)) if lines[i].strip() == "```"), None)
        if end is None:
            raise ValueError(f"{page.name}:{fence + 1}: the ```python block is never closed.")
        code = "\n".join(lines[fence + 1 : end]) + "\n"
        needs = tuple((marker.group(1) or "").split())
        snippets.append(Snippet(page.name, fence + 1, code, needs))
    return snippets


def installed(distribution: str) -> bool:
    try:
        importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


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


def test_the_snippets_that_need_families_are_runnable() -> None:
    needs: dict[str, list[tuple[str, ...]]] = {}
    for snippet in all_runnable_snippets():
        if snippet.needs:
            needs.setdefault(snippet.page, []).append(snippet.needs)
    assert needs["getting-started.md"] == [
        (
            "monsession-hooks-checkpoint",
            "monsession-hooks-summary",
            "monsession-hooks-logging",
        ),
        ("monsession-hooks-summary",),
        ("monsession-hooks-keras", "monsession-hooks-checkpoint"),
    ]
    assert set().union(*needs["migration.md"]) == {
        "monsession-hooks-checkpoint",
        "monsession-hooks-summary",
        "monsession-hooks-logging",
        "monsession-hooks-debug",
    }
    estimator = [s for s in all_runnable_snippets() if "def model_fn(" in s.code]
    assert [snippet.page for snippet in estimator] == ["migration.md"]


def test_a_malformed_runnable_marker_is_an_error(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("<!-- runnable needs -->\n```python\npass\n```\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"page\.md:1: expected <!-- runnable -->"):
        runnable_snippets(page)


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
    missing = [name for name in snippet.needs if not installed(name)]
    tf.compat.v1.reset_default_graph()
    try:
        if not missing:
            runpy.run_path(str(script), run_name="__main__")
            return
        with pytest.raises(ImportError) as error:
            runpy.run_path(str(script), run_name="__main__")
        assert any(name in str(error.value) for name in missing), (
            f"without {missing} installed the snippet must fail naming one of them; "
            f"it raised {error.value!r}"
        )
    finally:
        tf.compat.v1.reset_default_graph()
