"""What keeps work safe: signals, the directory lock, checkpoint files, hook state, retries."""
