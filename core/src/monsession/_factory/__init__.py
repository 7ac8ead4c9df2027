"""`MonitoredTrainingSession`: arguments, settings and the assembled session."""
