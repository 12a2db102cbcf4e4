"""`stoker bench bundle`: the frozen bundle beside the venv install: size on disk and the
time from starting the process to its tray icon showing.

Each start gets a fresh STOKER_HOME (nothing cached, no model to load), and the clock
stops when the instance answers `status` with `tray_shown: true` over its control
channel, polled every 20 ms; then it is asked to stop. Sides alternate so machine drift
hits both. "first" is each side's first start in this run (the nearest to a cold start
without dropping the OS page cache, which needs root); the median is over all starts.
Needs a display with a tray host (run it under `python -m tests.xvfb_run` on a server).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from stoker.errors import UserError
from stoker.instance.control import request
from stoker.integration.autostart import tray_command

DEFAULT_BUNDLE = {"darwin": "dist/Stoker.app/Contents/MacOS/Stoker",
                  "win32": "dist/Stoker/Stoker.exe"}.get(sys.platform, "dist/stoker/stoker")


def add_arguments(parser) -> None:
    parser.add_argument("--bundle", type=Path, default=Path(DEFAULT_BUNDLE), metavar="PATH",
                        help=f"the frozen executable (default: {DEFAULT_BUNDLE}, what "
                             "packaging/build-bundle.sh makes)")
    parser.add_argument("--runs", type=int, default=3, metavar="N", help="starts of each (3)")
    parser.add_argument("--json", action="store_true", help="print a versioned JSON object")


def folder_bytes(root: Path) -> int:
    total = 0
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            p = os.path.join(dirpath, name)
            if not os.path.islink(p):
                total += os.path.getsize(p)
    return total


def time_to_tray(command: list[str], timeout_s: float = 120.0) -> float:
    """Seconds from spawning `command` (the tray) to `tray_shown: true`; then stop it."""

    with tempfile.TemporaryDirectory(prefix="stoker-bench-bundle-") as home:
        env = dict(os.environ, STOKER_HOME=home)
        run_dir = Path(home) / "data" / "run"
        t0 = time.perf_counter()
        proc = subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            while True:
                elapsed = time.perf_counter() - t0
                if proc.poll() is not None:
                    raise RuntimeError(f"{command[0]} exited ({proc.returncode}) before its tray "
                                       f"showed: {(proc.stderr.read() if proc.stderr else '').strip()[-300:]}")
                if elapsed > timeout_s:
                    raise RuntimeError(f"{command[0]} showed no tray icon within {timeout_s:.0f} s; "
                                       "is there a display with a tray host?")
                answer = request("status", run_dir=run_dir, timeout=2.0)
                if answer and answer.get("ok") and answer["status"].get("tray_shown") is True:
                    break
                time.sleep(0.02)
            request("stop", run_dir=run_dir, timeout=5.0)
            proc.wait(60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            if proc.stderr:
                proc.stderr.close()
    return elapsed


def run(args) -> int:

    if getattr(sys, "frozen", False):
        raise UserError("run `stoker bench bundle` from the venv install (it starts both sides), "
                        "not from the bundle.")
    if args.runs < 1:
        raise UserError("--runs must be at least 1.")
    bundle = args.bundle.resolve()
    if not bundle.is_file():
        raise UserError(f"no bundle at {bundle}; build it with packaging/build-bundle.sh or pass --bundle.")
    sides = {"venv": list(tray_command()), "bundle": [str(bundle), "tray"]}
    times: dict[str, list[float]] = {"venv": [], "bundle": []}
    try:
        for i in range(args.runs):
            for side in (("bundle", "venv") if i % 2 == 0 else ("venv", "bundle")):
                times[side].append(time_to_tray(sides[side]))
    except RuntimeError as exc:
        raise UserError(str(exc)) from None
    bundle_root = bundle.parent if sys.platform != "darwin" else bundle.parents[2]
    sizes = {"bundle": folder_bytes(bundle_root), "venv": folder_bytes(Path(sys.prefix))}
    med = {k: statistics.median(v) for k, v in times.items()}
    if args.json:
        print(json.dumps({"schema": 1, "bench": "bundle", "runs": args.runs,
                          "commands": sides, "bytes": sizes, "start_to_tray_s": times,
                          "first_s": {k: v[0] for k, v in times.items()}, "median_s": med,
                          "ratio_of_medians": med["bundle"] / med["venv"]}, indent=2))
    else:
        print(f"{'':8}{'size':>10}{'first':>9}{'median':>9}  starts to tray icon (ms)")
        for side in ("venv", "bundle"):
            print(f"{side:8}{sizes[side] / 1e6:>8.0f}MB{times[side][0] * 1000:>7.0f}ms"
                  f"{med[side] * 1000:>7.0f}ms  " + " ".join(f"{t * 1000:.0f}" for t in times[side]))
        print(f"bundle/venv: size {sizes['bundle'] / sizes['venv']:.2f}, start to tray "
              f"{med['bundle'] / med['venv']:.2f} (ratio of medians)")
    return 0
