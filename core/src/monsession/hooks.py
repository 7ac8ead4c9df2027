"""Every hook class, whichever installed distribution provides it.

    from monsession.hooks import StopAtStepHook, SummarySaverHook

A class is imported only when asked for (so no TensorFlow at import); a name
whose family is missing raises an `ImportError` naming the distribution, an
unknown one an `AttributeError` listing the available ones (`dir()`).
"""

from monsession._plugins import _families

_resolved: set[str] = set()


def __getattr__(name: str) -> type:
    if name.startswith("_"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}", name=name)
    cls = _families.resolve_hook_class(name)
    globals()[name] = cls
    _resolved.add(name)
    return cls


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_families.hook_class_entries()))


def _forget_resolved() -> None:
    """Drops the cached classes, so the next access asks the plugin manager."""
    for name in _resolved:
        globals().pop(name, None)
    _resolved.clear()


_families.on_reset(_forget_resolved)
