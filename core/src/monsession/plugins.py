"""The plugin manager's public face: discovery, listing and default hooks.

    from monsession import plugins

    plugins.hook_class_entries()["SummarySaverHook"].distribution
    plugins.reset_plugin_manager()  # tests: re-read the environment

Plugin authors and their tests use these names; everything else of the
plugin system is private. `KNOWN_HOOK_FAMILIES` and `KNOWN_ARGUMENT_FAMILIES`
map the names this project's own families provide to their distributions
(for install hints). Importing this module never imports TensorFlow.
"""

from monsession._plugins._plugin_manager import (
    ENV_DISABLE_AUTOLOAD,
    ENV_DISABLED_PLUGINS,
    ENV_STRICT,
    KNOWN_ARGUMENT_FAMILIES,
    KNOWN_HOOK_FAMILIES,
    HookClassEntry,
    PluginCallError,
    PluginCallFailure,
    PluginFailure,
    PluginInfo,
    PluginListing,
    PluginLoadError,
    PluginSource,
    UnknownHookError,
    default_hooks,
    get_plugin_manager,
    hook_class_entries,
    plugin_infos,
    reset_plugin_manager,
    training_argument_owners,
)

__all__ = [
    "ENV_DISABLED_PLUGINS",
    "ENV_DISABLE_AUTOLOAD",
    "ENV_STRICT",
    "KNOWN_ARGUMENT_FAMILIES",
    "KNOWN_HOOK_FAMILIES",
    "HookClassEntry",
    "PluginCallError",
    "PluginCallFailure",
    "PluginFailure",
    "PluginInfo",
    "PluginListing",
    "PluginLoadError",
    "PluginSource",
    "UnknownHookError",
    "default_hooks",
    "get_plugin_manager",
    "hook_class_entries",
    "plugin_infos",
    "reset_plugin_manager",
    "training_argument_owners",
]
