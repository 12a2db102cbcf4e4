"""PySide6 only: renders snapshots and sends commands; never spawns or probes."""
