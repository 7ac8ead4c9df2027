"""A griffe extension for the API reference: a public class shows no private base.

`MonitoredSession(_MonitoredSession)` would render as ``Bases: _MonitoredSession``,
a name the reader cannot import. A private base is replaced by its own
bases (so `ChiefSessionCreator` shows `SessionCreator`), or dropped.
Loaded by mkdocstrings (`extensions` in mkdocs.yml).
"""

from __future__ import annotations

from typing import Any

import griffe


def _is_private(base: Any) -> bool:
    return str(base).rsplit(".", 1)[-1].startswith("_")


def _public_bases(cls: griffe.Class) -> list[Any]:
    """`cls`'s bases, each private one replaced by its own public bases (same module)."""
    bases: list[Any] = []
    for base in cls.bases:
        if not _is_private(base):
            bases.append(base)
            continue
        parent = cls.parent
        private = parent.members.get(str(base)) if parent is not None else None
        if isinstance(private, griffe.Class):
            bases.extend(item for item in _public_bases(private) if item not in bases)
    return bases


class PublicBases(griffe.Extension):
    """Replaces the private bases of every public class."""

    def on_class(self, *, cls: griffe.Class, **kwargs: Any) -> None:
        if not cls.name.startswith("_"):
            cls.bases = _public_bases(cls)
