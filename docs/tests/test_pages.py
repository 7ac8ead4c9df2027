"""Every page is a test: its runnable snippets run as a reader runs them.

The pages are those the documentation site shows (`mkdocs.yml`'s `nav`),
among them every package README: a page of `docs/` that shows a file kept
elsewhere with ``<!-- include PATH -->`` stands for that file too, so the
file's snippets run once, as its own. A page marks with HTML comments,
which a reader does not see:

* ``<!-- install -->`` before the fenced block whose ``pip install`` lines
  say what to install from a clone (before the page's first runnable
  snippet; lines naming no local folder, the released form, are skipped).
  The check creates a virtual environment holding exactly those packages
  (the page's local folders, TensorFlow when the page installs it;
  ``tensorflow`` is taken as ``tensorflow-cpu``), one per distinct set;
* ``<!-- runnable -->`` (or ``<!-- runnable twice -->``) before a
  ```` ```python ```` snippet. Each one is written to a file and run in that
  environment, in its own process and its own working directory, in page
  order. Runs follow the words: every sentence that tells the reader to run
  the program again ("Run it again", "run it twice", "running the script
  again", "run it a second time") stands between a ``runnable twice``
  snippet and its second output block, and every such snippet has one;
* ``<!-- output -->`` before the fenced block showing what the run prints
  (stdout and stderr, as a terminal shows them), one per run; the block
  comes after its snippet, before the next runnable one. It shows what a
  run printed, numbers included. Numbers that vary from run to run (times,
  rates, losses of random weights) are declared, and the page says so in
  words: ``<!-- output varies: WORD, ... -->`` masks each number printed
  right after a WORD (``loss = 0.25``, ``sec: 258.2``) or right before it
  (``0.143 sec``, ``2 calls``). A line ``...`` stands for any number of
  lines and ``...`` in a line for any text. A snippet without an output
  block must print nothing.

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
INCLUDE = re.compile(r"^<!-- include (\S+) -->$")
MARKER = re.compile(r"^<!-- (install|runnable|runnable twice|output)(?: varies: ([^>]+?))? -->$")
FENCE = re.compile(r"^```(\w*)$")
# A sentence telling the reader to run the program again.
RERUN = re.compile(
    r"\b(?:run|running|rerun)\s+(?:it|this|the\s+script|the\s+program|the\s+example)"
    r"\s+(?:again|twice|a\s+second\s+time)\b",
    re.IGNORECASE,
)
# What TensorFlow prints on its own when imported, whatever the program does.
TENSORFLOW_STARTUP = re.compile(
    r"^(?:[IWEF]\d{4} [\d:.]+\s+\d+ \S+:\d+\] .*"
    r"|WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR"
    r"|To enable the following instructions: .*rebuild TensorFlow with the appropriate "
    r"compiler flags\.)$"
)
NUMBER = r"[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?"
RUN_TIMEOUT_SECS = 600


def site_pages() -> tuple[str, ...]:
    """The repository files the site shows, in its navigation order.

    Each page of `mkdocs.yml`'s `nav` (under `docs/`), then the files it
    includes, each once.
    """
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    nav = config[config.index("\nnav:\n") :]
    pages: list[str] = []
    for page in re.findall(r"^\s+- [^:\n]+: (\S+\.md)$", nav, re.M):
        for name in (f"docs/{page}", *included(f"docs/{page}")):
            if name not in pages:
                pages.append(name)
    return tuple(pages)


def included(name: str) -> list[str]:
    """The files that page `name` shows with ``<!-- include PATH -->``."""
    lines = (ROOT / name).read_text(encoding="utf-8").splitlines()
    return [match.group(1) for line in lines if (match := INCLUDE.match(line.strip()))]


PAGES = site_pages()


class PageError(ValueError):
    """A page breaks the marking rules."""


@dataclasses.dataclass(frozen=True)
class Output:
    text: str  # what the run prints
    varies: tuple[str, ...] = ()  # the words whose numbers vary from run to run


@dataclasses.dataclass(frozen=True)
class Snippet:
    page: str
    line: int  # 1-based line of the opening fence
    code: str
    runs: int  # 2 for `runnable twice`
    outputs: tuple[Output, ...]  # the output block of each run; () when it prints nothing

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


def rerun_sentences(lines: list[str]) -> list[int]:
    """The 1-based lines of the sentences of `lines` (outside code) that say to run it again."""
    prose, fenced = [], False
    for line in lines:
        fenced = fenced != bool(FENCE.match(line.strip()))
        prose.append("" if fenced or line.strip().startswith(("```", "<!--")) else line)
    text = "\n".join(prose)
    return [text.count("\n", 0, match.start()) + 1 for match in RERUN.finditer(text)]


def read_page(name: str) -> Page:
    """The install line and the runnable snippets (with their outputs) of page `name`.

    Raises:
      PageError: If a marker is malformed or misplaced, a runnable snippet
        comes before the install line, the output blocks do not match the
        runs, or the runs do not follow the words.
    """
    lines = (ROOT / name).read_text(encoding="utf-8").splitlines()
    install: tuple[str, ...] | None = None
    # line, code, runs, outputs, lines of the output markers
    found: list[tuple[int, str, int, list[Output], list[int]]] = []
    index = 0
    while index < len(lines):
        text = lines[index].strip()
        where = f"{name}:{index + 1}"
        if (
            not text.startswith("<!-- ")
            or text.startswith("<!-- /")
            or "test-command" in text
            or INCLUDE.match(text)
        ):
            index += 1
            continue
        marker = MARKER.match(text)
        kind = marker.group(1) if marker else None
        if marker is None or (marker.group(2) and kind != "output"):
            raise PageError(
                f"{where}: expected <!-- install -->, <!-- runnable -->, <!-- runnable twice -->, "
                f"<!-- output --> or <!-- output varies: WORD, ... -->, got {text!r}."
            )
        language, block, after = _block(lines, index + 1, where)
        if kind == "install":
            if install is not None:
                raise PageError(f"{where}: a page has one install block.")
            install = install_arguments(block, where)
        elif kind in ("runnable", "runnable twice"):
            if language != "python":
                raise PageError(f"{where}: {text} must be followed by a ```python block.")
            if install is None:
                raise PageError(
                    f"{where}: a runnable snippet before the page's <!-- install --> block."
                )
            found.append((index + 2, block, 2 if kind == "runnable twice" else 1, [], []))
        else:
            if not found:
                raise PageError(f"{where}: an output block before any runnable snippet.")
            varies = tuple(word.strip() for word in (marker.group(2) or "").split(","))
            found[-1][3].append(Output(block, tuple(word for word in varies if word)))
            found[-1][4].append(index + 1)
        index = after
    snippets = []
    for line, code, runs, outputs, _ in found:
        if outputs and len(outputs) != runs:
            raise PageError(
                f"{name}:{line}: the snippet runs {runs} time(s) but shows "
                f"{len(outputs)} output block(s)."
            )
        snippets.append(Snippet(name, line, code, runs, tuple(outputs)))
    _check_runs_follow_the_words(name, lines, found)
    return Page(name, install or (), tuple(snippets))


def _check_runs_follow_the_words(
    name: str, lines: list[str], found: list[tuple[int, str, int, list[Output], list[int]]]
) -> None:
    """Each sentence saying "run it again" is tied to a snippet run twice, and the reverse."""
    # The lines from each twice-run snippet to its second output block (or its end).
    spans = [
        (line, markers[1] if len(markers) == 2 else line + code.count("\n"))
        for line, code, runs, _, markers in found
        if runs == 2
    ]
    for sentence in rerun_sentences(lines):
        if not any(start <= sentence <= end for start, end in spans):
            raise PageError(
                f"{name}:{sentence}: this sentence tells the reader to run the program again, "
                "but it does not stand between a <!-- runnable twice --> snippet and its "
                "second output block: the check would not run it again."
            )
    for start, end in spans:
        if not any(start <= sentence <= end for sentence in rerun_sentences(lines)):
            raise PageError(
                f"{name}:{start}: the snippet runs twice, but no sentence before its second "
                "output block tells the reader to run it again."
            )


def _mask_varying(line: str, varies: tuple[str, ...]) -> str:
    """`line` with the numbers printed next to a word of `varies` replaced by ``N``."""
    for word in varies:
        name = re.escape(word)
        line = re.sub(rf"(?<![\w.]){NUMBER}(?=\s+{name}\b)", "N", line)
        line = re.sub(rf"((?<!\w){name}\s*[=:]?\s*){NUMBER}", r"\g<1>N", line)
    return line


def shown_lines(output: str, varies: tuple[str, ...] = ()) -> list[str]:
    """`output` as compared: TensorFlow's start-up lines left out, varying numbers masked."""
    return [
        _mask_varying(line.rstrip(), varies)
        for line in output.splitlines()
        if not TENSORFLOW_STARTUP.match(line)
    ]


def matches(expected: Output, output: str) -> bool:
    """Whether `output` prints what the `expected` block shows (``...``: any lines or text)."""
    pattern = "".join(
        r"(?:.*\n)*?" if line == "..." else re.escape(line).replace(r"\.\.\.", ".*") + r"\n"
        for line in shown_lines(expected.text, expected.varies)
    )
    printed = "".join(line + "\n" for line in shown_lines(output, expected.varies))
    return re.fullmatch(pattern, printed) is not None


# -- The checks of the pages' markup (no environment needed) -----------------


def all_pages() -> list[Page]:
    return [read_page(name) for name in PAGES]


def test_every_page_of_the_site_and_every_package_readme_is_checked() -> None:
    docs = {
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / "docs").rglob("*.md")
        if "tests" not in path.relative_to(ROOT / "docs").parts
    }
    readmes = {f"{path.parent.name}/README.md" for path in ROOT.glob("*/pyproject.toml")}
    assert docs <= set(PAGES), f"pages of docs/ the site does not show: {docs - set(PAGES)}"
    assert readmes <= set(PAGES), f"package READMEs the site does not show: {readmes - set(PAGES)}"
    assert len(PAGES) == len(set(PAGES))  # An included file runs once.


def test_a_page_that_includes_a_readme_stands_for_it() -> None:
    assert included("docs/families/summary.md") == ["hooks-summary/README.md"]
    assert PAGES.index("hooks-summary/README.md") == PAGES.index("docs/families/summary.md") + 1
    assert read_page("docs/families/summary.md").snippets == ()


def test_the_pages_parse_and_state_their_install_line() -> None:
    pages = {page.name: page for page in all_pages()}
    for path in ROOT.glob("*/pyproject.toml"):  # Every package README says how to install it.
        name = f"{path.parent.name}/README.md"
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
        "<!-- install -->\n```bash\npip install ./core\n```\n"
        "<!-- runnable varies: loss -->\n```python\npass\n```\n": "expected <!-- install -->",
    }
    page = tmp_path / "page.md"
    for text, message in cases.items():
        page.write_text(text, encoding="utf-8")
        with pytest.raises(PageError, match=re.escape(message)):
            read_page(str(page))


def test_outputs_are_compared_with_their_numbers_and_ellipsis_lines() -> None:
    startup = "I0000 00:00:1795700130.087378    7051 cpu_feature_guard.cc:227] This TensorFlow\n"
    shown = Output("loss 0.25\n...\nstep 20\n")
    assert matches(shown, f"{startup}loss 0.25\na\nb\nstep 20\n")
    assert matches(shown, "loss 0.25\nstep 20\n")
    assert not matches(shown, "loss 0.125\nstep 20\n")  # Numbers are what the run prints.
    assert not matches(Output("loss 0.25\n"), "loss 0.25\nmore\n")
    assert not matches(Output("loss 0.25\n"), "cost 0.25\n")
    assert matches(Output("From .../saver.py:...: x\n"), "From /tmp/v/lib/saver.py:7: x\n")


def test_declared_varying_numbers_are_masked_next_to_their_words_only() -> None:
    shown = Output(
        "step 40: loss = 2.6903 (0.143 sec)\nglobal_step/sec: 258.2\n500 steps in 2 calls\n",
        varies=("loss", "sec", "calls"),
    )
    printed = "step 40: loss = 1.3196 (0.2 sec)\nglobal_step/sec: 131.71\n500 steps in 1 calls\n"
    assert matches(shown, printed)
    assert not matches(shown, printed.replace("step 40", "step 41"))  # Not declared.
    assert not matches(shown, printed.replace("500 steps", "499 steps"))


def _page(tmp_path: Path, body: str) -> str:
    page = tmp_path / "page.md"
    page.write_text("<!-- install -->\n```bash\npip install ./core\n```\n" + body, encoding="utf-8")
    return str(page)


def test_a_sentence_that_says_run_it_again_needs_a_second_run(tmp_path: Path) -> None:
    once = "<!-- runnable -->\n```python\nprint(1)\n```\n<!-- output -->\n```text\n1\n```\n"
    twice = (
        "<!-- runnable twice -->\n```python\nprint(1)\n```\n<!-- output -->\n```text\n1\n```\n"
        "{words}\n<!-- output -->\n```text\n1\n```\n"
    )
    for words in ("Run it again and it resumes.", "Running the\nscript again resumes."):
        with pytest.raises(PageError, match="tells the reader to run the program again"):
            read_page(_page(tmp_path, once + words + "\n"))
        assert read_page(_page(tmp_path, twice.format(words=words))).snippets[0].runs == 2
    with pytest.raises(PageError, match="no sentence before its second output block"):
        read_page(_page(tmp_path, twice.format(words="It prints the same.")))
    # Words in code are not instructions.
    assert read_page(_page(tmp_path, once + "```bash\n# run it again\n```\n")).snippets


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
        expected = snippet.outputs[run] if snippet.outputs else Output("")
        assert matches(expected, result.stdout), (
            f"{which} printed (declared varying numbers masked as N, TensorFlow's start-up "
            "lines left out):\n"
            + "\n".join(shown_lines(result.stdout, expected.varies))
            + "\n\nbut the page shows:\n"
            + "\n".join(shown_lines(expected.text, expected.varies))
        )


def test_the_readme_lists_every_env_ci_runs() -> None:
    """README "Development" names each env of `tox -m ci` (the `ci` label of tox.ini)."""
    [label] = re.findall(r"^\s+ci = (.*)$", (ROOT / "tox.ini").read_text(encoding="utf-8"), re.M)
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    development = readme[readme.index("## Development") : readme.index("### Releasing")]
    missing = [env for env in label.replace(",", " ").split() if f"`{env}`" not in development]
    assert missing == [], f"README.md, Development, does not name the ci envs {missing}"
