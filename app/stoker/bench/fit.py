"""`stoker bench fit`: the context the planner chooses beside the largest that really starts.

The budget is a memory cgroup around the engine process (v1 `memory.limit_in_bytes`, or v2
`memory.max`, swap capped too; needs root or a delegated cgroup). A trial is one real launch
of llama-server under it, and "really starts" means: READY with warm-up, then one request
whose prompt fills the slot's context is served, with at most MAJOR_FAULTS_ALLOWED page
faults read from disk while it runs. Measured on the demo model (256 MiB, 2 cores):
- Probes load with `-lm none` (the old --no-mmap). With the model mapped, the kernel evicts
  the weights' file pages under the limit and the engine re-reads them: it "served" 8,192
  tokens in a 256 MiB group whose fit is ~5,000, at 60-95 s a request. Read into anonymous
  memory, the weights cannot be dropped, so the limit binds.
- The full-context request stays: warm-up leaves the compute buffer (20.6 MiB at 6,144)
  untouched, and READY alone was reached at 6,144 where serving needs ~5,100.
- The fault count: near the limit the engine's own code (binary and libraries, ~16 MiB,
  whose page cache is dropped before each trial like the model's) is evicted and re-read,
  and the request still completes, slower; that is not a fit either.
The planner gets a machine whose RAM is the limit and, as its only reserve, the process's
memory beyond its buffer lines (resident = anonymous + mapped code + the group's kernel
memory, after serving), measured
at context RESERVE_CTX (2,048; measured at 256 it came out 2.2 MiB short of what larger
contexts hold, likely because a 240-token prompt fills less than one 512-token ubatch, and a
planned 6,912 in 300 MiB failed) and again at the planned context. Its trained-context
clamp stays (the server refuses longer prompts per slot), and the table
says when that cap, not the budget, bounds the search. Target: planned >= 95 % of the
largest that starts, and the planned launch starts.

Without a writable cgroup it falls back to RLIMIT_AS, which limits address space, not RAM
(mapped file, thread stacks and allocator arenas count although they are not model memory);
that overhead is measured the same way (the smallest limit at which RESERVE_CTX starts,
minus its buffers) and subtracted, and the table says which limit was used.
"""

from __future__ import annotations

import contextlib
import json
import sys
from dataclasses import dataclass

from stoker.base.overrides import ModelOverrides
from stoker.base.paths import stoker_paths
from stoker.bench.memory import _engine_binary
from stoker.diagnosis.memory_cgroup import set_memory_limit
from stoker.diagnosis.oom_evidence import oom_kill_count
from stoker.engines.memory_probe import run_probe
from stoker.errors import UserError
from stoker.library.gguf_io import load_summary
from stoker.planning import memory as mem
from stoker.planning.machine import Machine
from stoker.planning.plan import LaunchPlan
from stoker.planning.planner import PlanPolicy, plan_launch

MIB = 1048576
DEFAULT_BUDGET_MIB = 256
SERVE_TIMEOUT_S = 150.0  # a full-context prompt slower than this is not "serving"
# Weights read into anonymous memory (the old --no-mmap): a mapped model's pages are file-backed,
# so under a cgroup limit the kernel evicts them and the engine re-reads them from disk; it
# then "serves" far above the budget, from disk. Anonymous pages cannot be dropped (no swap
# escape: the group caps swap too), so serving under the limit means the launch fits in RAM.
LOAD_FLAGS = ("-lm", "none")
# A launch that serves only by re-reading its own code from disk does not fit: more major
# faults than this (4 KiB pages: 1 MiB) during the full-context request fail the trial.
MAJOR_FAULTS_ALLOWED = 256
RESERVE_CTX = 2048  # where the process's memory beyond its buffers is measured (see above)


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

        set_memory_limit(self.path, self.version, limit)

    def reset_peak(self) -> None:
        f = self.path / ("memory.max_usage_in_bytes" if self.version == 1 else "memory.peak")
        with contextlib.suppress(OSError):
            f.write_text("0")

    def peak(self) -> int | None:
        f = self.path / ("memory.max_usage_in_bytes" if self.version == 1 else "memory.peak")
        try:
            return int(f.read_text().split()[0])
        except (OSError, ValueError):
            return None

    def oom_kills(self) -> int | None:

        return oom_kill_count(self.path)

    def _stat(self, key: str) -> int | None:
        try:
            stat = dict(line.split() for line in (self.path / "memory.stat").read_text().splitlines())
            return int(stat[key])
        except (OSError, ValueError, KeyError):
            return None

    def resident(self) -> int | None:
        """What the engine needs in RAM now: anonymous memory (v1 `rss`, v2 `anon`), which the
        kernel cannot drop, plus the file pages it has mapped (its binary and libraries'
        code) and the kernel memory charged to the group. Not the rest of the page cache the
        weights were read through."""
        v1 = self.version == 1
        anon, mapped = self._stat("rss" if v1 else "anon"), self._stat("mapped_file" if v1 else "file_mapped")
        return None if anon is None else anon + (mapped or 0) + (self.kernel() or 0)

    def kernel(self) -> int | None:
        """Kernel memory charged to the group (page tables, stacks, slab, socket buffers): it
        counts against the limit too, and left out it put a planned 6,912 in 300 MiB at the
        edge (served once, evicted its code the next time)."""
        if self.version == 1:
            try:
                return int((self.path / "memory.kmem.usage_in_bytes").read_text())
            except (OSError, ValueError):
                return None
        return self._stat("kernel")

    def major_faults(self) -> int | None:
        """Page faults that read from disk, all processes of the group so far."""
        return self._stat("pgmajfault")

    def remove(self) -> None:
        with contextlib.suppress(OSError):
            (self.path / "memory.force_empty").write_text("0") if self.version == 1 else None
        with contextlib.suppress(OSError):
            self.path.rmdir()


@dataclass(frozen=True)
class Trial:
    """One real launch under the limit: did it start, and did it serve a full-context request."""

    ctx: int
    serves: bool
    why: str  # the probe's reason: "served N prompt tokens in S s", or how it failed
    peak_bytes: int | None  # the cgroup's highest usage during the launch (None: no cgroup)
    buffers_bytes: int | None  # the engine's own buffer lines (weights + KV + compute + output)
    wall_s: float
    anon_bytes: int | None = None  # resident after serving: anonymous + mapped code (None: no cgroup)


def _trial(binary, model, ctx, slots, limit, cgroup=None) -> Trial:
    """Start with warm-up and serve one request whose prompt fills a slot's context: what a
    user calls "it runs". A start alone leaves the compute buffer (and, with --no-warmup,
    more) untouched, so a cgroup admits contexts that die on their first long prompt."""

    settings = dict(ctx=ctx, slots=slots, timeout_s=60, warmup=True, fill_context=True,
                    serve_timeout_s=SERVE_TIMEOUT_S, extra=LOAD_FLAGS)
    anon: list[int | None] = [None]
    faults: list[int | None] = [None, None]
    if cgroup is not None:
        cgroup.set_limit(limit)
        for f in [model, *_engine_files(binary)]:
            _drop_file_cache(f)
        cgroup.reset_peak()

        def at_ready():
            faults[0] = cgroup.major_faults()

        def at_end():
            anon[0], faults[1] = cgroup.resident(), cgroup.major_faults()

        r = run_probe(cgroup.wrapper, model, on_ready=at_ready, before_stop=at_end, **settings)
        peak = cgroup.peak()
    else:
        r = run_probe(binary, model, address_space_limit=limit, **settings)
        peak = None
    why = r.serve_reason if r.started else (r.report.load_error or r.reason)
    ok, note = judge_serving(bool(r.started and r.served), faults[0], faults[1])
    why += note
    if r.started and not r.served and cgroup is not None and r.exit_code is not None:
        why += f" (exit {r.exit_code}; {cgroup.oom_kills() or 0} OOM kills in the group so far)"
    return Trial(ctx, ok, why, peak, r.report.total_bytes if r.report.complete else None, r.wall_s,
                 anon[0] if r.served else None)


def judge_serving(served: bool, faults_at_ready: int | None, faults_after: int | None) -> tuple[bool, str]:
    """(fits, note for the table): served, and without re-reading more than
    MAJOR_FAULTS_ALLOWED pages from disk during the request. Unknown counts (no cgroup)
    leave the served answer as it is."""
    if faults_at_ready is None or faults_after is None:
        return served, ""
    n = faults_after - faults_at_ready
    if served and n > MAJOR_FAULTS_ALLOWED:
        # It answered, but by re-reading evicted pages from disk while serving: not a fit.
        return False, f", but with {n} major page faults (re-read from disk) during it"
    return served, f" ({n} major page faults)" if served else ""


def _engine_files(binary) -> list:
    """The engine binary and the shared libraries beside it (a build's lib folder)."""
    from pathlib import Path

    here = Path(binary).resolve().parent
    return [p for d in (here, here.parent / "lib") if d.is_dir() for p in d.iterdir()
            if p.is_file() and (p.name.startswith("llama-server") or ".so" in p.name)]


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
    small = _trial(binary, model, RESERVE_CTX, args.slots, limit, cgroup)
    if not small.serves or small.buffers_bytes is None:
        raise UserError(f"the engine does not serve even context {RESERVE_CTX} under {args.budget_mib} MiB "
                        f"({small.why}); give a larger --budget-mib")
    buffers = small.buffers_bytes
    if cgroup is not None:
        # What the engine process holds beyond its buffer lines once it has served a request
        # (heap, HTTP threads, the request's tokens): anonymous memory, the part of the group's
        # charge the kernel cannot reclaim (its peak also counts the page cache the weights
        # were read through, which is dropped under pressure).
        overhead = max(0, (small.anon_bytes or 0) - buffers)
    else:
        # Address space beyond the buffers: the smallest limit that serves RESERVE_CTX, found by
        # bisection in 16 MiB steps, minus the buffers.
        lo, hi = buffers // (16 * MIB), limit // (16 * MIB)
        while lo < hi:
            mid = (lo + hi) // 2
            if _trial(binary, model, RESERVE_CTX, args.slots, mid * 16 * MIB).serves:
                hi = mid
            else:
                lo = mid + 1
        overhead = max(0, hi * 16 * MIB - buffers)
    plan, raw = planned_ctx(summary, limit, args.slots, reserve=overhead)
    planned = plan.ctx if plan else None
    cache: dict[int, Trial] = {}

    def try_ctx(ctx: int) -> Trial:
        if ctx not in cache:
            cache[ctx] = _trial(binary, model, ctx, args.slots, limit, cgroup)
        return cache[ctx]

    reserve_first = overhead
    if cgroup is not None and planned:
        # The process's memory beyond its buffers grows with the prompt it serves (~0.5 KiB a
        # token measured: the request's tokens and JSON, the slot's copy), so the overhead at
        # 256 is short near the budget. Measure it again at the planned context (its trial
        # is needed anyway) and plan once more with the larger of the two.
        first = try_ctx(planned)  # the search's first launch; it reports it
        if first.anon_bytes is not None and first.buffers_bytes is not None:
            overhead = max(overhead, first.anon_bytes - first.buffers_bytes)
            if overhead > reserve_first:
                plan, raw = planned_ctx(summary, limit, args.slots, reserve=overhead)
                planned = plan.ctx if plan else None
    kv_per_token = max(1, summary_kv_per_token(summary))
    top = min(1 << 20, (limit // kv_per_token // 256 + 1) * 256)
    if summary.n_ctx_train:
        # llama-server caps each slot's context at the trained context (a longer prompt is
        # refused with HTTP 400), so nothing above it can serve a full-context request.
        top = min(top, summary.n_ctx_train * args.slots)
    cap_binds = bool(summary.n_ctx_train) and top == summary.n_ctx_train * args.slots

    best, trials = largest_serving_ctx(try_ctx, planned or top // 2, top, args.max_launches, progress)
    trials = sorted(cache.values(), key=lambda t: t.ctx)  # the reserve's own trial included
    cap_binds = cap_binds and best == top
    at_plan = cache.get(planned) if planned else None
    planned_serves = at_plan.serves if at_plan else None
    ratio = (planned / best) if (planned and best) else None
    est_total = plan.devices[0].total_bytes if plan else None
    result = {
        "schema": 3, "bench": "fit", "model": str(model), "engine": binary, "slots": args.slots,
        "limit": kind, "budget_bytes": limit,
        "definition": "-lm none; READY with warm-up, then one /completion whose prompt fills the slot's "
                      "context (ctx/slots - 16 token ids, n_predict 4, cache_prompt false) completes "
                      f"with at most {MAJOR_FAULTS_ALLOWED} major page faults in the group",
        "trained_ctx_cap": summary.n_ctx_train * args.slots if summary.n_ctx_train else None,
        "cap_binds": cap_binds, "reserve_ctx": RESERVE_CTX, "reserve_at_reserve_ctx_bytes": reserve_first,
        "largest_serving_ctx": best, "launches": len(trials),
        "planned_ctx": planned, "planned_serves": planned_serves, "ratio": ratio,
        "planned_refusal": None if plan else getattr(raw, "reason", str(raw)),
        "engine_buffers_at_reserve_ctx_bytes": buffers, "process_overhead_bytes": overhead,
        "planned_estimate_bytes": est_total,
        "trials": [{"ctx": t.ctx, "serves": t.serves, "why": t.why, "cgroup_peak_bytes": t.peak_bytes,
                    "resident_bytes": t.anon_bytes, "engine_buffers_bytes": t.buffers_bytes,
                    "wall_s": round(t.wall_s, 1)}
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
    print("\n| ctx | serves | engine buffers MiB | resident after serving MiB | resident - buffers MiB "
          "| cgroup peak MiB | wall s | why |")
    print("|---|---|---|---|---|---|---|---|")
    for t in result["trials"]:
        b, a = t["engine_buffers_bytes"], t["resident_bytes"]
        print(f"| {t['ctx']} | {'yes' if t['serves'] else 'no'} | {_mib(b)} | {_mib(a)} | "
              f"{_mib(a - b) if (a is not None and b is not None) else '-'} | {_mib(t['cgroup_peak_bytes'])} "
              f"| {t['wall_s']} | {t['why']} |")
    if cap_binds:
        print(f"\nThe trained-context cap ({result['trained_ctx_cap']}) bounds the search, not the budget: "
              "the ratio is about that cap.")
    print(f"\nTarget planned >= 95 % of the largest and serving: "
          f"{'met' if result['target_ratio_met'] else 'NOT met'}.")
    if est_total is not None:
        print(f"Planner's CPU total at ctx {planned}: {est_total / MIB:.1f} MiB + reserve "
              f"{overhead / MIB:.1f} MiB = {(est_total + overhead) / MIB:.1f} MiB of {args.budget_mib} MiB.")
    print(f"Engine buffers at ctx {RESERVE_CTX}: {buffers / MIB:.1f} MiB. The process's resident memory beyond its "
          f"buffers after serving ({reserve_first / MIB:.1f} MiB at ctx {RESERVE_CTX}, {overhead / MIB:.1f} MiB "
          f"the larger at the first planned context) is the planner's reserve inside the limit.")
    return 0


def _mib(b) -> str:
    return "-" if b is None else f"{b / MIB:.1f}"


def summary_kv_per_token(summary) -> int:
    """f16 K+V bytes per token over all layers: only an upper bound for the search."""

    return mem.kv_bytes(summary, ctx=256, slots=1, kv_unified=True, type_k="f16", type_v="f16",
                        ubatch=512, flash_attn=True).total // 256
