"""`stoker bench fit`: the context the planner chooses beside the largest that really starts.

The budget is a memory cgroup around the engine process (v1 `memory.limit_in_bytes`, or v2
`memory.max`; needs root or a delegated cgroup): it limits what the engine really keeps in
RAM, page cache of the mapped model included. Bisect with real launches of llama-server for
the largest `-c` that reaches READY, then ask the planner for a machine whose available RAM
is the limit. Inside a cgroup "the rest of the system" is outside the limit, so the
planner's OS reserve does not apply; what does apply is the engine process's own memory
outside its buffers (binary and libraries, heap, thread stacks). The bench measures that
once, at the smallest context (peak cgroup usage minus the engine's buffer lines), and
hands it to the planner as its reserve (a PlanPolicy override). The trained-context clamp
is lifted so the planner is free to use all of the budget. Prints both contexts, their
ratio and whether the planned launch itself starts; the target is >= 95 % and it starts.

Without a writable cgroup it falls back to RLIMIT_AS, which limits address space, not RAM
(mapped file, thread stacks and allocator arenas count although they are not model memory);
that overhead is measured the same way (the smallest limit at which context 256 starts,
minus its buffers) and subtracted, and the table says which limit was used.
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
    parser.add_argument("--rlimit", action="store_true",
                        help="limit address space (RLIMIT_AS) even when a memory cgroup is writable")


class MemoryCgroup:
    """A memory cgroup of our own, entered by a wrapper script that execs the engine."""

    def __init__(self, path, version: int, wrapper):
        self.path, self.version, self.wrapper = path, version, wrapper

    @classmethod
    def create(cls, binary, tmpdir):
        import os
        from pathlib import Path

        name = f"stoker-bench-fit-{os.getpid()}"
        for root, version in ((Path("/sys/fs/cgroup/memory"), 1), (Path("/sys/fs/cgroup"), 2),
                              (Path("/sys/fs/cgroup/unified"), 2)):
            probe = root / ("memory.limit_in_bytes" if version == 1 else "cgroup.controllers")
            if not probe.exists() or (version == 2 and "memory" not in probe.read_text()):
                continue
            path = root / name
            try:
                path.mkdir(exist_ok=True)
                if version == 2 and not (path / "memory.max").exists():
                    path.rmdir()
                    continue
            except OSError:
                continue
            wrapper = Path(tmpdir) / "engine-in-cgroup.sh"
            wrapper.write_text(f'#!/bin/sh\necho $$ > "{path}/cgroup.procs" || exit 97\n'
                               f'exec "{binary}" "$@"\n')
            wrapper.chmod(0o755)
            return cls(path, version, str(wrapper))
        return None

    def set_limit(self, limit: int) -> None:
        if self.version == 1:
            (self.path / "memory.limit_in_bytes").write_text(str(limit))
            sw = self.path / "memory.memsw.limit_in_bytes"  # no escape into swap
            if sw.exists():
                try:
                    sw.write_text(str(limit))
                except OSError:
                    pass
        else:
            (self.path / "memory.max").write_text(str(limit))
            if (self.path / "memory.swap.max").exists():
                (self.path / "memory.swap.max").write_text("0")

    def reset_peak(self) -> None:
        f = self.path / ("memory.max_usage_in_bytes" if self.version == 1 else "memory.peak")
        try:
            f.write_text("0")
        except OSError:
            pass

    def peak(self) -> int | None:
        f = self.path / ("memory.max_usage_in_bytes" if self.version == 1 else "memory.peak")
        try:
            return int(f.read_text().split()[0])
        except (OSError, ValueError):
            return None

    def remove(self) -> None:
        try:
            (self.path / "memory.force_empty").write_text("0") if self.version == 1 else None
        except OSError:
            pass
        try:
            self.path.rmdir()
        except OSError:
            pass


def _starts(binary, model, ctx, slots, limit, cgroup=None) -> bool:
    from app.shell.memory_probe import run_probe

    if cgroup is not None:
        cgroup.set_limit(limit)
        return run_probe(cgroup.wrapper, model, ctx=ctx, slots=slots, timeout_s=60).started
    return run_probe(binary, model, ctx=ctx, slots=slots, address_space_limit=limit,
                     timeout_s=60).started


def largest_starting_ctx(binary, model, slots, limit, hi, progress=None,
                         cgroup=None) -> tuple[int | None, int]:
    """Bisect in steps of 256 (the engine pads to 256): the largest ctx that reaches READY."""
    lo_ok, launches = None, 0
    lo, top = 1, hi // 256  # in units of 256 tokens
    while lo <= top:
        mid = (lo + top) // 2
        ok = _starts(binary, model, mid * 256, slots, limit, cgroup)
        launches += 1
        if progress:
            progress(f"ctx {mid * 256}: {'starts' if ok else 'fails'}")
        if ok:
            lo_ok, lo = mid * 256, mid + 1
        else:
            top = mid - 1
    return lo_ok, launches


def planned_ctx(summary, budget: int, slots: int, reserve: int = 0):
    from app.core.machine import Machine
    from app.core.overrides import ModelOverrides
    from app.core.plan import LaunchPlan
    from app.core.planner import PlanPolicy, plan_launch

    machine = Machine(os="linux", arch="x86_64", ram_total_bytes=budget, ram_available_bytes=budget,
                      physical_cores=2, logical_cores=2, source="bench-fit")
    # The engine process's own memory outside its buffers is the only reserve inside the limit.
    policy = PlanPolicy(os_reserve_min_bytes=reserve, os_reserve_fraction=0.0, default_ctx=1 << 20,
                        max_slots=slots)
    # Let the planner go past the trained context, as the bisection does.
    unclamped = replace(summary, n_ctx_train=1 << 20)
    plan = plan_launch(unclamped, machine, ModelOverrides(slots=slots), policy)
    return plan if isinstance(plan, LaunchPlan) else None, plan


def run(args) -> int:
    import tempfile
    from pathlib import Path

    from app.bench.memory import _engine_binary
    from app.cli import UserError
    from app.shell.gguf_io import load_summary
    from app.shell.memory_probe import run_probe
    from app.shell.paths import stoker_paths

    binary = _engine_binary()
    model = Path(args.model) if args.model else stoker_paths().models / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if not model.is_file():
        raise UserError(f"{model} is not a file; run `stoker setup` or pass --model PATH")
    if args.budget_mib < 256:
        raise UserError("--budget-mib must be at least 256; the engine alone needs more than that")
    limit = args.budget_mib * MIB
    progress = None if args.json else (lambda s: print(f"  {s}", file=sys.stderr))
    summary = load_summary(model)
    with tempfile.TemporaryDirectory(prefix="stoker-bench-fit-") as tmp:
        cgroup = None if args.rlimit else MemoryCgroup.create(binary, tmp)
        try:
            return _run(args, binary, model, summary, limit, cgroup, progress, run_probe, UserError)
        finally:
            if cgroup is not None:
                cgroup.remove()


def _run(args, binary, model, summary, limit, cgroup, progress, run_probe, UserError) -> int:
    kind = f"memory cgroup v{cgroup.version}" if cgroup else "RLIMIT_AS (no writable memory cgroup)"
    if cgroup is not None:
        cgroup.set_limit(limit)
        cgroup.reset_peak()
        small = run_probe(cgroup.wrapper, model, ctx=256, slots=args.slots)
        peak = cgroup.peak()
    else:
        small = run_probe(binary, model, ctx=256, slots=args.slots, address_space_limit=limit)
        peak = None
    if not small.started:
        raise UserError(f"the engine does not start even at context 256 under {args.budget_mib} MiB "
                        f"({small.reason}); give a larger --budget-mib")
    buffers = small.report.total_bytes or 0
    if cgroup is not None:
        # What the engine process holds beyond its buffer lines: the planner's only reserve.
        overhead = max(0, (peak or 0) - buffers)
    else:
        # Address space beyond the buffers: the smallest limit that starts ctx 256, found by
        # bisection in 16 MiB steps, minus the buffers.
        lo, hi = buffers // (16 * MIB), limit // (16 * MIB)
        while lo < hi:
            mid = (lo + hi) // 2
            if run_probe(binary, model, ctx=256, slots=args.slots,
                         address_space_limit=mid * 16 * MIB).started:
                hi = mid
            else:
                lo = mid + 1
        overhead = max(0, hi * 16 * MIB - buffers)
    per_token = max(1, (small.report.device("CPU").kv_bytes // 256) if small.report.device("CPU") else 1)
    top = min(1 << 20, (limit // per_token // 256 + 1) * 256)
    best, launches = largest_starting_ctx(binary, model, args.slots, limit, top, progress, cgroup)
    plan, raw = planned_ctx(summary, limit, args.slots, reserve=overhead)
    planned = plan.ctx if plan else None
    planned_starts = _starts(binary, model, planned, args.slots, limit, cgroup) if planned else None
    ratio = (planned / best) if (planned and best) else None
    result = {
        "schema": 1, "bench": "fit", "model": str(model), "engine": binary, "slots": args.slots,
        "limit": kind, "budget_bytes": limit, "largest_starting_ctx": best, "bisection_launches": launches,
        "planned_ctx": planned, "planned_starts": planned_starts, "ratio": ratio,
        "planned_refusal": None if plan else getattr(raw, "reason", str(raw)),
        "engine_buffers_at_256_bytes": buffers, "process_overhead_bytes": overhead,
        "target_ratio_met": ratio is not None and ratio >= 0.95 and bool(planned_starts),
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print("| limit | budget | overhead (reserve) | largest ctx that starts | planned ctx | planned/largest "
          "| planned starts |")
    print("|---|---|---|---|---|---|---|")
    print(f"| {kind} | {args.budget_mib} MiB | {overhead / MIB:.0f} MiB | {best} ({launches} launches) | "
          f"{planned if planned else 'refused'} | {f'{ratio:.3f}' if ratio else '-'} | "
          f"{'yes' if planned_starts else 'no'} |")
    if not plan:
        print(f"\nplanner: {result['planned_refusal']}")
    print(f"\nTarget planned >= 95 % of the largest and starting: "
          f"{'met' if result['target_ratio_met'] else 'NOT met'}.")
    print(f"Engine buffers at ctx 256: {buffers / MIB:.1f} MiB; the process's memory beyond them "
          f"({overhead / MIB:.0f} MiB, measured there) is the planner's reserve inside the limit.")
    return 0
