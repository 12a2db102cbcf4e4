"""`stoker bench idle`: what an idle Stoker costs, with one model resident and nobody asking.

Starts `stoker run DEMO --headless --port 0` on a fresh STOKER_HOME (the demo model and the
best engine build of this one), waits for its "ready:" line, lets it settle, then measures
for `--seconds` Stoker's own processes: the main process and the gateway child (the engine
and its watchdog are shown, not counted). Memory is PSS where the system reports it (shared
pages split between the processes that share them), else RSS; CPU is the user + system
time spent in the window as a percentage of one core. Target: ≤ 100 MB together and
≤ 0.3 % of one core.

Side by side in the same run: Stoker as it is (its supervisor wakes on events and
deadlines) and Stoker with the supervisor woken every 0.1 s as it was before
(STOKER_SUPERVISOR_TICK_S=0.1), alternating when --runs is more than 1.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

from stoker.engines.find import discover_engines
from stoker.errors import UserError
from stoker.library.models import resolve_model

TARGET_MB = 100.0
TARGET_CPU_PCT = 0.3
MB = 1000 * 1000
OLD_TICK_S = "0.1"
_READY = re.compile(r"^ready: .* \(pid (\d+)\)")


def add_arguments(parser) -> None:
    parser.add_argument("--seconds", type=float, default=30.0, metavar="S",
                        help="length of each measured window (30)")
    parser.add_argument("--settle", type=float, default=5.0, metavar="S",
                        help="wait this long after READY before measuring (5)")
    parser.add_argument("--runs", type=int, default=1, metavar="N", help="runs of each side (1)")
    parser.add_argument("--no-before", action="store_true",
                        help="measure Stoker as it is only (no fixed-tick side)")
    parser.add_argument("--json", action="store_true", help="print a versioned JSON object")


@dataclass
class ProcessCost:
    role: str  # main | gateway | watchdog | engine
    pid: int
    memory_bytes: int  # PSS where known, else RSS (mean over the window)
    rss_bytes: int
    cpu_s: float  # user + system in the window


@dataclass
class Run:
    side: str  # "now" | "before"
    seconds: float
    memory_kind: str  # "PSS" | "RSS"
    processes: list[ProcessCost]

    def own(self) -> list[ProcessCost]:
        return [p for p in self.processes if p.role in ("main", "gateway")]

    def own_mb(self) -> float:
        return sum(p.memory_bytes for p in self.own()) / MB

    def own_cpu_pct(self) -> float:
        return 100.0 * sum(p.cpu_s for p in self.own()) / self.seconds


def _demo_and_engine() -> tuple[Path, str]:

    try:
        model = resolve_model(None)
    except UserError as exc:
        raise UserError(f"the demo model is needed: {exc}") from None
    usable = [b for b in discover_engines() if b.usable]
    if not usable:
        raise UserError("no usable llama-server build was found; run `stoker setup` first.")
    return model, usable[0].binary


def _roles(main: psutil.Process, engine_pid: int) -> dict[int, str]:
    roles = {main.pid: "main"}
    for child in main.children(recursive=True):
        try:
            cmdline = child.cmdline()
        except psutil.Error:
            continue
        if child.pid == engine_pid:
            roles[child.pid] = "engine"
        elif any(a == "-c" for a in cmdline) and "-I" in cmdline:
            roles[child.pid] = "watchdog"
        else:
            roles[child.pid] = "gateway"
    return roles


def _memory(proc: psutil.Process) -> tuple[int, int, bool]:
    """(PSS or RSS, RSS, whether it is PSS)."""
    try:
        full = proc.memory_full_info()
        pss = getattr(full, "pss", None)
        if pss is not None:
            return pss, full.rss, True
        return full.rss, full.rss, False
    except (psutil.AccessDenied, psutil.ZombieProcess):
        rss = proc.memory_info().rss
        return rss, rss, False


def _cpu(proc: psutil.Process) -> float:
    t = proc.cpu_times()
    return t.user + t.system


def _measure_once(side: str, model: Path, binary: str, seconds: float, settle: float) -> Run:

    with tempfile.TemporaryDirectory(prefix="stoker-bench-idle-") as home:
        env = dict(os.environ, STOKER_HOME=home)
        env.pop("STOKER_SUPERVISOR_TICK_S", None)
        if side == "before":
            env["STOKER_SUPERVISOR_TICK_S"] = OLD_TICK_S
        argv = [sys.executable, "-m", "stoker", "run", str(model), "--headless", "--port", "0",
                "--ctx", "1024", "--slots", "1", "--engine", binary]
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        ready = threading.Event()
        engine: list[int] = []

        def read() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                m = _READY.match(line.strip())
                if m and not ready.is_set():
                    engine.append(int(m.group(1)))
                    ready.set()

        threading.Thread(target=read, daemon=True).start()
        try:
            if not ready.wait(180) or not engine:
                raise UserError("Stoker did not report READY within 180 s; see `stoker logs`.")
            time.sleep(settle)  # the measured window starts once start-up work has ended
            main = psutil.Process(proc.pid)
            roles = _roles(main, engine[0])
            procs = {pid: psutil.Process(pid) for pid in roles}
            cpu0 = {pid: _cpu(p) for pid, p in procs.items()}
            samples: dict[int, list[tuple[int, int, bool]]] = {pid: [] for pid in procs}
            t0 = time.monotonic()
            while time.monotonic() - t0 < seconds:
                for pid, p in procs.items():
                    samples[pid].append(_memory(p))
                time.sleep(min(1.0, max(0.0, seconds - (time.monotonic() - t0))))
            elapsed = time.monotonic() - t0
            cpu1 = {pid: _cpu(p) for pid, p in procs.items()}
        finally:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    costs = [ProcessCost(roles[pid], pid, int(statistics.fmean(m for m, _, _ in samples[pid])),
                         int(statistics.fmean(r for _, r, _ in samples[pid])), cpu1[pid] - cpu0[pid])
             for pid in procs]
    pss = all(s for pid in procs for _, _, s in samples[pid])
    order = {"main": 0, "gateway": 1, "watchdog": 2, "engine": 3}
    return Run(side, elapsed, "PSS" if pss else "RSS", sorted(costs, key=lambda c: order[c.role]))


def _table(runs: list[Run]) -> str:
    lines = []
    for r in runs:
        label = "now (wakes on events and deadlines)" if r.side == "now" else \
            f"before (supervisor woken every {OLD_TICK_S} s)"
        lines.append(f"{label}, {r.seconds:.0f} s window:")
        lines.append(f"  {'process':<10}{'pid':>8}{r.memory_kind + ' MB':>10}{'RSS MB':>9}{'CPU %':>8}")
        for p in r.processes:
            note = "" if p.role in ("main", "gateway") else "  (not counted)"
            lines.append(f"  {p.role:<10}{p.pid:>8}{p.memory_bytes / MB:>10.1f}{p.rss_bytes / MB:>9.1f}"
                         f"{100 * p.cpu_s / r.seconds:>8.2f}{note}")
        lines.append(f"  {'own total':<18}{r.own_mb():>10.1f}{'':>9}{r.own_cpu_pct():>8.2f}")
    now = [r for r in runs if r.side == "now"]
    before = [r for r in runs if r.side == "before"]
    mb = statistics.median(r.own_mb() for r in now)
    cpu = statistics.median(r.own_cpu_pct() for r in now)
    lines.append("")
    lines.append(f"{'':<22}{'measured':>10}{'target':>10}")
    lines.append(f"{'memory (main+gateway)':<22}{mb:>8.1f}MB{TARGET_MB:>8.0f}MB  "
                 + ("ok" if mb <= TARGET_MB else "over"))
    lines.append(f"{'CPU of one core':<22}{cpu:>9.2f}%{TARGET_CPU_PCT:>9.2f}%  "
                 + ("ok" if cpu <= TARGET_CPU_PCT else "over"))
    if before:
        cpu_before = statistics.median(r.own_cpu_pct() for r in before)
        mb_before = statistics.median(r.own_mb() for r in before)
        ratio = f"{cpu / cpu_before:.2f}" if cpu_before > 0 else "n/a"
        lines.append(f"before/now side by side: CPU {cpu_before:.2f}% → {cpu:.2f}% (ratio {ratio}), "
                     f"memory {mb_before:.1f} → {mb:.1f} MB")
    return "\n".join(lines)


def run(args) -> int:

    if args.seconds <= 0 or args.runs < 1:
        raise UserError("--seconds must be positive and --runs at least 1.")
    model, binary = _demo_and_engine()
    runs: list[Run] = []
    for i in range(args.runs):
        sides = ["now"] if args.no_before else (["now", "before"] if i % 2 == 0 else ["before", "now"])
        for side in sides:
            runs.append(_measure_once(side, model, binary, args.seconds, args.settle))
    if args.json:
        print(json.dumps({"schema": 1, "target_mb": TARGET_MB, "target_cpu_pct": TARGET_CPU_PCT,
                          "runs": [{"side": r.side, "seconds": r.seconds, "memory": r.memory_kind,
                                    "own_mb": r.own_mb(), "own_cpu_pct": r.own_cpu_pct(),
                                    "processes": [p.__dict__ for p in r.processes]} for r in runs]},
                         indent=2))
    else:
        print(_table(runs))
    return 0
