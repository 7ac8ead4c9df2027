"""Loops that drive a monitored session: `Epochs`."""
