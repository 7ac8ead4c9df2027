"""The plugin and hook-package authors' API.

    from monsession import plugins

    plugins.hook_class_entries()["SummarySaverHook"].distribution
    plugins.reset_plugin_manager()  # tests: re-read the environment
    plugins.check_schedule("MyHook", "save_steps", save_steps, "save_secs", save_secs)

What only a package that provides hooks (and its tests) needs:

* the plugin manager: discovery, listing, default hooks and its errors
  (`hook_class_entries`, `plugin_infos`, `default_hooks`,
  `reset_plugin_manager`, ...); `KNOWN_HOOK_FAMILIES` and
  `KNOWN_ARGUMENT_FAMILIES` (install hints);
* what a family's hookimpls return: `DefaultHook`, `TrainingSettings` and
  the `ORDER_*` positions of default hooks;
* the hook contract: `as_run_context`, `hook_overrides`, `HOOK_METHOD_NAMES`,
  `TF_HOOK_METHOD_NAMES` (TensorFlow's five, which every hook has),
  `HookDispatcher`, which calls a list of hooks as a monitored session does,
  and `HookLifecycle`, which takes them through their lifecycle in its
  order (for a driver of hooks outside one, e.g. `HooksCallback` in
  `model.fit`);
* the step a wrapper fuses (`fused_target`, through `monsession_fused_step`
  attributes); the steps a run calls (`steps_called`); `Traces`, which calls
  a `tf.function` through the trace it already has, as the session does;
* argument checks with errors that name the hook: `check_schedule`,
  `check_interval`, `check_flag`, `check_directory`;
* which mode a hook works for: `in_eager_mode` (not `tf.executing_eagerly()`);
* the global step inside hooks: `require_global_step`, `read_global_step`;
  fetches by name: `resolve_fetch`, `check_scalar`, `TensorNotFoundError`;
* files: `event_file_writer`, hook state beside checkpoints
  (`HookStateWriter`, given to a hook by `SessionRunHook.use_hook_state`,
  and `prune_hook_state`; `save_hook_state`, `load_hook_state` and
  `attach_hook_state` are deprecated), the one-chief lock of a checkpoint directory
  (`lock_checkpoint_dir`, `DirectoryLockHandle`, `DirectoryLockedError`),
  `settle` (wait for scheduled steps before a save), `error_cause`;
* a step's per-replica output as one value on the device, by the rule of
  per-replica fetches (`replica_value`);
* background checkpoint writes that every restore waits for
  (`register_writer`, `unregister_writer`, `wait_for_writes`);
* the directory of this worker's own files in a multi-worker job
  (`worker_output_dir`);
* `lazy_attributes`, for a package whose import must not import TensorFlow.

Every name loads on first use (no TensorFlow at import). Test helpers are in
`monsession.testing`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from monsession._attributes import lazy_attributes

# Each module, and the names this module takes from it on first use.
_FROM = {
    "monsession._plugins._plugin_types": "ENV_DISABLE_AUTOLOAD ENV_DISABLED_PLUGINS ENV_STRICT "
    "PluginCallError PluginCallFailure PluginFailure PluginForNewerCore PluginForOlderCore "
    "PluginInfo PluginListing PluginLoadError PluginSource UnknownHookError",
    "monsession._plugins._plugin_manager": "get_plugin_manager",
    "monsession._plugins._families": "KNOWN_ARGUMENT_FAMILIES KNOWN_HOOK_FAMILIES HookClassEntry "
    "default_hooks hook_class_entries plugin_infos reset_plugin_manager "
    "training_argument_owners",
    "monsession._plugins._hookspecs": "ORDER_CHECKPOINT_SAVER ORDER_OTHER ORDER_STEP_COUNTER "
    "ORDER_SUMMARY_SAVER DefaultHook TrainingSettings",
    "monsession._api._types": "HookStateWriter check_directory check_flag check_interval "
    "check_schedule in_eager_mode read_global_step require_global_step",
    "monsession._api._hook_api": "HOOK_METHOD_NAMES TF_HOOK_METHOD_NAMES hook_overrides",
    "monsession._api._run_context": "as_run_context",
    "monsession._api._dispatcher": "HookDispatcher",
    "monsession._session._hook_lifecycle": "HookLifecycle attach_hook_state load_hook_state "
    "prune_hook_state save_hook_state",
    "monsession._fusion._loop": "fused_target replica_value",
    "monsession._backends._eager_calls": "Traces",
    "monsession._backends._eager": "steps_called",
    "monsession._backends._graph_mode": "TensorNotFoundError",
    "monsession._backends._mode": "check_scalar resolve_fetch",
    "monsession._backends._backend": "settle",
    "monsession._durability._files": "DirectoryLockHandle DirectoryLockedError error_cause "
    "event_file_writer lock_checkpoint_dir register_writer unregister_writer wait_for_writes",
    "monsession._distribution._distributed": "worker_output_dir",
    "monsession._attributes": "lazy_attributes",
}
_NAMES = {name: module for module, names in _FROM.items() for name in names.split()}

if TYPE_CHECKING:
    from monsession._api._dispatcher import HookDispatcher
    from monsession._api._hook_api import HOOK_METHOD_NAMES, TF_HOOK_METHOD_NAMES, hook_overrides
    from monsession._api._run_context import as_run_context
    from monsession._api._types import (
        HookStateWriter,
        check_directory,
        check_flag,
        check_interval,
        check_schedule,
        in_eager_mode,
        read_global_step,
        require_global_step,
    )
    from monsession._backends._backend import settle
    from monsession._backends._eager import steps_called
    from monsession._backends._eager_calls import Traces
    from monsession._backends._graph_mode import TensorNotFoundError
    from monsession._backends._mode import check_scalar, resolve_fetch
    from monsession._distribution._distributed import worker_output_dir
    from monsession._durability._files import (
        DirectoryLockedError,
        DirectoryLockHandle,
        error_cause,
        event_file_writer,
        lock_checkpoint_dir,
        register_writer,
        unregister_writer,
        wait_for_writes,
    )
    from monsession._fusion._loop import fused_target, replica_value
    from monsession._plugins._families import (
        KNOWN_ARGUMENT_FAMILIES,
        KNOWN_HOOK_FAMILIES,
        HookClassEntry,
        default_hooks,
        hook_class_entries,
        plugin_infos,
        reset_plugin_manager,
        training_argument_owners,
    )
    from monsession._plugins._hookspecs import (
        ORDER_CHECKPOINT_SAVER,
        ORDER_OTHER,
        ORDER_STEP_COUNTER,
        ORDER_SUMMARY_SAVER,
        DefaultHook,
        TrainingSettings,
    )
    from monsession._plugins._plugin_manager import get_plugin_manager
    from monsession._plugins._plugin_types import (
        ENV_DISABLE_AUTOLOAD,
        ENV_DISABLED_PLUGINS,
        ENV_STRICT,
        PluginCallError,
        PluginCallFailure,
        PluginFailure,
        PluginForNewerCore,
        PluginForOlderCore,
        PluginInfo,
        PluginListing,
        PluginLoadError,
        PluginSource,
        UnknownHookError,
    )
    from monsession._session._hook_lifecycle import (
        HookLifecycle,
        attach_hook_state,
        load_hook_state,
        prune_hook_state,
        save_hook_state,
    )

__getattr__, __dir__ = lazy_attributes(__name__, _NAMES)

__all__ = [
    "ENV_DISABLED_PLUGINS",
    "ENV_DISABLE_AUTOLOAD",
    "ENV_STRICT",
    "HOOK_METHOD_NAMES",
    "KNOWN_ARGUMENT_FAMILIES",
    "KNOWN_HOOK_FAMILIES",
    "ORDER_CHECKPOINT_SAVER",
    "ORDER_OTHER",
    "ORDER_STEP_COUNTER",
    "ORDER_SUMMARY_SAVER",
    "TF_HOOK_METHOD_NAMES",
    "DefaultHook",
    "DirectoryLockHandle",
    "DirectoryLockedError",
    "HookClassEntry",
    "HookDispatcher",
    "HookLifecycle",
    "HookStateWriter",
    "PluginCallError",
    "PluginCallFailure",
    "PluginFailure",
    "PluginForNewerCore",
    "PluginForOlderCore",
    "PluginInfo",
    "PluginListing",
    "PluginLoadError",
    "PluginSource",
    "TensorNotFoundError",
    "Traces",
    "TrainingSettings",
    "UnknownHookError",
    "as_run_context",
    "attach_hook_state",
    "check_directory",
    "check_flag",
    "check_interval",
    "check_scalar",
    "check_schedule",
    "default_hooks",
    "error_cause",
    "event_file_writer",
    "fused_target",
    "get_plugin_manager",
    "hook_class_entries",
    "hook_overrides",
    "in_eager_mode",
    "lazy_attributes",
    "load_hook_state",
    "lock_checkpoint_dir",
    "plugin_infos",
    "prune_hook_state",
    "read_global_step",
    "register_writer",
    "replica_value",
    "require_global_step",
    "reset_plugin_manager",
    "resolve_fetch",
    "save_hook_state",
    "settle",
    "steps_called",
    "training_argument_owners",
    "unregister_writer",
    "wait_for_writes",
    "worker_output_dir",
]
