"""monsession-hooks-earlystop: stop training when a metric stops improving.

An example of a third-party hook package for monsession. Users usually reach
the hook through `monsession.hooks`::

    from monsession.hooks import EarlyStoppingHook

`import monsession_hooks_earlystop` does not import TensorFlow; the hook's
module is imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from monsession.plugins import lazy_attributes

__version__ = "0.1.0"

if TYPE_CHECKING:
    from monsession_hooks_earlystop._early_stopping import EarlyStoppingHook

__getattr__, __dir__ = lazy_attributes(
    __name__, {"EarlyStoppingHook": "monsession_hooks_earlystop._early_stopping"}
)

__all__ = ["EarlyStoppingHook"]
