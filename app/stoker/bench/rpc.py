"""`stoker bench rpc`: what splitting a model across RPC workers costs, and whether the plan's bytes are real.

Two `stoker worker`-style rpc-servers run on loopback ports (stoker/fleet/rpc_worker.py, with their
allocation log on) and stand in for two machines. The demo model is started twice per round,
alternating so drift in the machine hits both alike: "local" (every layer on this machine)
and "split" (a memory budget too small for the model, so the planner sends layers to RPC0 and
RPC1). Both use the RPC build's llama-server, so the only difference is where the layers run.
Each run decodes the same prompt greedily and the engine's own `timings.predicted_per_second`
is the speed. The ratio is split / local, medians. Beside it: the planner's bytes per worker
device against what each worker's log says it allocated for the engine.

On loopback the network costs only the copies and the round trips per token; between real
machines latency adds to every token, so this ratio is the best case.
"""

from __future__ import annotations

import json
import statistics
import threading
import time
from pathlib import Path
from typing import Any

from stoker.base.overrides import ModelOverrides
from stoker.base.paths import stoker_paths
from stoker.base.rpc_address import RpcWorker
from stoker.engines.probe import reachable
from stoker.engines.process import free_loopback_port
from stoker.engines.rpc import allocated_by_last_client
from stoker.errors import UserError
from stoker.fleet.commands import Shutdown, StartModel
from stoker.fleet.launcher import RealPreparer
from stoker.fleet.rpc_worker import WorkerSupervisor, rpc_llama_server, rpc_server_binary
from stoker.fleet.snapshot import EngineState
from stoker.fleet.supervisor import Supervisor, SupervisorHooks, SupervisorOptions
from stoker.library.models import resolve_model
from stoker.planning.planner import GIB


def add_arguments(parser) -> None:
    parser.add_argument("--runs", type=int, default=3, metavar="N", help="measured runs of each (3)")
    parser.add_argument("--tokens", type=int, default=64, metavar="N", help="tokens decoded per run (64)")
    parser.add_argument("--ctx", type=int, default=2048, metavar="N", help="context (2048)")
    parser.add_argument("--budget-gib", type=float, default=0.1, metavar="GIB",
                        help="this machine's memory budget for the split runs (0.1: too small for the demo alone)")
    parser.add_argument("--threads", type=int, default=1, metavar="N",
                        help="CPU threads of every engine and worker (1: on a shared machine, spinning "
                             "threads of one process would starve the others and decide the ratio)")
    parser.add_argument("--json", action="store_true", help="print a versioned JSON object")


def _start(model: Path, overrides, workers, budget, timeout_s: float = 300):

    launched: list[Any] = []
    preparer = RealPreparer(cli_overrides=overrides, engine=str(rpc_llama_server()), rpc_workers=workers,
                            memory_budget_bytes=budget, remember_last_model=False)
    sup = Supervisor(preparer, SupervisorOptions(stop_grace_s=5), SupervisorHooks(on_launch=launched.append)).start()
    sup.submit(StartModel(str(model)))
    snap = sup.wait_for(lambda s: s.state in (EngineState.READY, EngineState.FAILED), timeout_s)
    if snap is None or snap.state is not EngineState.READY:
        sup.submit(Shutdown())
        sup.join(30)
        raise UserError(f"the engine did not reach READY: {snap.last_error if snap else 'timed out'}")
    return sup, launched[-1]


def _decode_speed(launch, tokens: int) -> float:
    import httpx

    headers = {"Authorization": f"Bearer {launch.engine_key}"} if launch.engine_key else {}
    resp = httpx.post(launch.spec.endpoint + "/v1/chat/completions", headers=headers, timeout=300, json={
        "messages": [{"role": "user", "content": "Write a short story about a lighthouse keeper."}],
        "max_tokens": tokens, "temperature": 0, "ignore_eos": True})
    resp.raise_for_status()
    return float(resp.json()["timings"]["predicted_per_second"])


def _stop(sup) -> None:

    sup.submit(Shutdown())
    sup.join(30)


def run(args) -> int:

    if args.runs < 1 or args.tokens < 1 or args.threads < 1:
        raise UserError("--runs, --tokens and --threads must be 1 or more.")
    binary = rpc_server_binary()
    if binary is None:
        raise UserError("rpc-server is not installed; run `stoker setup --rpc` first.")
    model = resolve_model(None)
    overrides = ModelOverrides(ctx=args.ctx, slots=1, threads=args.threads)
    stop = threading.Event()
    workers, threads = [], []
    for _ in range(2):
        w = WorkerSupervisor(binary, "127.0.0.1", free_loopback_port(), threads=args.threads,
                             log_allocations=True)
        t = threading.Thread(target=w.run_until, args=(stop,), daemon=True)
        t.start()
        workers.append(w)
        threads.append(t)
    endpoints = tuple(RpcWorker("127.0.0.1", w.worker.port) for w in workers)
    try:
        deadline = time.monotonic() + 30
        while not all(reachable(e, 0.3) for e in endpoints):
            if time.monotonic() > deadline:
                raise UserError("the two loopback rpc-servers did not start within 30 s; see "
                                f"{stoker_paths().logs}/rpc-worker-*.log")
            time.sleep(0.1)
        local: list[float] = []
        split: list[float] = []
        compare: list[tuple[str, str, int | None, int | None]] = []
        for i in range(args.runs):
            sup, launch = _start(model, overrides, (), None)
            try:
                local.append(_decode_speed(launch, args.tokens))
            finally:
                _stop(sup)
            sup, launch = _start(model, overrides, endpoints, int(args.budget_gib * GIB))
            try:
                split.append(_decode_speed(launch, args.tokens))
                if i == 0:
                    planned = {d.name: d.total_bytes for d in launch.plan.devices}
                    for n, w in enumerate(workers):
                        log = (stoker_paths().logs / w.log_name).read_text(errors="replace").splitlines()
                        compare.append((f"RPC{n}", w.worker.endpoint, planned.get(f"RPC{n}"),
                                        allocated_by_last_client(log)))
                    layout = [d.what for d in launch.plan.decisions if d.what.startswith("split across")]
            finally:
                _stop(sup)
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    ratio = statistics.median(split) / statistics.median(local)
    if args.json:
        print(json.dumps({"schema": 1, "bench": "rpc", "runs": args.runs, "tokens": args.tokens,
                          "threads": args.threads,
                          "local_tps": local, "split_tps": split, "ratio": round(ratio, 3),
                          "layout": layout,
                          "devices": [{"device": d, "worker": e, "planned_bytes": p, "allocated_bytes": a}
                                      for d, e, p, a in compare]}))
        return 0
    mib = 1024 * 1024
    print(f"decode tokens/s, {args.tokens} tokens, {args.runs} runs each (demo model, ctx {args.ctx}, "
          f"{args.threads} thread{'s' if args.threads != 1 else ''} per process)")
    print(f"  local (this machine only)      median {statistics.median(local):7.1f}   "
          f"runs {', '.join(f'{x:.1f}' for x in local)}")
    print(f"  split (2 loopback RPC workers)  median {statistics.median(split):7.1f}   "
          f"runs {', '.join(f'{x:.1f}' for x in split)}")
    print(f"  ratio split/local: {ratio:.2f}")
    for line in layout:
        print(f"  plan: {line}")
    print("bytes per worker device: planned beside what the worker's log says it allocated")
    for dev, ep, planned_bytes, alloc in compare:
        p = "unknown" if planned_bytes is None else f"{planned_bytes / mib:.1f} MiB"
        a = "unknown" if alloc is None else f"{alloc / mib:.1f} MiB"
        r = f"  (allocated/planned {alloc / planned_bytes:.2f})" if planned_bytes and alloc else ""
        print(f"  {dev} {ep}: planned {p}, allocated {a}{r}")
    return 0
