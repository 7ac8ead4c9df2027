"""Every test starts with a fresh global step and fresh Keras state."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from keras_hooks_testing import fresh_state


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    fresh_state()
    yield
    fresh_state()
