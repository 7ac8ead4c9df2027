"""ParameterServerStrategy with a ClusterCoordinator: a hook fetching an entry
that is a `RemoteValue` gets its value (fetched when the hook asks)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

CHILD = Path(__file__).resolve().parent / "ps_coordinator_child.py"


def test_hooks_get_the_values_of_remote_values() -> None:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    done = subprocess.run(
        [sys.executable, str(CHILD)], capture_output=True, text=True, timeout=120, env=env
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    # One worker runs the closures in order: closure k leaves weight k, returns 2k.
    assert report["seen"] == [2.0, 4.0, 6.0, 8.0]
    # The caller still gets the RemoteValues: nothing is fetched for it.
    assert report["remote"] == [True] * 4
    assert report["weight"] == 4.0
