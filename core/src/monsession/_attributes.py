"""The public modules' attributes that are not plain ones: lazy names and deprecated names.

`lazy_attributes` loads a module's names on first use (no TensorFlow at import).

Deprecations follow docs/stability.md. Each is one `Deprecated` entry of `DEPRECATED`: the old
spelling warns through `Deprecated.warn`, and the API check (`tools/api_manifest.py`) lets a
public name disappear only once it is listed here and its removing release is reached.

Stdlib only: the API check loads this file without installing monsession.
"""

from __future__ import annotations

import dataclasses
import importlib
import re
import sys
import warnings
from collections.abc import Callable, Mapping
from typing import TypeAlias


class MonsessionDeprecationWarning(DeprecationWarning):
    """The base of every deprecation warning monsession gives.

    Each subclass names the removing release (e.g. `RemovedIn2Warning`).
    """


class RemovedIn2Warning(MonsessionDeprecationWarning):
    """Warns about a feature that monsession 2.0 removes."""


_REMOVED_IN = {"2.0": RemovedIn2Warning}


@dataclasses.dataclass(frozen=True)
class Deprecated:
    """A deprecated public name, or a hookspec argument (``"monsession_x(arg)"``).

    Args:
      name: Its public dotted name, e.g. ``"monsession.check_flag"``.
      since: The first release that warns.
      removed_in: The major release that removes it (``"2.0"``); it has a
        warning class in `_REMOVED_IN`.
      instead: What to use instead, as a sentence fragment.
      alias_of: For a moved name, the dotted name of the object it still gives.
    """

    name: str
    since: str
    removed_in: str
    instead: str
    alias_of: str | None = None

    @property
    def category(self) -> type[MonsessionDeprecationWarning]:
        """The warning class of the release that removes it."""
        return _REMOVED_IN[self.removed_in]

    @property
    def message(self) -> str:
        """The warning's text: what is deprecated, since and until when, and what to use."""
        return (
            f"{self.name} is deprecated since monsession {self.since} and will be removed in "
            f"monsession {self.removed_in}: {self.instead}."
        )

    def warn(self, stacklevel: int = 2) -> None:
        """Warns with `message` and `category`, attributed `stacklevel` frames up."""
        warnings.warn(self.message, self.category, stacklevel=stacklevel + 1)


def _moved_to_plugins(name: str) -> Deprecated:
    return Deprecated(
        name=f"monsession.{name}",
        since="0.1.0",
        removed_in="2.0",
        instead=f"use monsession.plugins.{name} (the API for hook-package authors)",
        alias_of=f"monsession.plugins.{name}",
    )


# Names for hook-package authors that moved from `monsession` to
# `monsession.plugins` in 0.1.0; they are not in `monsession.__all__`.
DEPRECATED: tuple[Deprecated, ...] = tuple(
    _moved_to_plugins(name)
    for name in (
        "HOOK_METHOD_NAMES ORDER_CHECKPOINT_SAVER ORDER_OTHER ORDER_STEP_COUNTER "
        "ORDER_SUMMARY_SAVER DefaultHook DirectoryLockHandle DirectoryLockedError "
        "TensorNotFoundError TrainingSettings as_run_context attach_hook_state "
        "check_directory check_flag check_interval check_scalar check_schedule error_cause "
        "event_file_writer hook_overrides lazy_attributes load_hook_state lock_checkpoint_dir "
        "prune_hook_state read_global_step require_global_step resolve_fetch save_hook_state "
        "settle"
    ).split()
)

# The hook state looked up by session, deprecated in 1.1: hooks are handed it.
DEPRECATED += tuple(
    Deprecated(name=f"monsession.plugins.{name}", since="1.1.0", removed_in="2.0", instead=instead)
    for name, instead in (
        (
            "save_hook_state",
            "call save(prefix) on the HookStateWriter that SessionRunHook.use_hook_state "
            "hands the hook",
        ),
        (
            "load_hook_state",
            "use monsession.plugins.HookLifecycle, whose created(session, coord, "
            "restored_from) loads the hooks' state",
        ),
        (
            "attach_hook_state",
            "use monsession.plugins.HookLifecycle, which hands the hooks their state",
        ),
    )
)

_BY_NAME = {entry.name: entry for entry in DEPRECATED}


def deprecated(name: str) -> Deprecated | None:
    """The registry's entry for the public dotted `name`, or `None`."""
    return _BY_NAME.get(name)


def _release(version: str) -> tuple[int, int, int]:
    major, minor, micro = [*(int(part) for part in re.findall(r"\d+", version)[:3]), 0, 0][:3]
    return major, minor, micro


def removable(name: str, version: str) -> Deprecated | None:
    """The entry that lets `name` be gone in release `version`: deprecated, removal reached."""
    entry = _BY_NAME.get(name)
    if entry is None or _release(version) < _release(entry.removed_in):
        return None
    return entry


# --- lazily loaded names ---

Loaded: TypeAlias = object
"""A lazily loaded attribute: a class, a function or a module."""


def lazy_attributes(
    module_name: str, targets: Mapping[str, str]
) -> tuple[Callable[[str], Loaded], Callable[[], list[str]]]:
    """Returns a module's `__getattr__` and `__dir__` for lazily loaded names.

    `targets` maps each name to its module (``f"{module_name}.{name}"``: that
    submodule). A loaded name is stored in the module: later lookups cost nothing.
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
