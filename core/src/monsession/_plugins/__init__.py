"""Plugins: hookspecs and types, discovery, calling, the queries, core's own plugin, the CLI."""
