"""`stoker bench fit`: the context the planner chooses beside the largest that really starts.

Under a memory budget smaller than the machine (RLIMIT_AS on the engine process: portable
and exact, where a memory cgroup would need root and counts page cache), bisect with real
launches of llama-server for the largest `-c` that reaches READY, then ask the planner for
a machine whose RAM is that budget (no OS reserve: the budget is the engine's alone, and
the trained-context clamp is lifted so the planner is free to use all of it). Prints both
and their ratio; the target is planned >= 95 % of the largest and the planned launch
itself starting.

RLIMIT_AS limits address space, not resident memory: the mapped model file, thread stacks
and allocator arenas count although they are not RAM the model uses. The "overhead" line
printed is that gap, measured at the smallest context, so the ratio can be read fairly.
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace

MIB = 1048576


def add_arguments(parser) -> None:
    parser.add_argument("--json", action="store_true", help="print a versioned JSON object")
    parser.add_argument("--budget-mib", type=int, default=1536,
                        help="address-space limit for the engine in MiB (default 1536)")
    parser.add_argument("--model", metavar="PATH", help="model to use (default: the demo model)")
    parser.add_argument("--slots", type=int, default=1)


def _starts(binary, model, ctx, slots, limit) -> bool:
    from app.shell.memory_probe import run_probe

    return run_probe(binary, model, ctx=ctx, slots=slots, address_space_limit=limit,
                     timeout_s=60).started


def largest_starting_ctx(binary, model, slots, limit, hi, progress=None) -> tuple[int | None, int]:
    """Bisect in steps of 256 (the engine pads to 256): the largest ctx that reaches READY."""
    lo_ok, launches = None, 0
    lo, top = 1, hi // 256  # in units of 256 tokens
    while lo <= top:
        mid = (lo + top) // 2
        ok = _starts(binary, model, mid * 256, slots, limit)
        launches += 1
        if progress:
            progress(f"ctx {mid * 256}: {'starts' if ok else 'fails'}")
        if ok:
            lo_ok, lo = mid * 256, mid + 1
        else:
            top = mid - 1
    return lo_ok, launches


def planned_ctx(summary, budget: int, slots: int):
    from app.core.machine import Machine
    from app.core.overrides import ModelOverrides
    from app.core.plan import LaunchPlan
    from app.core.planner import PlanPolicy, plan_launch

    machine = Machine(os="linux", arch="x86_64", ram_total_bytes=budget, ram_available_bytes=budget,
                      physical_cores=2, logical_cores=2, source="bench-fit")
    policy = PlanPolicy(os_reserve_min_bytes=0, os_reserve_fraction=0.0, default_ctx=1 << 20,
                        max_slots=slots)
    # Let the planner go past the trained context, as the bisection does.
    unclamped = replace(summary, n_ctx_train=1 << 20)
    plan = plan_launch(unclamped, machine, ModelOverrides(slots=slots), policy)
    return plan if isinstance(plan, LaunchPlan) else None, plan


def run(args) -> int:
    from app.bench.memory import _engine_binary
    from app.cli import UserError
    from app.shell.gguf_io import load_summary
    from app.shell.memory_probe import run_probe
    from app.shell.paths import stoker_paths
    from pathlib import Path

    binary = _engine_binary()
    model = Path(args.model) if args.model else stoker_paths().models / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if not model.is_file():
        raise UserError(f"{model} is not a file; run `stoker setup` or pass --model PATH")
    if args.budget_mib < 256:
        raise UserError("--budget-mib must be at least 256; the engine alone needs more address space")
    limit = args.budget_mib * MIB
    progress = None if args.json else (lambda s: print(f"  {s}", file=sys.stderr))
    summary = load_summary(model)

    small = run_probe(binary, model, ctx=256, slots=args.slots, address_space_limit=limit)
    if not small.started:
        raise UserError(f"the engine does not start even at context 256 under {args.budget_mib} MiB "
                        f"({small.reason}); give a larger --budget-mib")
    # Upper bound for the search: the budget spent on KV alone.
    per_token = max(1, (small.report.device("CPU").kv_bytes // 256) if small.report.device("CPU") else 1)
    hi = min(1 << 20, (limit // per_token // 256 + 1) * 256)
    best, launches = largest_starting_ctx(binary, model, args.slots, limit, hi, progress)
    plan, raw = planned_ctx(summary, limit, args.slots)
    planned = plan.ctx if plan else None
    planned_starts = _starts(binary, model, planned, args.slots, limit) if planned else None
    ratio = (planned / best) if (planned and best) else None
    result = {
        "schema": 1, "bench": "fit", "model": str(model), "engine": binary, "slots": args.slots,
        "budget_bytes": limit, "largest_starting_ctx": best, "bisection_launches": launches,
        "planned_ctx": planned, "planned_starts": planned_starts, "ratio": ratio,
        "planned_refusal": None if plan else getattr(raw, "reason", str(raw)),
        "engine_buffers_at_256_bytes": small.report.total_bytes,
        "target_ratio_met": ratio is not None and ratio >= 0.95 and bool(planned_starts),
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"| budget (RLIMIT_AS) | largest ctx that starts | planned ctx | planned/largest | planned starts |")
    print("|---|---|---|---|---|")
    print(f"| {args.budget_mib} MiB | {best} ({launches} launches) | {planned if planned else 'refused'} | "
          f"{f'{ratio:.3f}' if ratio else '-'} | {planned_starts} |")
    if not plan:
        print(f"\nplanner: {result['planned_refusal']}")
    print(f"\nTarget planned >= 95 % of the largest and starting: {'met' if result['target_ratio_met'] else 'NOT met'}; "
          f"planned launch starts: {'yes' if planned_starts else 'no'}.")
    print(f"Engine buffers at ctx 256: {small.report.total_bytes / MIB:.1f} MiB; the rest of the "
          f"address-space budget at that size is mapping/stack/arena overhead, not model memory.")
    return 0
