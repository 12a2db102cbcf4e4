"""Stoker in the operating system: start at login, the launcher entry, whether a window system is reachable."""
