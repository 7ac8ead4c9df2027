"""Fusion (eager mode): which runs skip the hooks, and how many steps they run."""
