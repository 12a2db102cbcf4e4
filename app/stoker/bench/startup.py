"""`stoker bench startup`: time from `stoker run` to READY beside bare llama-server, same argv.

Stoker's time runs from an in-process Supervisor start (plan, engine choice, spawn, log
capture, /health polling) to the READY snapshot. The bare time runs from spawning
llama-server with the argv Stoker chose (another free port) to /health 200, polled at the
same interval. Runs alternate so drift in the machine hits both sides alike; one unmeasured
warm-up run first fills the page cache and gives the argv. Target: ratio of medians ≤ 1.05.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import time

from stoker.base.overrides import ModelOverrides
from stoker.engines.health import wait_ready
from stoker.engines.process import clean_engine_env, end_process, free_loopback_port
from stoker.errors import UserError
from stoker.fleet.commands import Shutdown, StartModel
from stoker.fleet.launcher import RealPreparer
from stoker.fleet.snapshot import EngineState
from stoker.fleet.supervisor import STARTING_POLL_S, Supervisor, SupervisorOptions

TARGET_RATIO = 1.05


def add_arguments(parser) -> None:
    parser.add_argument("--runs", type=int, default=5, metavar="N", help="measured runs of each (5)")
    parser.add_argument("--model", metavar="MODEL", help="model to start (default: the demo model)")
    parser.add_argument("--engine", metavar="PATH", help="llama-server binary (default: the best build)")
    parser.add_argument("--ctx", type=int, default=2048, metavar="N", help="context (2048)")
    parser.add_argument("--slots", type=int, default=1, metavar="N", help="slots (1)")
    parser.add_argument("--json", action="store_true", help="print a versioned JSON object")


def _stoker_once(model, engine, overrides, timeout_s: float = 300):

    preparer = RealPreparer(cli_overrides=overrides, engine=engine, remember_last_model=False)
    t0 = time.perf_counter()
    sup = Supervisor(preparer, SupervisorOptions(stop_grace_s=5)).start()
    sup.submit(StartModel(model))
    snap = sup.wait_for(lambda s: s.state in (EngineState.READY, EngineState.FAILED), timeout_s)
    elapsed = time.perf_counter() - t0
    sup.submit(Shutdown())
    sup.join(30)
    if snap is None or snap.state is not EngineState.READY:
        raise RuntimeError(f"Stoker did not reach READY: {snap.last_error if snap else 'timed out'}")
    return elapsed, snap.argv


def _bare_once(argv: tuple[str, ...], timeout_s: float = 300) -> float:

    port = free_loopback_port()
    command = list(argv)
    command[command.index("--port") + 1] = str(port)
    env = clean_engine_env()
    t0 = time.perf_counter()
    proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=env, start_new_session=True)
    try:
        result = wait_ready(f"http://127.0.0.1:{port}", proc, timeout_s, interval_s=STARTING_POLL_S)
        elapsed = time.perf_counter() - t0
    finally:
        end_process(proc)
    if not result.ready:
        raise RuntimeError(f"bare llama-server did not become ready: {result.reason}")
    return elapsed


def run(args) -> int:

    if args.runs < 1:
        raise UserError("--runs must be at least 1.")
    overrides = ModelOverrides(ctx=args.ctx, slots=args.slots)
    try:
        _, argv = _stoker_once(args.model, args.engine, overrides)  # warm-up, and the argv
        stoker_s, bare_s = [], []
        for i in range(args.runs):
            order = ("stoker", "bare") if i % 2 == 0 else ("bare", "stoker")
            for side in order:
                if side == "stoker":
                    stoker_s.append(_stoker_once(args.model, args.engine, overrides)[0])
                else:
                    bare_s.append(_bare_once(argv))
    except RuntimeError as exc:
        raise UserError(str(exc)) from None
    s_med, b_med = statistics.median(stoker_s), statistics.median(bare_s)
    ratio = s_med / b_med
    verdict = "pass" if ratio <= TARGET_RATIO else "fail"
    if args.json:
        print(json.dumps({"schema": 1, "bench": "startup", "runs": args.runs, "argv": list(argv),
                          "stoker_s": stoker_s, "bare_s": bare_s, "stoker_median_s": s_med,
                          "bare_median_s": b_med, "ratio": ratio,
                          "ratio_of_minimums": min(stoker_s) / min(bare_s), "target": TARGET_RATIO,
                          "verdict": verdict}, indent=2))
    else:
        print(f"argv: {' '.join(argv)}")
        print(f"{'':22}{'median':>9}{'min':>9}  runs (ms)")
        for name, times in (("stoker run -> READY", stoker_s), ("bare llama-server", bare_s)):
            print(f"{name:22}{statistics.median(times) * 1000:>7.0f}ms{min(times) * 1000:>7.0f}ms  "
                  + " ".join(f"{t * 1000:.0f}" for t in times))
        print(f"ratio of medians {ratio:.3f} (target <= {TARGET_RATIO}): {verdict}; "
              f"ratio of minimums {min(stoker_s) / min(bare_s):.3f}")
    return 0
