"""Plugins: the manager, hookspecs, their types, core's own plugin and the CLI."""
