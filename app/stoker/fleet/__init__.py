"""Which engines run: the supervisor thread, its lifecycle and residency decisions, restarts,
quarantine, the snapshots it publishes, the running instance and its control channel."""
