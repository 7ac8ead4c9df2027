"""Every hook class, whichever installed distribution provides it.

    from monsession.hooks import StopAtStepHook, SummarySaverHook

Names are resolved on first use through the plugin manager; a class is
imported only when it is asked for, so importing this module never imports
TensorFlow. A name whose family is not installed raises an `ImportError`
naming the distribution to install; an unknown name raises an
`AttributeError` listing the available ones. `dir(monsession.hooks)` lists
every available hook class.
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
