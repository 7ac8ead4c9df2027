"""Plugins built for a newer core: hookimpls of hookspecs this core does not declare.

A family built against a later monsession-core may implement a hookspec
that this core does not have yet. pluggy accepts such an implementation and
never calls it; discovery asks here which implementations of a plugin have
no specification, so that the plugin is named (WARNING, or an error in
strict mode) with both versions rather than silently half-working.

Nothing here imports TensorFlow.
"""

from __future__ import annotations

import importlib.metadata
import re

import pluggy

from monsession._plugins._plugin_types import Plugin

_CORE_REQUIREMENT = re.compile(r"^monsession[-_.]core(?![\w.-])\s*(?P<range>[^;]*)", re.I)


def unknown_hookspecs(manager: pluggy.PluginManager, plugin: Plugin) -> tuple[str, ...]:
    """The names of `plugin`'s hookimpls that no hookspec of `manager` declares, sorted."""
    callers = manager.get_hookcallers(plugin) or []
    return tuple(sorted(caller.name for caller in callers if not caller.has_spec()))


def core_requirement(dist: importlib.metadata.Distribution | None) -> str | None:
    """The monsession-core range that `dist` requires, e.g. ``">=0.1,<0.2"``.

    Returns:
      The range as the metadata spells it (``""`` for any version), or `None`
      when the distribution is unknown or does not require monsession-core.
    """
    for requirement in (dist.requires or []) if dist is not None else []:
        match = _CORE_REQUIREMENT.match(requirement.strip())
        if match:
            return match.group("range").strip().strip("()").replace(" ", "")
    return None
