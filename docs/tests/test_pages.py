"""Every page is a test: its runnable snippets run as a reader runs them.

The pages are `docs/*.md` and the package READMEs. A page marks with HTML
comments, which a reader does not see:

* ``<!-- install -->`` before the fenced block whose ``pip install`` lines
  say what to install from a clone (before the page's first runnable
  snippet; lines naming no local folder, the released form, are skipped).
  The check creates a virtual environment holding exactly those packages
  (the page's local folders, TensorFlow when the page installs it;
  ``tensorflow`` is taken as ``tensorflow-cpu``), one per distinct set;
* ``<!-- runnable -->`` (or ``<!-- runnable twice -->`` where the page says
  that running it again resumes) before a ```` ```python ```` snippet. Each
  one is written to a file and run in that environment, in its own process
  and its own working directory, in page order;
* ``<!-- output -->`` before the fenced block showing what the run prints
  (stdout and stderr, as a terminal shows them), one per run; the block
  comes after its snippet, before the next runnable one. Numbers are masked
  (``N``), a line ``...`` stands for any number of lines and ``...`` in a
  line for any text. A snippet without an output block must print nothing.

TensorFlow's own start-up lines on stderr (CPU instructions, absl) are left
out of the comparison; pages say they may appear.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
PAGES = (
    "docs/getting-started.md",
    "docs/migration.md",
    "docs/plugin-authors.md",
    "docs/hookspecs.md",
    "core/README.md",
    "hooks-checkpoint/README.md",
    "hooks-summary/README.md",
    "hooks-logging/README.md",
    "hooks-debug/README.md",
    "hooks-keras/README.md",
)
MARKER = re.compile(r"^<!-- (install|runnable|runnable twice|output) -->$")
FENCE = re.compile(r"^```(\w*)$")
# What TensorFlow prints on its own when imported, whatever the program does.
TENSORFLOW_STARTUP = re.compile(
    r"^(?:[IWEF]\d{4} [\d:.]+\s+\d+ \S+:\d+\] .*"
    r"|WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR"
    r"|To enable the following instructions: .*rebuild TensorFlow with the appropriate "
    r"compiler flags\.)$"
)
NUMBER = re.compile(r"\d+(?:\.\d+)?(?:e[-+]?\d+)?")
RUN_TIMEOUT_SECS = 600


class PageError(ValueError):
    """A page breaks the marking rules."""


@dataclasses.dataclass(frozen=True)
class Snippet:
    page: str
    line: int  # 1-based line of the opening fence
    code: str
    runs: int  # 2 for `runnable twice`
    outputs: tuple[str, ...]  # the output block of each run; () when it prints nothing

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"


@dataclasses.dataclass(frozen=True)
class Page:
    name: str
    install: tuple[str, ...]  # `uv pip install` arguments, sorted
    snippets: tuple[Snippet, ...]


def _block(lines: list[str], start: int, where: str) -> tuple[str, str, int]:
    """The fenced block opening at `lines[start]`: (language, text, index after it)."""
    opening = FENCE.match(lines[start].strip()) if start < len(lines) else None
    if opening is None:
        raise PageError(f"{where}: the marker must be followed by a fenced block.")
    for end in range(start + 1, len(lines)):
        if lines[end].strip() == "```":
            return opening.group(1), "\n".join(lines[start + 1 : end]) + "\n", end + 1
    raise PageError(f"{where}: the fenced block is never closed.")


def install_arguments(block: str, where: str) -> tuple[str, ...]:
    """The `uv pip install` arguments of the ``pip install`` lines of `block`.

    Local folders of the checkout (``./core``, ``"./core[tensorflow]"``,
    ``./hooks-summary``) become absolute paths; ``tensorflow`` (the
    distribution or core's extra) becomes ``tensorflow-cpu``, the same
    TensorFlow without GPU support, from the uv cache.
    """
    arguments: set[str] = set()
    for line in block.splitlines():
        words = shlex.split(line, comments=True)
        if words[:2] != ["pip", "install"] or not any(w.startswith("./") for w in words):
            continue  # Not an install from the clone (the released form, from the index).
        for word in words[2:]:
            if word.startswith("-"):
                continue
            folder, _, extras = word.partition("[")
            if word in ("tensorflow", "tensorflow-cpu"):
                arguments.add("tensorflow-cpu")
            elif folder.startswith("./") and (ROOT / folder).is_dir():
                extras = extras.rstrip("]").replace("tensorflow-cpu", "tensorflow")
                extras = extras.replace("tensorflow", "tensorflow-cpu")
                arguments.add(
                    f"{ROOT / folder[2:]}[{extras}]" if extras else str(ROOT / folder[2:])
                )
            else:
                raise PageError(
                    f"{where}: the install line names {word!r}; the check installs only "
                    "folders of this checkout (./core, ./hooks-...) and tensorflow."
                )
    if not arguments:
        raise PageError(f"{where}: the install block has no `pip install ./...` line.")
    return tuple(sorted(arguments))


def read_page(name: str) -> Page:
    """The install line and the runnable snippets (with their outputs) of page `name`.

    Raises:
      PageError: If a marker is malformed or misplaced, a runnable snippet
        comes before the install line, or the output blocks do not match the
        runs.
    """
    lines = (ROOT / name).read_text(encoding="utf-8").splitlines()
    install: tuple[str, ...] | None = None
    found: list[tuple[int, str, int, list[str]]] = []  # line, code, runs, outputs
    index = 0
    while index < len(lines):
        text = lines[index].strip()
        where = f"{name}:{index + 1}"
        if not text.startswith("<!-- ") or text.startswith("<!-- /") or "test-command" in text:
            index += 1
            continue
        marker = MARKER.match(text)
        if marker is None:
            raise PageError(
                f"{where}: expected <!-- install -->, <!-- runnable -->, "
                f"<!-- runnable twice --> or <!-- output -->, got {text!r}."
            )
        kind = marker.group(1)
        language, block, after = _block(lines, index + 1, where)
        if kind == "install":
            if install is not None:
                raise PageError(f"{where}: a page has one install block.")
            install = install_arguments(block, where)
        elif kind.startswith("runnable"):
            if language != "python":
                raise PageError(f"{where}: {text} must be followed by a ```python block.")
            if install is None:
                raise PageError(
                    f"{where}: a runnable snippet before the page's <!-- install --> block."
                )
            found.append((index + 2, block, 2 if kind == "runnable twice" else 1, []))
        else:
            if not found:
                raise PageError(f"{where}: an output block before any runnable snippet.")
            found[-1][3].append(block)
        index = after
    snippets = []
    for line, code, runs, outputs in found:
        if outputs and len(outputs) != runs:
            raise PageError(
                f"{name}:{line}: the snippet runs {runs} time(s) but shows "
                f"{len(outputs)} output block(s)."
            )
        snippets.append(Snippet(name, line, code, runs, tuple(outputs)))
    return Page(name, install or (), tuple(snippets))


def shown_lines(output: str) -> list[str]:
    """`output` as compared: TensorFlow's start-up lines left out, numbers masked."""
    return [
        NUMBER.sub("N", line.rstrip())
        for line in output.splitlines()
        if not TENSORFLOW_STARTUP.match(line)
    ]


def matches(expected: str, output: str) -> bool:
    """Whether `output` prints what the `expected` block shows (``...``: any lines or text)."""
    pattern = "".join(
        r"(?:.*\n)*?" if line == "..." else re.escape(line).replace(r"\.\.\.", ".*") + r"\n"
        for line in shown_lines(expected)
    )
    printed = "".join(line + "\n" for line in shown_lines(output))
    return re.fullmatch(pattern, printed) is not None


# -- The checks of the pages' markup (no environment needed) -----------------


def all_pages() -> list[Page]:
    return [read_page(name) for name in PAGES]


def test_every_docs_page_is_checked() -> None:
    docs = {f"docs/{path.name}" for path in (ROOT / "docs").glob("*.md")}
    readmes = {f"{path.parent.name}/README.md" for path in ROOT.glob("*/pyproject.toml")}
    assert docs | readmes == set(PAGES)


def test_the_pages_parse_and_state_their_install_line() -> None:
    pages = {page.name: page for page in all_pages()}
    for name in PAGES:
        if name.endswith("README.md"):  # Every package README says how to install it.
            assert pages[name].install, f"{name} has no <!-- install --> block"
    getting_started = pages["docs/getting-started.md"]
    assert len(getting_started.snippets) >= 9
    assert getting_started.snippets[0].runs == 2, "the graph example resumes"


def test_an_install_line_names_local_folders_and_tensorflow() -> None:
    block = (
        'pip install "./core[tensorflow]"   # or ./core[tensorflow-cpu]\n'
        "pip install ./hooks-summary\n"
    )
    assert install_arguments(block, "page") == (
        f"{ROOT / 'core'}[tensorflow-cpu]",
        str(ROOT / "hooks-summary"),
    )
    assert install_arguments("pip install ./core tensorflow\n", "page") == (
        str(ROOT / "core"),
        "tensorflow-cpu",
    )
    with pytest.raises(PageError, match="names 'keras'"):
        install_arguments("pip install ./core keras\n", "page")


def test_malformed_and_misplaced_markers_are_errors(tmp_path: Path) -> None:
    cases = {
        "<!-- runnable needs x -->\n```python\npass\n```\n": "expected <!-- install -->",
        "<!-- runnable -->\n```python\npass\n```\n": "before the page's <!-- install -->",
        "<!-- install -->\n```bash\npip install ./core\n```\n<!-- runnable -->\npass\n": (
            "followed by a fenced block"
        ),
        "<!-- install -->\n```bash\npip install ./core\n```\n"
        "<!-- runnable twice -->\n```python\npass\n```\n<!-- output -->\n```text\nx\n```\n": (
            "runs 2 time"
        ),
    }
    page = tmp_path / "page.md"
    for text, message in cases.items():
        page.write_text(text, encoding="utf-8")
        with pytest.raises(PageError, match=re.escape(message)):
            read_page(str(page))


def test_outputs_are_compared_with_numbers_masked_and_ellipsis_lines() -> None:
    startup = "I0000 00:00:1795700130.087378    7051 cpu_feature_guard.cc:227] This TensorFlow\n"
    assert matches("loss 0.25\n...\nstep 20\n", f"{startup}loss 0.125\na\nb\nstep 21\n")
    assert matches("loss 0.25\n...\nstep 20\n", "loss 1\nstep 3\n")
    assert not matches("loss 0.25\n", "loss 0.25\nmore\n")
    assert not matches("loss 0.25\n", "cost 0.25\n")
    assert matches("From .../saver.py:12: deprecated\n", "From /tmp/v/lib/saver.py:7: deprecated\n")


# -- Running the snippets -------------------------------------------------------------


def runnable_snippets() -> Iterator[Snippet]:
    for page in all_pages():
        yield from page.snippets


def _uv() -> str:
    uv = shutil.which("uv") or shutil.which("uv", path=str(Path(sys.executable).parent))
    assert uv, "the docs check needs uv (tox-uv provides it)"
    return uv


@pytest.fixture(scope="session")
def page_environment(tmp_path_factory: pytest.TempPathFactory) -> Callable[[tuple[str, ...]], Path]:
    """Returns the environment of an install set: created on first use, from uv's cache."""
    created: dict[tuple[str, ...], Path] = {}

    def get(install: tuple[str, ...]) -> Path:
        if install not in created:
            venv = tmp_path_factory.mktemp("venv")
            subprocess.run(
                [_uv(), "venv", "--quiet", "--python", sys.executable, str(venv)], check=True
            )
            subprocess.run(
                [
                    _uv(),
                    "pip",
                    "install",
                    "--quiet",
                    "--python",
                    str(venv / "bin" / "python"),
                    *install,
                ],
                check=True,
            )
            created[install] = venv
        return created[install]

    return get


def reader_environment(venv: Path) -> dict[str, str]:
    """A shell where the reader activated `venv`; Python's output line-buffered as on a terminal."""
    env = {
        name: os.environ[name] for name in ("HOME", "TMPDIR", "LANG", "PATH") if name in os.environ
    }
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = str(venv)
    env["PYTHONUNBUFFERED"] = "1"
    return env


PAGE_INSTALL = {page.name: page.install for page in all_pages()}


@pytest.mark.parametrize("snippet", list(runnable_snippets()), ids=lambda snippet: snippet.id)
def test_snippet_prints_what_the_page_shows(
    snippet: Snippet,
    page_environment: Callable[[tuple[str, ...]], Path],
    tmp_path: Path,
) -> None:
    venv = page_environment(PAGE_INSTALL[snippet.page])
    work = tmp_path / "work"
    work.mkdir()
    script = work / f"{Path(snippet.page).stem}_{snippet.line}.py"
    script.write_text(snippet.code, encoding="utf-8")
    for run in range(snippet.runs):
        result = subprocess.run(
            [str(venv / "bin" / "python"), script.name],
            cwd=work,
            env=reader_environment(venv),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=RUN_TIMEOUT_SECS,
            check=False,
        )
        which = f"{snippet.id} (run {run + 1} of {snippet.runs})"
        assert result.returncode == 0, f"{which} failed:\n{result.stdout}"
        expected = snippet.outputs[run] if snippet.outputs else ""
        assert matches(expected, result.stdout), (
            f"{which} printed (numbers masked as N, TensorFlow's start-up lines left out):\n"
            + "\n".join(shown_lines(result.stdout))
            + "\n\nbut the page shows:\n"
            + "\n".join(shown_lines(expected))
        )


def test_the_readme_lists_every_env_ci_runs() -> None:
    """README "Development" names each env of `tox -m ci` (the `ci` label of tox.ini)."""
    [label] = re.findall(r"^\s+ci = (.*)$", (ROOT / "tox.ini").read_text(encoding="utf-8"), re.M)
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    development = readme[readme.index("## Development") : readme.index("### Releasing")]
    missing = [env for env in label.replace(",", " ").split() if f"`{env}`" not in development]
    assert missing == [], f"README.md, Development, does not name the ci envs {missing}"
