"""MkDocs hooks of the documentation site (`mkdocs.yml`): pages that show a README.

A page of `docs/` shows a file kept elsewhere in the repository (a package
README, the distributed examples) with a line ``<!-- include PATH -->``,
PATH relative to the repository's top folder: the file stays the one source,
on its index page and on the site. Its links are written for where it lives
in the repository (``../core``, ``../docs/migration.md``), so they are
rewritten for the page that shows it: a link to a file or folder that a page
of the site shows becomes a link to that page; a link to anything else of
the repository becomes its path in code (the site has no copy of it); a
link to a missing file is left as it is, so that `mkdocs build --strict`
fails on it. A file
included under a page's own title has its headings moved one level down.
"""

from __future__ import annotations

import os
import posixpath
import re
from pathlib import Path
from typing import Any

INCLUDE = re.compile(r"^<!-- include (\S+) -->$")
LINK = re.compile(r"(?<!!)\[([^\]]*)\]\(([^)\s]+)\)")
FENCE = re.compile(r"^\s*(```|~~~)")


def _repository(config: Any) -> Path:
    return Path(config["config_file_path"]).parent


def _docs_folder(config: Any) -> str:
    return Path(config["docs_dir"]).relative_to(_repository(config)).as_posix()


def included_files(docs_dir: Path) -> dict[str, str]:
    """{repository path of an included file: the docs page (relative to `docs_dir`) showing it}."""
    shown: dict[str, str] = {}
    for page in sorted(docs_dir.rglob("*.md")):
        for line in page.read_text(encoding="utf-8").splitlines():
            match = INCLUDE.match(line.strip())
            if match:
                shown[match.group(1)] = page.relative_to(docs_dir).as_posix()
    return shown


def _outside_fences(text: str) -> list[tuple[bool, str]]:
    """`text` as lines, each with whether it is prose (outside a fenced block)."""
    lines, prose = [], True
    for line in text.split("\n"):
        if FENCE.match(line):
            lines.append((False, line))
            prose = not prose
        else:
            lines.append((prose, line))
    return lines


def rewrite_links(text: str, source: str, page: str, config: Any) -> str:
    """The links of `text` (the repository file `source`) as seen from the docs page `page`."""
    docs = _docs_folder(config)
    shown = included_files(Path(config["docs_dir"]))

    def target_page(path: str) -> str | None:
        for candidate in (path, posixpath.join(path, "README.md")):
            if candidate in shown:
                return shown[candidate]
            if candidate.startswith(docs + "/") and candidate.endswith(".md"):
                return candidate[len(docs) + 1 :]
        return None

    def replace(match: re.Match[str]) -> str:
        label, href = match.group(1), match.group(2)
        if re.match(r"^[a-z]+:", href) or href.startswith("#"):
            return match.group(0)
        path, _, anchor = href.partition("#")
        resolved = posixpath.normpath(posixpath.join(posixpath.dirname(source), path))
        found = target_page(resolved)
        if found is None:
            if not (_repository(config) / resolved).exists():
                return match.group(0)  # A missing file: `mkdocs build --strict` names it.
            return f"{label} (`{resolved}` in the repository)"
        relative = posixpath.relpath(found, posixpath.dirname(page) or ".")
        return f"[{label}]({relative}{'#' + anchor if anchor else ''})"

    # Prose runs are rewritten whole: a link's text may span lines.
    runs: list[tuple[bool, list[str]]] = []
    for prose, line in _outside_fences(text):
        if runs and runs[-1][0] == prose:
            runs[-1][1].append(line)
        else:
            runs.append((prose, [line]))
    return "\n".join(
        LINK.sub(replace, "\n".join(lines)) if prose else "\n".join(lines) for prose, lines in runs
    )


def _shift_headings(text: str) -> str:
    return "\n".join(
        "#" + line if prose and re.match(r"^#{1,5} ", line) else line
        for prose, line in _outside_fences(text)
    )


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Expands the page's include lines and rewrites the links of what they include."""
    name = page.file.src_uri
    own_source = f"{_docs_folder(config)}/{name}"
    out: list[str] = []  # the page's own lines and the included files, links rewritten
    own: list[str] = []
    titled = False
    for prose, line in _outside_fences(markdown):
        match = INCLUDE.match(line.strip()) if prose else None
        if match is None:
            own.append(line)
            titled = titled or (prose and line.startswith("# "))
            continue
        if own:
            out.append(rewrite_links("\n".join(own), own_source, name, config))
            own = []
        source = match.group(1)
        text = (_repository(config) / source).read_text(encoding="utf-8")
        shown = _shift_headings(text) if titled else text
        out.append(rewrite_links(shown, source, name, config))
    if own:
        out.append(rewrite_links("\n".join(own), own_source, name, config))
    return "\n".join(out)


def on_config(config: Any) -> Any:
    """Serves a rebuilt site when an included file changes (`mkdocs serve`)."""
    for source in included_files(Path(config["docs_dir"])):
        path = os.fspath(_repository(config) / source)
        if path not in config["watch"]:
            config["watch"].append(path)
    return config
