"""Where a plugin's hook class is resolved: the names `monsession.hooks` offers.

Each plugin answers ``monsession_hook_classes`` (and
``monsession_other_classes``) with classes or lazy references
``"package.module:QualName"``; `hook_class_entries` collects them by class
name, and `resolve_hook_class` imports the one asked for, or says which
distribution to install. Nothing here imports TensorFlow until a lazy
reference is loaded.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib

from monsession._plugins import _answers, _calling
from monsession._plugins._families import KNOWN_HOOK_FAMILIES, NOT_HOOKS, missing_family_message
from monsession._plugins._plugin_manager import discovery
from monsession._plugins._plugin_types import ENV_DISABLED_PLUGINS, PluginSource, UnknownHookError


@dataclasses.dataclass(frozen=True)
class HookClassEntry:
    """A hook class that a plugin provides, reachable from `monsession.hooks`.

    Args:
      name: The class name users import.
      ref: The class, or a lazy reference ``"package.module:QualName"``.
      plugin: The name of the plugin that provides it.
      distribution: The distribution that ships the plugin, if known.
      version: That distribution's version, if known.
    """

    name: str
    ref: type | str
    plugin: str
    distribution: str | None = None
    version: str | None = None

    def load(self) -> type:
        """Returns the class, importing its module if `ref` is lazy.

        Raises:
          ImportError: If the module cannot be imported or lacks the class.
          TypeError: If the reference does not name a class.
        """
        if isinstance(self.ref, type):
            return self.ref
        module_name, _, qualname = self.ref.partition(":")
        module = importlib.import_module(module_name)
        try:
            obj: _answers.Answer = functools.reduce(getattr, qualname.split("."), module)
        except AttributeError as error:
            source = PluginSource(self.plugin, None, self.distribution, self.version)
            raise ImportError(
                f"Hook class reference {self.ref!r} of plugin {source.describe()} does "
                f"not resolve: {error}; upgrade or reinstall the plugin's distribution.",
                name=self.name,
            ) from error
        if not isinstance(obj, type):
            raise TypeError(
                f"Hook class reference {self.ref!r} of plugin '{self.plugin}' names "
                f"{obj!r}, not a class; the plugin must return a class or a "
                "'package.module:ClassName' string."
            )
        return obj


def hook_class_entries() -> dict[str, HookClassEntry]:
    """Returns every hook class the registered plugins provide, by name.

    When two plugins provide the same name, core's wins, then the plugin whose
    name sorts first; a warning names both.

    Returns:
      A dict from class name to `HookClassEntry`.
    """
    found = discovery()
    entries: dict[str, HookClassEntry] = {}
    answers = [
        *_calling.answers_by_plugin(found, "monsession_hook_classes", _answers.class_refs),
        *_calling.answers_by_plugin(found, "monsession_other_classes", _answers.other_class_refs),
    ]
    for plugin, refs in answers:
        source = found.source(plugin)
        for name, ref in refs:
            kept = entries.setdefault(
                name, HookClassEntry(name, ref, plugin, source.distribution, source.version)
            )
            if kept.ref != ref:
                found.warn_once(
                    f"Hook class '{name}' of plugin {source.describe()} is ignored: plugin "
                    f"'{kept.plugin}' already provides it. Set {ENV_DISABLED_PLUGINS}={plugin} "
                    "to silence this warning."
                )
    return entries


def resolve_hook_class(name: str) -> type:
    """Returns the hook class called `name`, whichever plugin provides it.

    Args:
      name: A hook class name, e.g. ``"SummarySaverHook"``.

    Returns:
      The class, imported if its plugin gave a lazy reference.

    Raises:
      ImportError: If a known family provides `name` but is not installed or
        not loaded, or `name` is one of this project's classes that is not a
        hook (`HooksCallback`), or no loaded plugin provides `name` while
        `MONSESSION_DISABLED_PLUGINS` blocks some (which may); the message
        says what to install, change or import instead.
      UnknownHookError: (an `AttributeError`) If no plugin provides `name`;
        the message lists the available names.
    """
    entries = hook_class_entries()
    entry = entries.get(name)
    if entry is not None:
        return entry.load()
    distribution = KNOWN_HOOK_FAMILIES.get(name)
    if distribution is not None:
        raise ImportError(missing_family_message(name, distribution), name=name)
    if name in NOT_HOOKS:
        raise ImportError(f"monsession.hooks has no {name}: it is {NOT_HOOKS[name]}.", name=name)
    available = ", ".join(sorted(entries)) or "none"
    blocked = discovery().blocked
    if blocked:
        # A blocked plugin is never imported, so which names it provides is unknown.
        plugins = ", ".join(source.describe() for source in blocked)
        raise ImportError(
            f"No loaded hook family provides a hook class named '{name}'; "
            f"{ENV_DISABLED_PLUGINS} blocks the plugin(s) {plugins}, which may provide it: "
            f"remove it from that variable to use it. Available: {available}.",
            name=name,
        )
    raise UnknownHookError(
        f"No installed hook family provides a hook class named '{name}'. Available: "
        f"{available}. Run 'monsession plugins' to see the installed families.",
        name=name,
    )
