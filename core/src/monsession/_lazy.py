"""Lazy module attributes: names whose modules are imported on first use.

Packages use it so that importing them never imports TensorFlow::

    __getattr__, __dir__ = lazy_attributes(__name__, {"Scaffold": "monsession._session._scaffold"})
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import TypeAlias

Loaded: TypeAlias = object
"""A lazily loaded attribute: a class, a function or a module."""


def lazy_attributes(
    module_name: str, targets: Mapping[str, str]
) -> tuple[Callable[[str], Loaded], Callable[[], list[str]]]:
    """Returns a module's `__getattr__` and `__dir__` for lazily loaded names.

    Args:
      module_name: The `__name__` of the module getting the attributes.
      targets: Each attribute name mapped to the module that defines it. A
        target equal to ``f"{module_name}.{name}"`` is that submodule itself.

    Returns:
      `(__getattr__, __dir__)`; assign both at module level. A loaded name is
      stored in the module, so later lookups cost nothing.
    """

    def module_getattr(name: str) -> Loaded:
        target = targets.get(name)
        if target is None:
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}")
        loaded = importlib.import_module(target)
        value = loaded if target == f"{module_name}.{name}" else getattr(loaded, name)
        setattr(sys.modules[module_name], name, value)
        return value

    def module_dir() -> list[str]:
        return sorted({*vars(sys.modules[module_name]), *targets})

    return module_getattr, module_dir
