"""docs/hookspecs.md documents every hookspec of `monsession._plugins._hookspecs`.

The runnable snippets of every page are run by the `docs` tox env
(`docs/tests/test_pages.py`), each in an environment holding exactly what
its page's install line names.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from monsession._plugins import _hookspecs

DOCS = Path(__file__).parents[2] / "docs"
HEADING = re.compile(r"^(#{1,6})\s+(.*)$")


def hookspecs() -> dict[str, Callable[..., Any]]:
    """The hookspecs of `monsession._plugins._hookspecs`, by name."""
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
        "docs/hookspecs.md must have one heading per hookspec of monsession._plugins._hookspecs: "
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
