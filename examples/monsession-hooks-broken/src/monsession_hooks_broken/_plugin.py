"""The plugin module of monsession-hooks-broken: its import fails.

It needs a native extension that no distribution ships, as a plugin would
whose optional dependency is not installed. monsession reports the failure
(entry point, distribution, version, error) and goes on without the plugin,
unless ``MONSESSION_STRICT_PLUGINS`` is set.
"""

import monsession_hooks_broken_native  # noqa: F401 - no such module, on purpose

import monsession


@monsession.hookimpl
def monsession_hook_classes() -> list[str]:
    """Never reached: the import above fails first."""
    return ["monsession_hooks_broken_native:NeverLoadedHook"]
