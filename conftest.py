"""Every test run of the repository: monsession's own deprecation warnings are errors.

tox runs pytest from the repository's top folder, whose `tox.ini` holds the
``[pytest]`` section, so this file applies to every suite. A test that
exercises a deprecation on purpose expects it with `pytest.warns`; any
other use of a deprecated monsession name, by our code or our tests, fails.
Envs without monsession-core installed (docs, site, packaging) need no filter.
"""

from __future__ import annotations

import importlib.util

import pytest


def pytest_configure(config: pytest.Config) -> None:
    if importlib.util.find_spec("monsession") is not None:
        config.addinivalue_line("filterwarnings", "error::monsession.MonsessionDeprecationWarning")
