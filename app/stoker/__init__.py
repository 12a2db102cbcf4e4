"""Stoker: plans, launches and supervises local llama.cpp models from the desktop tray.

The version lives in pyproject.toml only; `stoker --version` reads it through
importlib.metadata (stoker.engines.about_facts).
"""
