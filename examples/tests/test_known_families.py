"""Core's table of known families agrees with what the installed families register.

Runs in the `all` env, where every family of this repository is installed:
core names the distribution to install for a missing hook class or
`MonitoredTrainingSession` argument from `KNOWN_HOOK_FAMILIES` and
`KNOWN_ARGUMENT_FAMILIES`, so they must list exactly what each family's
entry point provides.
"""

from __future__ import annotations

import importlib.metadata

from monsession import plugins

FAMILIES = ("checkpoint", "summary", "logging", "debug", "keras")


def _registered() -> tuple[dict[str, str], dict[str, str]]:
    """Hook class and argument names mapped to the distribution that registers them."""
    distributions = {
        name: entry.distribution for name, entry in plugins.hook_class_entries().items()
    }
    classes = {
        name: dist
        for name, dist in distributions.items()
        if dist is not None and dist.startswith("monsession-hooks-")
    }
    sources = {info.source.name: info.source for info in plugins.plugin_infos().plugins}
    arguments = {
        argument: sources[plugin].distribution or plugin
        for argument, plugin in plugins.training_argument_owners().items()
        if plugin != "core"
    }
    return classes, arguments


def test_every_family_of_this_repository_is_installed_and_loaded():
    group = importlib.metadata.entry_points(group="monsession")
    installed = {entry.dist.name for entry in group if entry.dist is not None}
    assert {f"monsession-hooks-{family}" for family in FAMILIES} <= installed
    assert not plugins.plugin_infos().failures


def test_known_hook_classes_are_what_the_families_register():
    classes, _ = _registered()
    ours = {
        name: dist for name, dist in classes.items() if dist in plugins.KNOWN_HOOK_FAMILIES.values()
    }
    assert ours == plugins.KNOWN_HOOK_FAMILIES


def test_known_arguments_are_what_the_families_serve():
    _, arguments = _registered()
    assert arguments == plugins.KNOWN_ARGUMENT_FAMILIES
