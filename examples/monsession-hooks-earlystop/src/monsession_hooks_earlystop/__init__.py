"""monsession-hooks-earlystop: stop training when a metric stops improving.

An example of a third-party hook package for monsession. Users usually reach
the hook through `monsession.hooks`::

    from monsession.hooks import EarlyStoppingHook

`import monsession_hooks_earlystop` does not import TensorFlow; the hook's
module is imported on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_CLASSES = {"EarlyStoppingHook": "monsession_hooks_earlystop._early_stopping"}

if TYPE_CHECKING:
    from monsession_hooks_earlystop._early_stopping import EarlyStoppingHook


def __getattr__(name: str) -> Any:
    module = _CLASSES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_CLASSES])


__all__ = ["EarlyStoppingHook"]
