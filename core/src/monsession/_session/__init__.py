"""The monitored sessions: the layers around a backend, creators and scaffold."""
