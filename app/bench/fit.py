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
from dataclasses import dataclass

MIB = 1048576
DEFAULT_BUDGET_MIB = 256
SERVE_TIMEOUT_S = 150.0  # a full-context prompt slower than this is not "serving"


def add_arguments(parser) -> None:
    parser.add_argument("--json", action="store_true", help="print a versioned JSON object")
    parser.add_argument("--budget-mib", type=int, default=DEFAULT_BUDGET_MIB,
                        help=f"memory limit for the engine in MiB (default {DEFAULT_BUDGET_MIB}: "
                             "contexts of a few thousand tokens on the demo model, so each "
                             "full-context request takes seconds on 2 cores)")
    parser.add_argument("--max-launches", type=int, default=8,
                        help="real launches for the search, the planned context's included (default 8)")
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
        from app.shell.memory_cgroup import set_memory_limit

        set_memory_limit(self.path, self.version, limit)

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


@dataclass(frozen=True)
class Trial:
    """One real launch under the limit: did it start, and did it serve a full-context request."""

    ctx: int
    serves: bool
    why: str  # the probe's reason: "served N prompt tokens in S s", or how it failed
    peak_bytes: int | None  # the cgroup's highest usage during the launch (None: no cgroup)
    buffers_bytes: int | None  # the engine's own buffer lines (weights + KV + compute + output)
    wall_s: float


def _trial(binary, model, ctx, slots, limit, cgroup=None) -> Trial:
    """Start with warm-up and serve one request whose prompt fills a slot's context: what a
    user calls "it runs". A start alone leaves the compute buffer (and, with --no-warmup,
    more) untouched, so a cgroup admits contexts that die on their first long prompt."""
    from app.shell.memory_probe import run_probe

    settings = dict(ctx=ctx, slots=slots, timeout_s=60, warmup=True, fill_context=True,
                    serve_timeout_s=SERVE_TIMEOUT_S)
    if cgroup is not None:
        cgroup.set_limit(limit)
        _drop_file_cache(model)
        cgroup.reset_peak()
        r = run_probe(cgroup.wrapper, model, **settings)
        peak = cgroup.peak()
    else:
        r = run_probe(binary, model, address_space_limit=limit, **settings)
        peak = None
    ok = bool(r.started and r.served)
    why = r.serve_reason if r.started else (r.report.load_error or r.reason)
    return Trial(ctx, ok, why, peak, r.report.total_bytes if r.report.complete else None, r.wall_s)


def _drop_file_cache(path) -> None:
    """Evict the model file's clean pages from the page cache before a launch.

    A memory cgroup charges a cached page to whoever first read it; pages cached by an
    earlier run (outside the cgroup) would cost the engine nothing, and the first bench
    run showed cgroup peaks below the engine's own buffers. Evicting them makes the engine
    read, and be charged for, the weights it maps, as on a fresh boot.
    """
    import os

    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def largest_serving_ctx(try_ctx, start: int, hi: int, max_launches: int = 8,
                        progress=None) -> tuple[int | None, list[Trial]]:
    """The largest multiple of 256 in [256, hi] for which `try_ctx(ctx) -> Trial` serves.

    Starts at `start` (the planner's context: it is usually close, and its own trial is
    needed anyway), gallops away from it in growing steps until the answer is bracketed,
    then bisects. Monotone by assumption (more context never needs less memory). Stops
    after `max_launches`; the answer is then the largest context seen serving, and the
    bracket left open is reported by the trials.
    """
    trials: list[Trial] = []
    ok_hi: int | None = None  # largest seen serving
    bad_lo: int | None = None  # smallest seen failing

    def probe(units: int) -> bool:
        nonlocal ok_hi, bad_lo
        t = try_ctx(units * 256)
        trials.append(t)
        if progress:
            progress(f"ctx {t.ctx}: {'serves' if t.serves else 'fails'} ({t.why})")
        if t.serves:
            ok_hi = max(ok_hi or 0, units)
        else:
            bad_lo = units if bad_lo is None else min(bad_lo, units)
        return t.serves

    top = max(1, hi // 256)
    u = min(max(1, start // 256), top)
    step = max(1, u // 32)  # ~3 % of the start: the first step tests the 95 % target's neighbourhood
    if probe(u):
        while len(trials) < max_launches and u < top:
            u = min(top, u + step)
            step *= 2
            if not probe(u):
                break
    else:
        while len(trials) < max_launches and u > 1:
            u = max(1, u - step)
            step *= 2
            if probe(u):
                break
    while (len(trials) < max_launches and ok_hi is not None and bad_lo is not None
           and bad_lo - ok_hi > 1):
        probe((ok_hi + bad_lo) // 2)
    return (ok_hi * 256 if ok_hi else None), trials


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
    # The planner keeps its trained-context clamp: the server refuses longer prompts per slot.
    plan = plan_launch(summary, machine, ModelOverrides(slots=slots), policy)
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
    small = _trial(binary, model, 256, args.slots, limit, cgroup)
    if not small.serves or small.buffers_bytes is None:
        raise UserError(f"the engine does not serve even context 256 under {args.budget_mib} MiB "
                        f"({small.why}); give a larger --budget-mib")
    buffers = small.buffers_bytes
    if cgroup is not None:
        # What the engine process holds beyond its buffer lines once it has served a request
        # (binary, libraries, heap, HTTP threads): the planner's only reserve inside the limit.
        overhead = max(0, (small.peak_bytes or 0) - buffers)
    else:
        # Address space beyond the buffers: the smallest limit that serves ctx 256, found by
        # bisection in 16 MiB steps, minus the buffers.
        lo, hi = buffers // (16 * MIB), limit // (16 * MIB)
        while lo < hi:
            mid = (lo + hi) // 2
            if _trial(binary, model, 256, args.slots, mid * 16 * MIB).serves:
                hi = mid
            else:
                lo = mid + 1
        overhead = max(0, hi * 16 * MIB - buffers)
    plan, raw = planned_ctx(summary, limit, args.slots, reserve=overhead)
    planned = plan.ctx if plan else None
    kv_per_token = max(1, summary_kv_per_token(summary))
    top = min(1 << 20, (limit // kv_per_token // 256 + 1) * 256)
    if summary.n_ctx_train:
        # llama-server caps each slot's context at the trained context (a longer prompt is
        # refused with HTTP 400), so nothing above it can serve a full-context request.
        top = min(top, summary.n_ctx_train * args.slots)
    cache: dict[int, Trial] = {}

    def try_ctx(ctx: int) -> Trial:
        if ctx not in cache:
            cache[ctx] = _trial(binary, model, ctx, args.slots, limit, cgroup)
        return cache[ctx]

    best, trials = largest_serving_ctx(try_ctx, planned or top // 2, top, args.max_launches, progress)
    at_plan = cache.get(planned) if planned else None
    planned_serves = at_plan.serves if at_plan else None
    ratio = (planned / best) if (planned and best) else None
    est_total = plan.devices[0].total_bytes if plan else None
    result = {
        "schema": 2, "bench": "fit", "model": str(model), "engine": binary, "slots": args.slots,
        "limit": kind, "budget_bytes": limit,
        "definition": "READY with warm-up, then one /completion whose prompt fills the slot's context "
                      "(ctx/slots - 16 token ids, n_predict 4, cache_prompt false) completes",
        "largest_serving_ctx": best, "launches": len(trials),
        "planned_ctx": planned, "planned_serves": planned_serves, "ratio": ratio,
        "planned_refusal": None if plan else getattr(raw, "reason", str(raw)),
        "engine_buffers_at_256_bytes": buffers, "process_overhead_bytes": overhead,
        "planned_estimate_bytes": est_total,
        "trials": [{"ctx": t.ctx, "serves": t.serves, "why": t.why, "cgroup_peak_bytes": t.peak_bytes,
                    "engine_buffers_bytes": t.buffers_bytes, "wall_s": round(t.wall_s, 1)}
                   for t in sorted(trials, key=lambda t: t.ctx)],
        "target_ratio_met": ratio is not None and ratio >= 0.95 and bool(planned_serves),
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print("| limit | budget | overhead (reserve) | largest ctx that serves a full-context request "
          "| planned ctx | planned/largest | planned serves |")
    print("|---|---|---|---|---|---|---|")
    print(f"| {kind} | {args.budget_mib} MiB | {overhead / MIB:.1f} MiB | {best} ({len(trials)} launches) | "
          f"{planned if planned else 'refused'} | {f'{ratio:.3f}' if ratio else '-'} | "
          f"{'yes' if planned_serves else 'no'} |")
    if not plan:
        print(f"\nplanner: {result['planned_refusal']}")
    print("\n| ctx | serves | engine buffers MiB | cgroup peak MiB | peak - buffers MiB | wall s | why |")
    print("|---|---|---|---|---|---|---|")
    for t in result["trials"]:
        b, p = t["engine_buffers_bytes"], t["cgroup_peak_bytes"]
        print(f"| {t['ctx']} | {'yes' if t['serves'] else 'no'} | {_mib(b)} | {_mib(p)} | "
              f"{_mib(p - b) if (p is not None and b is not None) else '-'} | {t['wall_s']} | {t['why']} |")
    print(f"\nTarget planned >= 95 % of the largest and serving: "
          f"{'met' if result['target_ratio_met'] else 'NOT met'}.")
    if plan:
        print(f"Planner's CPU total at ctx {planned}: {est_total / MIB:.1f} MiB + reserve "
              f"{overhead / MIB:.1f} MiB = {(est_total + overhead) / MIB:.1f} MiB of {args.budget_mib} MiB.")
    print(f"Engine buffers at ctx 256: {buffers / MIB:.1f} MiB; the process's memory beyond them "
          f"after serving ({overhead / MIB:.1f} MiB, measured there) is the planner's reserve inside the limit.")
    return 0


def _mib(b) -> str:
    return "-" if b is None else f"{b / MIB:.1f}"


def summary_kv_per_token(summary) -> int:
    """f16 K+V bytes per token over all layers: only an upper bound for the search."""
    from app.core import memory as mem

    return mem.kv_bytes(summary, ctx=256, slots=1, kv_unified=True, type_k="f16", type_v="f16",
                        ubatch=512, flash_attn=True).total // 256
