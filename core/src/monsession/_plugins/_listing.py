"""What `monsession plugins` lists: the registered plugins, the failed and the blocked ones.

Lazy hook class references are listed by name, never imported: listing
imports no TensorFlow.
"""

from __future__ import annotations

from monsession._plugins import _answers, _calling
from monsession._plugins._plugin_manager import discovery
from monsession._plugins._plugin_types import PluginInfo, PluginListing


def plugin_infos() -> PluginListing:
    """Returns the registered plugins, the failed ones and the blocked ones.

    Lazy hook class references are listed by name, never imported.
    """
    found = discovery()
    classes = dict(
        _calling.answers_by_plugin(found, "monsession_hook_classes", _answers.class_refs)
    )
    others = dict(
        _calling.answers_by_plugin(found, "monsession_other_classes", _answers.other_class_refs)
    )
    arguments = dict(
        _calling.answers_by_plugin(found, "monsession_training_arguments", _answers.argument_names)
    )
    plugins = tuple(
        PluginInfo(
            found.source(name),
            tuple(sorted(class_name for class_name, _ in classes.get(name, ()))),
            tuple(sorted(arguments.get(name, ()))),
            tuple(sorted(class_name for class_name, _ in others.get(name, ()))),
        )
        for name in _calling.plugin_names(found.manager)
    )
    return PluginListing(
        plugins,
        tuple(found.failures),
        tuple(found.blocked),
        found.autoload,
        tuple(found.newer_core),
        tuple(found.older_core),
    )
