"""A real package index on loopback for the release tests: pypiserver, uploads with twine.

`running` starts ``pypi-server`` on a free port of 127.0.0.1 serving an
empty folder and stops it when its ``with`` block ends, whatever happened in
it; `LocalIndex.upload` publishes files with ``twine upload``, as a release
is published. `pip_environment` points pip at it: the local index first,
this machine's usual indexes (pip's configuration and ``PIP_*`` variables,
as CI has them) as extra indexes for TensorFlow and the other dependencies.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Iterator

DEFAULT_INDEX = "https://pypi.org/simple"
_START_TIMEOUT = 60.0  # seconds for the server to answer its health check


def _free_port() -> int:
    """A port of 127.0.0.1 that nothing listens on (the server binds it just after)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class LocalIndex:
    """A pypiserver on 127.0.0.1 serving `folder`, uploads open (no password).

    Args:
      folder: Where the server keeps the uploaded files (created if missing).
    """

    def __init__(self, folder: pathlib.Path) -> None:
        self.folder = folder
        self.port = 0
        self._server: subprocess.Popen[bytes] | None = None
        self._log = folder.parent / f"{folder.name}-server.log"

    @property
    def url(self) -> str:
        """The server's root: uploads go here."""
        return f"http://127.0.0.1:{self.port}/"

    @property
    def simple_url(self) -> str:
        """The server's simple index: what pip's ``--index-url`` takes."""
        return f"{self.url}simple/"

    def start(self) -> None:
        """Starts the server and waits until it answers its health check.

        Raises:
          RuntimeError: If the server exits or does not answer within a minute.
        """
        self.folder.mkdir(parents=True, exist_ok=True)
        self.port = _free_port()
        command = [
            pathlib.Path(sys.executable).with_name("pypi-server"),
            "run", "--host", "127.0.0.1", "--port", str(self.port),
            "--disable-fallback",  # An unknown name is a 404 here, not a redirect.
            "--authenticate", ".", "--passwords", ".",  # Uploads need no password.
            self.folder,
        ]  # fmt: skip
        with self._log.open("wb") as log:
            self._server = subprocess.Popen(
                [str(part) for part in command], stdout=log, stderr=subprocess.STDOUT
            )
        self._wait_until_up()

    def _wait_until_up(self) -> None:
        deadline = time.monotonic() + _START_TIMEOUT
        while True:
            assert self._server is not None
            if self._server.poll() is not None:
                raise RuntimeError(f"pypi-server exited: {self._log.read_text('utf-8')}")
            with contextlib.suppress(OSError):
                with urllib.request.urlopen(f"{self.url}health", timeout=5) as answer:
                    if answer.status == 200:
                        return
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"pypi-server did not answer on {self.url} within {_START_TIMEOUT:.0f} s: "
                    + self._log.read_text("utf-8")
                )
            time.sleep(0.2)

    def stop(self) -> None:
        """Stops the server (if it runs) and waits for it to exit."""
        if self._server is None:
            return
        self._server.terminate()
        try:
            self._server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._server.kill()
            self._server.wait()
        self._server = None

    def upload(self, files: Iterable[pathlib.Path]) -> subprocess.CompletedProcess[str]:
        """Publishes `files` with ``twine upload``, as a release is published.

        Raises:
          AssertionError: If twine fails; the message holds its output.
        """
        command = [
            sys.executable, "-m", "twine", "upload", "--non-interactive",
            "--repository-url", self.url, "--username", "release", "--password", "unused",
            *map(str, files),
        ]  # fmt: skip
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        assert result.returncode == 0, f"{command}\n{result.stdout}\n{result.stderr}"
        return result

    def names(self) -> set[str]:
        """The project names the index lists."""
        with urllib.request.urlopen(self.simple_url, timeout=10) as answer:
            page = answer.read().decode("utf-8")
        return {line.split(">")[1].split("<")[0] for line in page.splitlines() if "<a " in line}


def _configured(python: pathlib.Path, key: str) -> str | None:
    """`key` (``index-url``, ``extra-index-url``) as pip's configuration sets it, or None.

    ``pip config list`` gives the merged files and ``PIP_*`` variables, one
    ``section.key='value'`` a line; a variable (``:env:``) wins over a file.
    """
    result = subprocess.run(
        [str(python), "-m", "pip", "config", "list"], capture_output=True, text=True, check=True
    )
    found: dict[str, str] = {}
    for line in result.stdout.splitlines():
        name, _, value = line.partition("=")
        section, _, option = name.rpartition(".")
        if option == key:
            found[section] = value.strip().strip("'\"")
    return found.get(":env:") or found.get("install") or found.get("global")


def pip_environment(python: pathlib.Path, index: LocalIndex) -> dict[str, str]:
    """The environment in which `python`'s pip installs by name from `index` first.

    ``PIP_INDEX_URL`` is the local index; ``PIP_EXTRA_INDEX_URL`` is the index
    pip uses otherwise on this machine, then its configured extra indexes,
    so that TensorFlow and the other dependencies come from where they
    usually do. Other settings (find-links, constraints, certificates) stay
    as configured.
    """
    normal = _configured(python, "index-url") or DEFAULT_INDEX
    extras = (_configured(python, "extra-index-url") or "").split()
    env = {key: value for key, value in os.environ.items() if key not in {"PYTHONPATH"}}
    env["PIP_INDEX_URL"] = index.simple_url
    env["PIP_EXTRA_INDEX_URL"] = " ".join([normal, *extras])
    return env


@contextlib.contextmanager
def running(folder: pathlib.Path) -> Iterator[LocalIndex]:
    """A started `LocalIndex` on `folder`, stopped when the block ends, however it ends."""
    index = LocalIndex(folder)
    try:
        index.start()
        yield index
    finally:
        index.stop()
