"""Import every module under app/stoker in a fresh interpreter each, so an import cycle that
only bites in one import order (or a module whose imports are broken) fails here rather than
at a user's first `stoker` command. Run: python -m tests.import_every_module"""

from __future__ import annotations

import subprocess
import sys

from tests.import_graph import modules


def main() -> int:
    names = sorted(m for m in modules() if m != "stoker.__main__")  # __main__ runs the CLI
    failed = []
    # One interpreter per module: each starts from an empty sys.modules, so the order the
    # modules are imported in cannot hide a cycle.
    code = "import importlib, sys\nfor name in sys.argv[1:]:\n    importlib.import_module(name)\n"
    for name in names:
        proc = subprocess.run([sys.executable, "-c", code, name], capture_output=True, text=True)
        if proc.returncode != 0:
            failed.append(f"{name}: {proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else proc.returncode}")
    for line in failed:
        print("FAILED", line)
    print(f"imported {len(names) - len(failed)} of {len(names)} modules, each in a fresh interpreter")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
