"""Stoker: plans, launches and supervises local llama.cpp models from the desktop tray."""

__version__ = "0.1.0"
