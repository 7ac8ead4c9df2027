"""The helpers of the multi-process tests: `free_ports` reserves what it returns until the
process exits (nothing else takes a port between the pick and its server's bind, nor while
a server restarts on it), and hard limits cover the waits they wrap."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import distributed_testing
from distributed_testing import free_ports, reserved_elsewhere

TESTS = Path(__file__).resolve().parent


def _in_another_process(code: str) -> object:
    """What `code` (run with the helpers importable) prints as its last line, as JSON."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=TESTS,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return json.loads(done.stdout.splitlines()[-1])


def test_free_ports_are_reserved_against_other_processes_until_this_one_exits() -> None:
    ports = free_ports(3)
    assert len(set(ports)) == 3
    # Below the range the kernel hands out for bind(0) and outgoing connections.
    assert all(port < distributed_testing._ephemeral_low() for port in ports), ports
    seen = _in_another_process(
        f"""
        import json
        from distributed_testing import free_ports, reserved_elsewhere
        ports = {ports!r}
        print(json.dumps([[reserved_elsewhere(port) for port in ports],
                          sorted(set(free_ports(300)) & set(ports))]))
        """
    )
    assert seen == [[True, True, True], []]


def test_a_process_that_exits_releases_its_ports() -> None:
    ports = _in_another_process(
        """
        import json
        from distributed_testing import free_ports
        print(json.dumps(free_ports(2)))
        """
    )
    assert isinstance(ports, list) and len(ports) == 2
    assert [reserved_elsewhere(port) for port in ports] == [False, False]


def test_every_hard_limit_is_the_sum_of_the_waits_it_wraps() -> None:
    """A test's hard limit is `within(*waits)`, never a number set by hand that its waits
    can outlast (cluster_matrix/ has its own limits)."""
    by_hand = [
        path.name
        for path in sorted(TESTS.glob("test_*.py"))
        if "hard_timeout(" in path.read_text() and path.name != Path(__file__).name
    ]
    assert by_hand == []
