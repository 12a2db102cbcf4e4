"""The frozen bundle's entry point: the `stoker` command (no arguments: the tray), and the
gateway process Stoker starts with the bundle's own executable (a bundle has no Python).

A windowed build (Stoker.app, Stoker.exe) has no console, so sys.stdout/sys.stderr may be
None; they go to the null device instead of crashing the first print.
"""

import os
import sys

for _name in ("stdout", "stderr"):
    if getattr(sys, _name) is None:
        setattr(sys, _name, open(os.devnull, "w", encoding="utf-8"))  # noqa: SIM115 - for the process's life

if sys.argv[1:2] == ["--stoker-gateway-process"]:  # shell/gateway_process.GATEWAY_CHILD_FLAG
    from stoker.gateway.child import main as gateway_main

    sys.exit(gateway_main())

from stoker.cli import main  # noqa: E402  (after the streams exist)

sys.exit(main())
