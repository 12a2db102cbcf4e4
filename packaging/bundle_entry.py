"""The frozen bundle's entry point: the `stoker` command (no arguments: the tray).

A windowed build (Stoker.app, Stoker.exe) has no console, so sys.stdout/sys.stderr may be
None; they go to the null device instead of crashing the first print.
"""

import os
import sys

for _name in ("stdout", "stderr"):
    if getattr(sys, _name) is None:
        setattr(sys, _name, open(os.devnull, "w", encoding="utf-8"))

from stoker.cli import main  # noqa: E402  (after the streams exist)

sys.exit(main())
