"""Choose how to launch one model on one machine, or say why it cannot be done.

`plan_launch` settles, in this order: the speculative drafter (before any memory sums, so
launch and budget agree on what is resident), the memory budget of each device, the
number of slots and the context window (slots are given up before the window is
shrunk), the KV cache types (f16, traded for q8_0 when that keeps a second slot), and
where the layers go. Speed comes first on a discrete GPU: unless the user placed the
layers, every layer (and every routed expert) stays on the card while the weights fit there
with a working window, and the plan pays with slots, then a q8_0 cache (for families that
take it well), then a shorter window down to `min_ctx`. Only weights that do not fit even
then go to RAM: a MoE keeps every layer on the GPU and sends the routed experts of its first
blocks to the CPU; a dense model gets the largest -ngl that fits. Each plan carries its
predicted decode speed (stoker/planning/speed.py), and every choice is kept as a `Decision` a person can
read, the trade included. When nothing fits, the `PlanRefusal` says what was needed, what
was free, and which alternatives were re-planned and would fit.

Pure: the machine, model and overrides come in as values; nothing is read or run here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Protocol, TypedDict

from stoker.base.overrides import ModelOverrides
from stoker.library.gguf_summary import LayerBytes, ModelSummary
from stoker.planning import memory as mem
from stoker.planning import speed
from stoker.planning.machine import Device, Machine
from stoker.planning.measured import MeasuredMemory
from stoker.planning.plan import AnalyticMemory, Decision, DeviceMemory, DrafterChoice, LaunchPlan, PlanRefusal

GIB = mem.GIB
MIB = mem.MIB

DRAFT_FILE_SPEC_TYPES = ("draft-simple", "draft-eagle3", "draft-dflash", "draft-dspark")


@dataclass(frozen=True)
class PlanPolicy:
    """The planner's defaults. Each number has a reason, written beside it."""

    # Long enough for agentic chats and whole source files; clamped to the trained context.
    default_ctx: int = 65536
    # Below 4096 tokens a chat model is barely useful; it is also --fit's own floor.
    min_ctx: int = 4096
    # Host RAM kept for the OS and the user's other programs: at least 2 GiB (a desktop
    # session plus a browser) and 10 % of RAM on bigger machines, where page cache for the
    # mmap'd weights and the engine's own unaccounted allocations grow with the machine.
    os_reserve_min_bytes: int = 2 * GIB
    os_reserve_fraction: float = 0.10
    # Left free on every GPU, as `--fit` does (-fitt default 1024 MiB): drivers, other
    # programs' contexts and fragmentation need it.
    device_margin_bytes: int = 1024 * MIB
    max_slots: int = 4
    # Slots by fast memory (VRAM on a discrete GPU, else the RAM budget): 1 below 12 GiB,
    # 2 below 24 GiB, 3 below 48 GiB, else max_slots (gezel's tiers).
    slot_tiers: tuple[tuple[int, int], ...] = ((12 * GIB, 1), (24 * GIB, 2), (48 * GIB, 3))
    default_kv_type: str = "f16"
    trade_kv_type: str = "q8_0"
    # Families whose answers suffer with a q8_0 cache: gezel keeps Gemma at f16 because q8_0
    # garbled recalled tokens (reference/gezel-behaviours.md §1). For them the window is
    # shortened instead when every layer is to stay on the GPU.
    kv_sensitive_families: tuple[str, ...] = ("gemma",)
    ubatch: int = mem.DEFAULT_UBATCH
    draft_max: int = 8  # --spec-draft-n-max when nobody said (reference §7's supervisor checklist)
    # A window the budget shrinks is the largest multiple of 256 tokens that fits: the engine
    # rounds -c up to 256 cells (per stream) anyway, so a coarser step only leaves memory
    # unused. gezel's whole-KiB step cost up to 1,023 tokens, over 5 % of any window below
    # 20k tokens, which is where a tight budget puts it (measured by `stoker bench fit`).
    ctx_step: int = 256
    # Prompt cache (--cache-ram): the engine's default is the cap; below 64 MiB a cache
    # holds too few prompts to be worth the RAM, so it is turned off (0).
    prompt_cache_max_mib: int = 8192
    prompt_cache_min_mib: int = 64

    def os_reserve(self, ram_total: int) -> int:
        return max(self.os_reserve_min_bytes, int(ram_total * self.os_reserve_fraction))

    def tier_slots(self, fast_bytes: int) -> int:
        for limit, slots in self.slot_tiers:
            if fast_bytes < limit:
                return max(1, min(slots, self.max_slots))
        return self.max_slots


def gib(n: int | float) -> str:
    """A size a person reads at a glance: GiB with one decimal, MiB below 1 GiB."""
    if abs(n) < GIB:
        return f"{n / MIB:.0f} MiB"
    return f"{n / GIB:.1f} GiB"


def _tokens(n: int) -> str:
    return f"{n:,}"


# ---------------------------------------------------------------------------- budgets

@dataclass(frozen=True)
class _Pool:
    name: str
    budget: int
    is_gpu: bool


@dataclass(frozen=True)
class _Budgets:
    pools: tuple[_Pool, ...]
    alias: dict[str, str]  # device name -> pool name (unified memory folds CPU into the GPU pool)
    gpus: tuple[tuple[str, float], ...]  # (name, split proportion) for layer placement
    discrete: bool
    fast_bytes: int
    sentence: str
    # RPC workers' devices among `gpus` (names) and their endpoints, in the engine's order.
    remote: tuple[str, ...] = ()
    endpoints: tuple[str, ...] = ()


def machine_budgets(machine: Machine, policy: PlanPolicy) -> _Budgets:
    reserve = policy.os_reserve(machine.ram_total_bytes)
    ram = machine.ram_available_bytes if machine.ram_available_bytes is not None else machine.ram_total_bytes
    ram_budget = max(0, ram - reserve)
    gpus = [d for d in machine.gpus if (d.free_bytes or d.total_bytes)]
    workers = [d for d in machine.devices if d.backend == "rpc" and (d.free_bytes or d.total_bytes)]
    if workers and not machine.unified_memory:
        return _budgets_with_workers(policy, gpus, workers, ram_budget, reserve)
    if not gpus:
        return _Budgets((_Pool("CPU", ram_budget, False),), {}, (), False, ram_budget,
                        f"CPU only: {gib(ram)} of RAM available, {gib(reserve)} kept for the system, "
                        f"{gib(ram_budget)} for the model")
    if machine.unified_memory:
        g = gpus[0]
        free = g.free_bytes if g.free_bytes is not None else (g.total_bytes or 0)
        budget = max(0, min(ram_budget, free - policy.device_margin_bytes))
        return _Budgets((_Pool(g.name, budget, True),), {"CPU": g.name}, ((g.name, 1.0),), False, budget,
                        f"unified memory: {g.name} shares {gib(ram)} of available RAM; "
                        f"{gib(reserve)} kept for the system, {gib(budget)} for the model")
    pools = [_Pool("CPU", ram_budget, False)]
    splits = []
    for g in gpus:
        free = g.free_bytes if g.free_bytes is not None else (g.total_bytes or 0)
        b = max(0, free - policy.device_margin_bytes)
        pools.append(_Pool(g.name, b, True))
        splits.append((g.name, float(max(b, 1))))
    fast = max(p.budget for p in pools if p.is_gpu)
    gpu_text = ", ".join(f"{p.name} {gib(p.budget)}" for p in pools if p.is_gpu)
    return _Budgets(tuple(pools), {}, tuple(splits), True, fast,
                    f"{gpu_text} after a {policy.device_margin_bytes // MIB} MiB margin; RAM "
                    f"{gib(ram_budget)} after {gib(reserve)} kept for the system")


# ---------------------------------------------------------------------------- RPC workers

def _budgets_with_workers(policy: PlanPolicy, gpus: list[Device], workers: list[Device], ram_budget: int,
                          reserve: int) -> _Budgets:
    """Pools for this machine plus the devices RPC workers lend (stoker/engines/rpc.py).

    The engine orders offload devices RPC first, then this machine's GPUs, and splits the
    offloaded layers in that order by --tensor-split (here: each device's budget, its free
    memory less the margin). Offloading starts from the last layer, so this machine's GPU
    keeps the last layers and the output layer. Slots are sized by this machine's fast
    memory: a worker's memory is behind a network.
    """
    pools = [_Pool("CPU", ram_budget, False)]
    splits = []
    for d in [*workers, *gpus]:
        free = d.free_bytes if d.free_bytes is not None else (d.total_bytes or 0)  # one is known: see the caller
        b = max(0, free - policy.device_margin_bytes)
        pools.append(_Pool(d.name, b, True))
        splits.append((d.name, float(max(b, 1))))
    local = [p for p in pools if p.is_gpu and p.name not in {w.name for w in workers}]
    fast = max(p.budget for p in local) if local else ram_budget
    text = ", ".join(f"{p.name} {gib(p.budget)}" + (f" ({w.description})" if w else "")
                     for p in pools[1:] for w in [next((x for x in workers if x.name == p.name), None)])
    return _Budgets(tuple(pools), {}, tuple(splits), True, fast,
                    f"{text} after a {policy.device_margin_bytes // MIB} MiB margin; RAM "
                    f"{gib(ram_budget)} after {gib(reserve)} kept for the system",
                    remote=tuple(w.name for w in workers), endpoints=tuple(w.description for w in workers))


def _worker_decisions(model: ModelSummary, budgets: _Budgets, r: _Result) -> list[Decision]:
    """What runs where, in words: which layers stay on this machine and which go to which worker."""
    lay = r.layout
    n = model.n_layer_all or 0
    if lay.gpu_layers in (None, 0):
        return [Decision("RPC workers not used", "the whole model fits on this machine, which is faster "
                         "than sending every token's activations over the network")]
    placement = mem.place_layers(model, lay.gpu_layers, gpus=budgets.gpus)
    spans: list[tuple[str, int, int]] = []
    for il, dev in enumerate(placement.layer_devices):
        if spans and spans[-1][0] == dev:
            spans[-1] = (dev, spans[-1][1], il)
        else:
            spans.append((dev, il, il))
    where = dict(zip(budgets.remote, budgets.endpoints, strict=True))

    def name(dev: str) -> str:
        return f"{dev} ({where[dev]})" if dev in where else ("this machine's CPU" if dev == "CPU" else dev)

    text = "; ".join(f"layers {a}-{b} on {name(d)}" if a != b else f"layer {a} on {name(d)}"
                     for d, a, b in spans)
    out_dev = placement.output_device
    local = [d for d, _ in budgets.gpus if d not in where]
    remote_n = sum(1 for d in placement.layer_devices if d in where)
    why = (f"{n - remote_n} of {n} layers fit in this machine's budget; the rest go to the workers in "
           f"proportion to their free memory" if not local else
           f"this machine's GPUs and the workers share the {n} layers in proportion to their free memory")
    out = [Decision(f"split across machines: {text}", why)]
    out.append(Decision(f"output layer on {name(out_dev)}",
                        "kept on this machine's GPU, the last offload device" if out_dev in local else
                        "the engine offloads the output layer first, so it goes with the offloaded "
                        "layers to the last worker" if out_dev in where else "it fits here"))
    return out


# ---------------------------------------------------------------------------- one config

@dataclass(frozen=True)
class _Config:
    slots: int
    ctx: int  # total -c
    kv_unified: bool
    type_k: str
    type_v: str
    flash_attn: str
    swa_full: bool
    ubatch: int
    n_rs_seq: int
    extra_bytes: int  # drafter + mmproj, placed with the first GPU (or CPU)


@dataclass(frozen=True)
class _Layout:
    gpu_layers: int | str | None
    n_cpu_moe: int | None
    cpu_moe: bool


@dataclass(frozen=True)
class _Result:
    config: _Config
    layout: _Layout
    devices: tuple[DeviceMemory, ...]
    fits: bool
    over: tuple[tuple[str, int, int], ...]  # (pool, needed, budget) where it does not fit
    measured: bool
    analytic: tuple[AnalyticMemory, ...] = ()  # per engine device, before calibration


class _Evaluator:
    """Prices configs for one model on one set of budgets, caching per-config KV."""

    def __init__(self, model: ModelSummary, budgets: _Budgets, measured: MeasuredMemory | None, mtp: bool,
                 repack_types: frozenset[str] = frozenset()) -> None:
        self.model = model
        self.repack_types = repack_types
        self.budgets = budgets
        self.measured = measured
        n_layer = model.n_layer or 0
        lbs = list(model.layer_bytes)
        if not mtp:  # nextn (MTP) blocks load only with draft-mtp
            lbs = lbs[:n_layer] + [LayerBytes() for _ in lbs[n_layer:]]
        self.priced = replace(model, layer_bytes=tuple(lbs))
        self.n_all = model.n_layer_all or len(lbs)
        self._kv: dict[tuple[object, ...], mem.KVBreakdown] = {}

    def kv(self, c: _Config) -> mem.KVBreakdown:
        key = (c.slots, c.ctx, c.kv_unified, c.type_k, c.type_v, c.flash_attn, c.swa_full, c.ubatch, c.n_rs_seq)
        if key not in self._kv:
            self._kv[key] = mem.kv_bytes(self.model, ctx=c.ctx, slots=c.slots, kv_unified=c.kv_unified,
                                         type_k=c.type_k, type_v=c.type_v, swa_full=c.swa_full,
                                         ubatch=c.ubatch, flash_attn=c.flash_attn != "off",
                                         n_rs_seq=c.n_rs_seq)
        return self._kv[key]

    def price(self, c: _Config, lay: _Layout) -> _Result:
        b = self.budgets
        placement = mem.place_layers(self.priced, lay.gpu_layers, n_cpu_moe=lay.n_cpu_moe,
                                     cpu_moe=lay.cpu_moe, gpus=b.gpus)
        kv = self.kv(c)
        # Resident view: a repacked tensor's mmap'd original is reclaimable page cache, so
        # the copy replaces it (as the engine's --fit counts), see mem.weights_by_device.
        weights = mem.weights_by_device(self.priced, placement, repack_types=self.repack_types,
                                        count_mapped_original=False)
        kvd = mem.kv_by_device(kv, placement)
        fa = c.flash_attn != "off"
        full_compute = mem.compute_bytes(self.model, n_ctx_seq=kv.n_ctx_seq, ubatch=c.ubatch,
                                         slots=c.slots, flash_attn=fa, n_ctx=c.ctx, n_kv_swa=kv.cells_swa)
        layer_devs = set(placement.layer_devices) | {placement.output_device}
        compute: dict[str, int] = {}
        for dev in layer_devs:
            compute[dev] = full_compute
        if "CPU" not in layer_devs:
            compute["CPU"] = mem.host_compute_bytes(self.model, ubatch=c.ubatch)
        compute["CPU"] = compute.get("CPU", 0) + mem.output_buffer_bytes(self.model, slots=c.slots)
        extra_dev = b.gpus[0][0] if (b.gpus and lay.gpu_layers not in (None, 0)) else "CPU"
        names = ["CPU"] + [g for g, _ in b.gpus]
        parts = {n: [weights.get(n, 0), kvd.get(n, 0), compute.get(n, 0),
                     c.extra_bytes if n == extra_dev else 0] for n in names}
        analytic = tuple(AnalyticMemory(n, *parts[n][:3]) for n in names)
        measured = False
        if self.measured is not None:
            for n in names:
                line = self.measured.lookup(n, c.type_k, c.type_v, c.flash_attn, c.slots,
                                            c.kv_unified, c.ubatch)
                if line is not None:
                    # Calibrate, not replace: the estimate keeps the shape (sliding-window
                    # knees, this layout's weights), the measurements its error on this machine.
                    parts[n][:3] = list(line.calibrated((parts[n][0], parts[n][1], parts[n][2])))
                    measured = True
        # Fold devices into pools (unified memory: the CPU's share lives in the GPU pool).
        pooled: dict[str, list[int]] = {}
        for n, p in parts.items():
            target = b.alias.get(n, n)
            acc = pooled.setdefault(target, [0, 0, 0, 0])
            for i in range(4):
                acc[i] += p[i]
        devices, over = [], []
        for pool in b.pools:
            w, k, cb, o = pooled.get(pool.name, [0, 0, 0, 0])
            dm = DeviceMemory(name=pool.name, budget_bytes=pool.budget, weights_bytes=w, kv_bytes=k,
                              compute_bytes=cb, other_bytes=o)
            devices.append(dm)
            if dm.total_bytes > pool.budget:
                over.append((pool.name, dm.total_bytes, pool.budget))
        return _Result(c, lay, tuple(devices), not over, tuple(over), measured, analytic)

    def placement(self, lay: _Layout) -> mem.Placement:
        return mem.place_layers(self.priced, lay.gpu_layers, n_cpu_moe=lay.n_cpu_moe,
                                cpu_moe=lay.cpu_moe, gpus=self.budgets.gpus)

    def decode_speed(self, r: _Result, bandwidths: dict[str, int | None], context_tokens: int = 0) -> speed.DecodeSpeed:
        """Predicted decode speed of a priced plan (stoker/planning/speed.py), at `context_tokens` filled."""
        return speed.predict_decode(self.priced, self.placement(r.layout), self.kv(r.config), bandwidths,
                                    context_tokens)

    def ram_read_per_token(self, r: _Result) -> int:
        """Bytes of weights a plan reads from host RAM per token (0 when none)."""
        return speed.bytes_read_per_token(self.priced, self.placement(r.layout), None).get("CPU", 0)

    # -- layouts -----------------------------------------------------------------------

    def best_layout(self, c: _Config, pinned: ModelOverrides) -> _Result:
        """The best placement for this config, honouring pinned -ngl / --n-cpu-moe / --cpu-moe."""
        b = self.budgets
        if not b.gpus:
            return self.price(c, _Layout(None, None, False))
        if b.remote and len(b.remote) == len(b.gpus) and pinned.gpu_layers in (None, "auto"):
            return self._fewest_remote_layers(c)
        if not b.discrete:  # unified: the GPU sees all memory, offload everything
            lay = _Layout(pinned.gpu_layers if isinstance(pinned.gpu_layers, int) else "all",
                          pinned.n_cpu_moe, False)
            return self.price(c, lay)
        pin_ngl = pinned.gpu_layers if pinned.gpu_layers not in (None, "auto") else None
        if pin_ngl is not None and pinned.n_cpu_moe is not None:
            return self.price(c, _Layout(pin_ngl, pinned.n_cpu_moe, False))
        if self.model.is_moe and pin_ngl in (None, "all"):
            if pinned.n_cpu_moe is not None:
                return self.price(c, _Layout("all", pinned.n_cpu_moe, False))
            # Pack experts from the last block backwards: the smallest N that fits.
            lo, hi = 0, self.n_all
            first = self.price(c, _Layout("all", None, False))
            if first.fits:
                return first
            last = self.price(c, _Layout("all", self.n_all, False))
            if last.fits:
                while lo < hi:
                    mid = (lo + hi) // 2
                    if self.price(c, _Layout("all", mid, False)).fits:
                        hi = mid
                    else:
                        lo = mid + 1
                return self.price(c, _Layout("all", lo, False))
            if pin_ngl == "all":
                return last
            # Not even the non-expert part fits on the GPU: fall back to partial layers
            # with every expert on the CPU.
            return self._dense_layers(c, cpu_moe=True)
        if pin_ngl is not None:
            return self.price(c, _Layout(pin_ngl, None, False))
        return self._dense_layers(c, cpu_moe=False)

    def _fewest_remote_layers(self, c: _Config) -> _Result:
        """Only workers to offload to: the smallest -ngl that fits, so this machine keeps as
        many layers as its budget holds and the network carries as little as it can."""
        top = self.n_all + 1
        none = self.price(c, _Layout(0, None, False))
        if none.fits:
            return none
        lo, hi = 1, top
        if not self.price(c, _Layout(top, None, False)).fits:
            return self.price(c, _Layout(top, None, False))
        while lo < hi:
            mid = (lo + hi) // 2
            if self.price(c, _Layout(mid, None, False)).fits:
                hi = mid
            else:
                lo = mid + 1
        return self.price(c, _Layout(lo, None, False))

    def _dense_layers(self, c: _Config, cpu_moe: bool) -> _Result:
        """The largest -ngl whose GPU side fits; CPU side checked after."""
        top = self.n_all + 1
        full = self.price(c, _Layout("all", None, cpu_moe))
        if full.fits:
            return full

        def gpu_fits(r: _Result) -> bool:
            return all(name == "CPU" for name, _, _ in r.over)

        lo, hi = 0, top - 1  # largest n in [0, top-1] with the GPU side fitting
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if gpu_fits(self.price(c, _Layout(mid, None, cpu_moe))):
                lo = mid
            else:
                hi = mid - 1
        return self.price(c, _Layout(lo, None, cpu_moe))


# ---------------------------------------------------------------------------- drafter

@dataclass(frozen=True)
class _Spec:
    choice: DrafterChoice
    candidate: ModelSummary | None  # a separate draft file to price
    auto: bool  # chosen by the catalog / caller, not forced by the user
    mtp: bool
    refusal: str | None = None


def _settle_spec(model: ModelSummary, ov: ModelOverrides, draft: ModelSummary | None,
                 broken: frozenset[str], policy: PlanPolicy) -> _Spec:
    """The speculative decision, made before memory: which drafter is meant to be resident."""
    n_max = ov.draft_max or policy.draft_max
    draft_path = ov.draft_model or (draft.path if draft else None)
    st = ov.spec_type
    if st == "none":
        return _Spec(DrafterChoice("none", None, None, "speculative decoding is off, as set for this model"),
                     None, False, False)
    if st == "draft-mtp":
        if model.nextn_layers <= 0:
            return _Spec(DrafterChoice("none", None, None, ""), None, False, False,
                         refusal="spec_type draft-mtp needs a model with its own MTP head, and this "
                                 "GGUF has none; choose draft-simple with a draft model, or none")
        return _Spec(DrafterChoice("forced", "draft-mtp", None,
                                   f"the model's own MTP head drafts ({model.nextn_layers} layer(s)), as set "
                                   f"for this model", draft_max=n_max), None, False, True)
    if st in DRAFT_FILE_SPEC_TYPES:
        if draft is None:
            what = f"the draft model {ov.draft_model} could not be read" if ov.draft_model else \
                "no draft model was given"
            return _Spec(DrafterChoice("none", None, None, ""), None, False, False,
                         refusal=f"spec_type {st} needs a draft model and {what}; set draft_model to a "
                                 f"GGUF file or choose another spec_type")
        return _Spec(DrafterChoice("forced", st, draft_path, f"{st} with {_base(draft_path)}, as set for "
                                   f"this model", draft_max=n_max), draft, False, False)
    if st is not None:  # ngram kinds: no file, no memory
        return _Spec(DrafterChoice("forced", st, None, f"{st} drafting from the prompt, as set for this model",
                                   draft_max=n_max), None, False, False)
    # Nobody pinned a type.
    if model.nextn_layers > 0:
        why = "the model carries its own MTP head, so it drafts for itself (+4-19% decode in gezel's runs)"
        if draft is not None:
            why += f"; {_base(draft.path)} is not used beside it (the engine would load the wrong file for MTP)"
        return _Spec(DrafterChoice("in", "draft-mtp", None, why, draft_max=n_max), None, True, True)
    if draft is not None:
        forced = ov.draft_model is not None
        if not forced and (draft.path in broken or _base(draft.path) in broken):
            return _Spec(DrafterChoice("broken", None, draft.path,
                                       f"{_base(draft.path)} crashed or failed to start with this engine build "
                                       f"before, so the model starts without it"), None, False, False)
        status = "forced" if forced else "in"
        return _Spec(DrafterChoice(status, "draft-simple", draft.path,
                                   f"draft-simple with {_base(draft.path)}" +
                                   (", as set for this model" if forced else ", the drafter chosen for this model"),
                                   draft_max=n_max), draft, not forced, False)
    return _Spec(DrafterChoice("none", None, None, "no drafter is set or known for this model"),
                 None, False, False)


def _base(path: str | None) -> str:
    return (path or "").replace("\\", "/").rsplit("/", 1)[-1]


# ---------------------------------------------------------------------------- the plan

def plan_launch(model: ModelSummary, machine: Machine, overrides: ModelOverrides | None = None,
                policy: PlanPolicy = PlanPolicy(), *, draft: ModelSummary | None = None,
                mmproj: ModelSummary | None = None, measured: MeasuredMemory | None = None,
                broken_drafters: frozenset[str] = frozenset()) -> LaunchPlan | PlanRefusal:
    """Plan one llama-server launch of `model` on `machine`, or refuse with what would fit.

    `draft`: the drafter's summary (the catalog's choice, or the user's `draft_model`).
    `measured`: a `core.measured.MeasuredMemory` (anything with its `lookup`); a measured
    line calibrates the analytic estimate for its device and the plan says so.
    `broken_drafters`: draft paths (or file names) known to break this engine build.
    """
    return _plan(model, machine, overrides or ModelOverrides(), policy, draft, mmproj, measured,
                 frozenset(broken_drafters), suggest=True)


def _plan(model: ModelSummary, machine: Machine, ov: ModelOverrides, policy: PlanPolicy, draft: ModelSummary | None,
          mmproj: ModelSummary | None, measured: MeasuredMemory | None, broken_drafters: frozenset[str], *,
          suggest: bool) -> LaunchPlan | PlanRefusal:
    """The steps of `plan_launch`, in its order; each decides one thing and says why."""
    unplannable = _unplannable(model, ov)
    if unplannable:
        return PlanRefusal(model.path, unplannable, None, None, (), ())
    spec = _settle_spec(model, ov, draft, broken_drafters, policy)
    if spec.refusal:
        return PlanRefusal(model.path, spec.refusal, None, None, (), ())
    budgets = machine_budgets(machine, policy)
    decisions = [Decision("memory budget", budgets.sentence)]
    settings, notes = _settle_settings(model, ov, policy, budgets)
    decisions.extend(notes)
    ladder = _Ladder(model, ov, policy, budgets, settings, mmproj, speed.device_bandwidths(machine),
                     _Evaluator(model, budgets, measured, spec.mtp, mem.repacked_types(machine.arch)))
    spec, settled = _leave_out_costly_drafter(ladder, spec, ladder.settle(spec))
    decisions.extend(settled.notes)
    if settled.best is None:
        return _refusal(model, machine, ov, policy, draft, mmproj, measured, broken_drafters,
                        settled.attempt, decisions, spec, suggest)
    return _launch_plan(ladder, spec, settled.best, decisions)


def _is_mla(model: ModelSummary) -> bool:
    return model.mla is not None and bool(model.mla.kv_lora_rank)


def _unplannable(model: ModelSummary, ov: ModelOverrides) -> str | None:
    """Why this file, with these overrides, cannot be planned at all; None when it can."""
    if model.is_vision_projector:
        return (f"{_base(model.path)} is a vision projector (mmproj), not a language model; "
                f"plan the model it belongs to and give this file as its projector")
    if not model.n_layer or not model.layer_bytes:
        return (f"{_base(model.path)} does not say how many layers it has, so its memory cannot "
                f"be planned; check that the file is a complete GGUF model")
    if _is_mla(model) and ov.kv_type_k and ov.kv_type_v and ov.kv_type_k != ov.kv_type_v:
        return (f"this MLA model caches K only, so K and V cache types must be equal "
                f"(kv_type_k {ov.kv_type_k}, kv_type_v {ov.kv_type_v}); set one kv_type")
    return None


# ---------------------------------------------------------------------------- shared settings

@dataclass(frozen=True)
class _Settings:
    """What every config of one plan shares, settled from the overrides before the search."""

    unified: bool  # one KV cache shared by the slots (--kv-unified)
    flash: str
    swa_full: bool
    ubatch: int
    n_train: int  # the trained context (the default where the file does not say)
    type_k: str
    type_v: str
    cheap_kv: str | None  # the type a resident plan may trade the cache down to; None: not this model
    keep_layers: bool  # speed first: every layer stays on the GPU while the weights fit there


def _settle_settings(model: ModelSummary, ov: ModelOverrides, policy: PlanPolicy,
                     budgets: _Budgets) -> tuple[_Settings, tuple[Decision, ...]]:
    """The settings the search does not vary, with the overrides it leaves unused, and why."""
    notes: list[Decision] = []
    has_swa = bool(model.n_swa) and any(model.swa_layers)
    if ov.swa_full and not has_swa:
        notes.append(Decision("--swa-full left off", "the model has no sliding-window layers, so the "
                              "engine would ignore it"))
    if not budgets.gpus and (ov.gpu_layers not in (None, "auto") or ov.n_cpu_moe is not None):
        notes.append(Decision("GPU layer settings not used", "this machine has no GPU the engine can "
                              "use, so -ngl / --n-cpu-moe would change nothing"))
    ubatch = ov.ubatch or policy.ubatch
    if ov.batch and ubatch > ov.batch:
        ubatch = ov.batch
    type_k, type_v, cheap_kv = _kv_types(model, ov, policy)
    return _Settings(unified=bool(ov.kv_unified) if ov.kv_unified is not None else False,
                     flash=ov.flash_attn or "auto", swa_full=bool(ov.swa_full) and has_swa, ubatch=ubatch,
                     n_train=model.n_ctx_train or policy.default_ctx, type_k=type_k, type_v=type_v,
                     cheap_kv=cheap_kv, keep_layers=_keeps_layers(budgets, ov)), tuple(notes)


def _kv_types(model: ModelSummary, ov: ModelOverrides, policy: PlanPolicy) -> tuple[str, str, str | None]:
    """(K type, V type, the cheaper type a resident plan may trade to, or None).

    An MLA model caches K only, so its V follows K. The trade is the planner's own: never
    against a type the user set, nor for a family whose answers suffer with it."""
    type_k = ov.kv_type_k or policy.default_kv_type
    type_v = ov.kv_type_v or (type_k if _is_mla(model) else policy.default_kv_type)
    cheap_kv = (policy.trade_kv_type if ov.kv_type_k is None and ov.kv_type_v is None
                and takes_cheap_kv(model, policy) and (type_k, type_v) != (policy.trade_kv_type,) * 2
                else None)
    return type_k, type_v, cheap_kv


def _keeps_layers(budgets: _Budgets, ov: ModelOverrides) -> bool:
    """Whether only plans with every layer on the GPU count, while the weights fit there.

    Speed first: on a discrete GPU, unless the user placed the layers, the plan keeps every
    layer on the card and pays in context and KV precision (a layer in RAM is read at a
    tenth of the card's bandwidth on every token, see stoker/planning/speed.py).
    Not with RPC workers: their devices are behind a network, and keeping layers on this
    machine is the point there (_fewest_remote_layers)."""
    return (budgets.discrete and bool(budgets.gpus) and ov.gpu_layers in (None, "auto")
            and ov.n_cpu_moe is None and not budgets.remote)


# ---------------------------------------------------------------------------- the ladder

@dataclass(frozen=True)
class _Settled:
    """What a search settled: the plan that fits (None when none does), the decisions that
    explain it, and the attempt a refusal names (the smallest that was tried)."""

    best: _Result | None
    notes: tuple[Decision, ...]
    attempt: _Result


class _Fit(Protocol):
    def __call__(self, slots: int, ctx: int, tk: str, tv: str, spec: _Spec) -> _Result: ...


@dataclass(frozen=True)
class _Ladder:
    """The search over slots, window and KV type for one model on one machine's budgets."""

    model: ModelSummary
    ov: ModelOverrides
    policy: PlanPolicy
    budgets: _Budgets
    settings: _Settings
    mmproj: ModelSummary | None
    bandwidths: dict[str, int | None]
    ev: _Evaluator

    def extra_bytes(self, spec: _Spec, ctx_per_slot: int, slots: int) -> int:
        """The drafter (when it is resident) and the projector, placed beside the model."""
        total = 0
        if spec.candidate is not None and spec.choice.status in ("in", "forced"):
            total += mem.drafter_bytes(spec.candidate, ctx_per_slot=ctx_per_slot, slots=slots)
        if self.mmproj is not None:
            total += mem.mmproj_bytes(self.mmproj)
        return total

    def config(self, slots: int, ctx: int, tk: str, tv: str, spec: _Spec) -> _Config:
        s = self.settings
        per_slot = ctx if s.unified else ctx // slots
        n_rs = (spec.choice.draft_max or 0) if (spec.choice.spec_type in mem.RS_SEQ_SPEC_TYPES) else 0
        return _Config(slots, ctx, s.unified, tk, tv, s.flash, s.swa_full, s.ubatch, n_rs,
                       self.extra_bytes(spec, per_slot, slots))

    def fit_any(self, slots: int, ctx: int, tk: str, tv: str, spec: _Spec) -> _Result:
        """Fits with the best placement of the layers, some in RAM if need be."""
        return self.ev.best_layout(self.config(slots, ctx, tk, tv, spec), self.ov)

    def fit_resident(self, slots: int, ctx: int, tk: str, tv: str, spec: _Spec) -> _Result:
        """Fits only with every layer and every expert in graphics memory."""
        return self.ev.price(self.config(slots, ctx, tk, tv, spec), _Layout("all", None, False))

    def settle(self, spec: _Spec) -> _Settled:
        """Every layer on the GPU when the weights fit there with a working window; else the
        ladder that moves layers (or experts) to the CPU, saying why."""
        if not self.settings.keep_layers:
            return self.search(spec, resident=False)
        kept = self.search(spec, resident=True)
        if kept.best is not None:
            free = self.search(spec, resident=False)
            traded = _trade_decision(self.model, self.ev, free.best, kept.best, self.bandwidths)
            return replace(kept, notes=kept.notes + ((traded,) if traded else ()))
        free = self.search(spec, resident=False)
        if free.best is not None and not _fully_on_gpu(free.best):
            ov, policy, cheap_kv = self.ov, self.policy, self.settings.cheap_kv
            floor_ctx = ov.ctx or min(policy.min_ctx, min(policy.default_ctx, self.settings.n_train))
            free = replace(free, notes=free.notes + (Decision(
                "layers in RAM", f"the weights ({gib(self.model.weights_bytes)}) do not fit in graphics memory "
                f"even with a {_tokens(floor_ctx)}-token window"
                + (f" and a {cheap_kv} cache" if cheap_kv else "")
                + ", so part of the model runs from system RAM"),))
        return free

    def search(self, spec: _Spec, resident: bool) -> _Settled:
        """The ladder: slots are given up first, then (`resident`, where the family takes it
        well) the KV type, then the window is shrunk at the smallest slot count.

        `resident`: only plans with every layer on the GPU count as fitting.
        """
        fit: _Fit = self.fit_resident if resident else self.fit_any
        slot_options = self.slot_options()
        target, floor = self.window()
        by_slots = self.give_up_slots(fit, slot_options, target, spec)
        if by_slots.best is not None:
            return by_slots
        s = self.settings
        shrink_k, shrink_v = s.type_k, s.type_v
        if resident and s.cheap_kv:
            # A cheaper cache before a shorter window, where the model family takes it well.
            for n in slot_options:
                r = fit(n, self.total(n, target), s.cheap_kv, s.cheap_kv, spec)
                if r.fits:
                    return _Settled(r, (), r)
            shrink_k = shrink_v = s.cheap_kv
        if floor < target:
            return self.shrink_window(fit, resident, slot_options[-1], target, floor, shrink_k, shrink_v, spec)
        return _Settled(None, (), by_slots.attempt)

    def slot_options(self) -> list[int]:
        """The slot counts to try, most first: the user's, as many as an explicit window
        gives min_ctx each, or the memory tier's down to one."""
        ov, policy = self.ov, self.policy
        tier = policy.tier_slots(self.budgets.fast_bytes)
        if ov.slots:
            return [ov.slots]
        if ov.ctx:
            # An explicit total context: as many slots as keep min_ctx each, up to the tier.
            return [max(1, min(tier, ov.ctx // min(policy.min_ctx, ov.ctx)))]
        return list(range(tier, 0, -1))

    def window(self) -> tuple[int, int]:
        """(the window wanted per slot, the smallest it may shrink to)."""
        ov, policy = self.ov, self.policy
        if ov.ctx:
            return ov.ctx, ov.ctx  # an explicit -c is never shrunk
        target = min(policy.default_ctx, self.settings.n_train)
        return target, min(policy.min_ctx, target)

    def total(self, n: int, per_slot: int) -> int:
        """The -c for `n` slots of `per_slot` tokens: one window for a unified cache or an explicit -c."""
        return per_slot if (self.ov.ctx or self.settings.unified) else per_slot * n

    def give_up_slots(self, fit: _Fit, slot_options: list[int], target: int, spec: _Spec) -> _Settled:
        """The most slots that fit beside the full window; when only one does, f16 is traded
        for q8_0 if that keeps a second (never against the user's types). The attempt of a
        ladder where none fits is the last count tried."""
        ov, policy, s = self.ov, self.policy, self.settings
        last = None
        for n in slot_options:
            r = fit(n, self.total(n, target), s.type_k, s.type_v, spec)
            last = r
            if not r.fits:
                continue
            notes = []
            if n < slot_options[0]:
                notes.append(Decision(f"{n} slot{'s' if n > 1 else ''}",
                                      f"{slot_options[0]} slots do not fit beside a {_tokens(target)}-token "
                                      f"window; slots are given up before the window is shrunk"))
            if (n == 1 and len(slot_options) > 1 and ov.kv_type_k is None and ov.kv_type_v is None
                    and s.type_k == "f16" and s.type_v == "f16"):
                for m in slot_options:
                    if m < 2:
                        break
                    alt = fit(m, self.total(m, target), policy.trade_kv_type, policy.trade_kv_type, spec)
                    if alt.fits:
                        notes.append(Decision(f"KV cache {policy.trade_kv_type}",
                                              f"with an f16 cache only one slot fits a {_tokens(target)}-token "
                                              f"window; {policy.trade_kv_type} keeps {m} slots"))
                        return _Settled(alt, tuple(notes), alt)
            return _Settled(r, tuple(notes), r)
        assert last is not None  # slot_options always holds at least one count
        return _Settled(None, (), last)

    def shrink_window(self, fit: _Fit, resident: bool, n: int, target: int, floor: int, tk: str, tv: str,
                      spec: _Spec) -> _Settled:
        """The largest window at `n` slots, in steps of ctx_step per slot, down to `floor`.

        The search runs over total windows (what -c gets). Every layer on the GPU is worth a
        smaller window per slot: the resident floor is a min_ctx window in all, shared by the
        slots the user asked for, the same "working window" the free plan's "layers in RAM"
        decision names. The free ladder keeps min_ctx per slot.
        """
        k = self.total(n, 1)  # slots sharing the total window: n, or 1 for a unified or explicit -c
        lo_total = floor if resident else self.total(n, floor)
        lo_ok = fit(n, lo_total, tk, tv, spec)
        if not lo_ok.fits:
            return _Settled(None, (), lo_ok)
        step = self.policy.ctx_step * k
        lo, hi = lo_total, self.total(n, target)  # lo fits, hi does not
        while hi - lo > step:
            mid = ((lo + hi) // 2 // step) * step
            if mid <= lo:
                break
            if fit(n, mid, tk, tv, spec).fits:
                lo = mid
            else:
                hi = mid
        r = fit(n, lo, tk, tv, spec)
        lo //= k  # per slot, as the decision names it
        why_fits = "keeps every layer on the GPU" if resident else "fits"
        return _Settled(r, (Decision(f"context {_tokens(lo)}",
                                     f"{_tokens(target)} tokens do not fit with {n} slot{'s' if n > 1 else ''}"
                                     + (" and every layer on the GPU" if resident else "")
                                     + f"; {_tokens(lo)} is the largest window that {why_fits}"),), r)


# ---------------------------------------------------------------------------- drafter cost

def _leave_out_costly_drafter(ladder: _Ladder, spec: _Spec, settled: _Settled) -> tuple[_Spec, _Settled]:
    """A drafter nobody forced must not cost the target its window, its KV precision or,
    on a discrete GPU, its full residency in graphics memory: then the plan without it wins."""
    if not (spec.auto and spec.candidate is not None):
        return spec, settled
    bare = ladder.settle(_Spec(DrafterChoice("left-out", None, spec.candidate.path, ""), None, False, False))
    reason = _drafter_cost(ladder, settled, bare)
    if not reason:
        return spec, settled
    return _Spec(DrafterChoice("left-out", None, spec.candidate.path,
                               f"leaving the speculative drafter out; {reason}"), None, False, False), bare


def _drafter_cost(ladder: _Ladder, with_drafter: _Settled, bare: _Settled) -> str | None:
    """What the drafter costs the target, beside the plan without it; None when nothing."""
    best, best_bare = with_drafter.best, bare.best
    if best_bare is None:
        return None
    if best is None:
        attempt = with_drafter.attempt
        return (f"beside it the model does not fit at all "
                f"(it needs {gib(_need(attempt))}, {gib(_avail(attempt))} is free)")
    unified = ladder.settings.unified
    if (best.config.ctx // (1 if unified else best.config.slots)
            < best_bare.config.ctx // (1 if unified else best_bare.config.slots)
            or best.config.slots < best_bare.config.slots):
        return (f"beside it the context would shrink to {_tokens(best.config.ctx)} tokens from "
                f"{_tokens(best_bare.config.ctx)}")
    if (best.config.type_k, best.config.type_v) != (best_bare.config.type_k, best_bare.config.type_v):
        return (f"beside it the KV cache would drop to {best.config.type_k} from "
                f"{best_bare.config.type_k}")
    if ladder.budgets.discrete and _fully_on_gpu(best_bare) and not _fully_on_gpu(best):
        gpu = [d for d in best.devices if d.name != "CPU"][0]
        need = ladder.ev.price(best.config, _Layout("all", None, False))
        need_gpu = [d for d in need.devices if d.name == gpu.name][0]
        return (f"beside it the model needs {gib(need_gpu.total_bytes)} of graphics memory and "
                f"{gib(gpu.budget_bytes)} is available")
    return None


# ---------------------------------------------------------------------------- the launch

def _launch_plan(ladder: _Ladder, spec: _Spec, best: _Result, decisions: list[Decision]) -> LaunchPlan:
    """The plan that fits, with its decisions, predicted speed, prompt cache and drafter."""
    model, ov, policy, budgets = ladder.model, ladder.ov, ladder.policy, ladder.budgets
    c, lay = best.config, best.layout
    decisions.extend(_describe(model, budgets, best, ov, policy, ladder.settings.n_train,
                               resident=ladder.settings.keep_layers))
    decode = ladder.ev.decode_speed(best, ladder.bandwidths)
    decisions.append(Decision(f"predicted decode: {speed.speed_text(decode)}", speed.reads_text(decode)))
    cache_ram = prompt_cache_mib(best.devices, budgets.alias.get("CPU", "CPU"), policy)
    decisions.append(Decision(f"prompt cache {cache_ram} MiB",
                              "half of the host memory the plan leaves free, at most the engine's "
                              f"{policy.prompt_cache_max_mib} MiB" if cache_ram else
                              "the plan leaves too little host memory free for a prompt cache"))
    decisions.append(Decision(f"drafter: {spec.choice.status}", spec.choice.reason))
    drafter = spec.choice
    if ov.spec_sampling and drafter.status in ("in", "forced"):
        drafter = replace(drafter, sampling=ov.spec_sampling)
    if spec.candidate is not None and drafter.status in ("in", "forced"):
        drafter = replace(drafter, resident_bytes=mem.drafter_bytes(
            spec.candidate, ctx_per_slot=c.ctx if ladder.settings.unified else c.ctx // c.slots, slots=c.slots))
    mmproj = ladder.mmproj
    return LaunchPlan(
        model_path=model.path, ctx=c.ctx, slots=c.slots, kv_unified=c.kv_unified,
        kv_type_k=c.type_k, kv_type_v=c.type_v, flash_attn=c.flash_attn,
        gpu_layers=lay.gpu_layers, n_cpu_moe=lay.n_cpu_moe if lay.n_cpu_moe else None,
        cpu_moe=lay.cpu_moe, swa_full=c.swa_full, drafter=drafter, devices=best.devices,
        decisions=tuple(decisions), estimate_source="measured" if best.measured else "estimated",
        threads=ov.threads, batch=ov.batch, ubatch=ov.ubatch,
        mmproj_path=mmproj.path if mmproj else None, extra_args=ov.extra_args,
        cache_ram_mib=cache_ram, analytic_devices=best.analytic, decode_speed=decode,
        **_worker_args(budgets, lay))


class _WorkerArgs(TypedDict, total=False):
    rpc_endpoints: tuple[str, ...]
    tensor_split: tuple[int, ...]


def _worker_args(budgets: _Budgets, lay: _Layout) -> _WorkerArgs:
    """--rpc and --tensor-split for a plan that offloads to RPC workers; nothing otherwise."""
    if not budgets.remote or lay.gpu_layers in (None, 0):
        return {}
    return {"rpc_endpoints": budgets.endpoints,
            "tensor_split": tuple(max(1, int(p // MIB)) for _, p in budgets.gpus)}


def prompt_cache_mib(devices: Iterable[DeviceMemory], host_pool: str, policy: PlanPolicy) -> int:
    """--cache-ram for this plan: half the host pool's leftover, capped, 0 when small.

    llama-server keeps up to 8192 MiB of host RAM for its prompt cache by default, which
    the budget never counted; handing it half of what is left keeps the plan's total true
    and leaves the other half as slack for allocations the buffer lines do not show.
    """
    pool = next((d for d in devices if d.name == host_pool), None)
    if pool is None:
        return 0
    leftover_mib = max(0, pool.budget_bytes - pool.total_bytes) // MIB
    n = min(policy.prompt_cache_max_mib, leftover_mib // 2)
    return n if n >= policy.prompt_cache_min_mib else 0


def takes_cheap_kv(model: ModelSummary, policy: PlanPolicy) -> bool:
    """Whether the planner may trade this model's cache down to `policy.trade_kv_type` on its own."""
    names = (model.architecture or "").lower() + " " + (model.name or "").lower()
    return not any(f in names for f in policy.kv_sensitive_families)


def _layers_text(model: ModelSummary, r: _Result) -> str:
    lay = r.layout
    n = (model.n_layer_all or 0) + 1
    if lay.cpu_moe:
        return "every routed expert in RAM"
    if lay.n_cpu_moe:
        return f"the routed experts of {lay.n_cpu_moe} blocks in RAM"
    if isinstance(lay.gpu_layers, int):
        return f"only {lay.gpu_layers} of {n} layers on the GPU"
    return "every layer on the GPU"


def _trade_decision(model: ModelSummary, ev: _Evaluator, free: _Result | None, kept: _Result,
                    bandwidths: dict[str, int | None]) -> Decision | None:
    """What keeping every layer on the GPU cost, beside the plan that would have moved layers."""
    if free is None or _fully_on_gpu(free):
        return None
    fc, kc = free.config, kept.config
    traded = []
    if kc.ctx < fc.ctx:
        traded.append(f"a {_tokens(kc.ctx)}-token window instead of {_tokens(fc.ctx)}")
    if (kc.type_k, kc.type_v) != (fc.type_k, fc.type_v):
        traded.append(f"a {kc.type_k} cache instead of {fc.type_k}")
    if kc.slots < fc.slots:
        traded.append(f"{kc.slots} slot{'s' if kc.slots > 1 else ''} instead of {fc.slots}")
    in_ram = ev.ram_read_per_token(free)
    return Decision(
        "every layer kept on the GPU" + (f" for {' and '.join(traded)}" if traded else ""),
        f"the {_tokens(fc.ctx)}-token {fc.type_k} plan would leave {_layers_text(model, free)} "
        f"({gib(in_ram)} of weights read from RAM on every token, "
        f"{speed.speed_text(ev.decode_speed(free, bandwidths))}); this plan predicts "
        f"{speed.speed_text(ev.decode_speed(kept, bandwidths))}")


def _fully_on_gpu(r: _Result) -> bool:
    return r.layout.gpu_layers == "all" and not r.layout.n_cpu_moe and not r.layout.cpu_moe


def _need(r: _Result) -> int:
    return sum(d.total_bytes for d in r.devices)


def _avail(r: _Result) -> int:
    return sum(d.budget_bytes for d in r.devices)


def _describe(model: ModelSummary, budgets: _Budgets, r: _Result, ov: ModelOverrides,
              policy: PlanPolicy, n_train: int, *, resident: bool = False) -> list[Decision]:
    c, lay = r.config, r.layout
    out = []
    per_slot = c.ctx if c.kv_unified else c.ctx // c.slots
    if ov.ctx:
        why = "as set for this model"
    elif per_slot >= min(policy.default_ctx, n_train):
        why = (f"the default {_tokens(policy.default_ctx)}" if policy.default_ctx <= n_train
               else f"the model's trained context ({_tokens(n_train)}), below the default "
                    f"{_tokens(policy.default_ctx)}")
    else:
        why = ("the largest window that keeps every layer on the GPU" if resident and _fully_on_gpu(r)
               else "the largest window that fits")
    out.append(Decision(f"context {_tokens(c.ctx)} ({_tokens(per_slot)} per slot)", why))
    tier = policy.tier_slots(budgets.fast_bytes)
    if ov.slots:
        slots_why = "as set for this model"
    elif ov.ctx and c.slots < tier and ov.ctx < policy.min_ctx:
        slots_why = (f"{_tokens(ov.ctx)} tokens are less than one {_tokens(policy.min_ctx)}-token slot, "
                     f"so one slot gets them all")
    elif ov.ctx and c.slots < tier:
        slots_why = (f"{_tokens(ov.ctx)} tokens make {c.slots} slots of at least "
                     f"{_tokens(policy.min_ctx)} tokens")
    else:
        slots_why = f"{gib(budgets.fast_bytes)} of fast memory allows up to {tier}"
    out.append(Decision(f"{c.slots} slot{'s' if c.slots > 1 else ''}" + (", unified KV" if c.kv_unified else ""),
                        slots_why))
    kv = (f"{c.type_k}" if c.type_k == c.type_v else f"K {c.type_k}, V {c.type_v}")
    out.append(Decision(f"KV cache {kv}", "as set for this model" if (ov.kv_type_k or ov.kv_type_v)
                        else "full precision keeps answers identical to the model's own"
                        if c.type_k == "f16" else "it keeps a second slot" if c.slots > 1
                        else f"an f16 cache leaves no room for every layer on the GPU, and "
                             f"{model.architecture} models answer as well with {c.type_k}"))
    if c.flash_attn == "auto" and (c.type_v in mem.QUANTISED_KV_TYPES):
        out.append(Decision("flash attention auto", "the engine turns it on because a quantised V cache needs it"))
    if budgets.remote:
        out.extend(_worker_decisions(model, budgets, r))
    elif budgets.gpus:
        n = model.n_layer_all or 0
        if lay.gpu_layers == "all" and lay.cpu_moe:
            out.append(Decision("all layers on the GPU, every routed expert in RAM (--cpu-moe)",
                                "the experts do not fit in graphics memory"))
        elif lay.gpu_layers == "all" and lay.n_cpu_moe:
            out.append(Decision(f"expert offload: --n-cpu-moe {lay.n_cpu_moe}",
                                f"all {n} layers stay on the GPU; the routed experts of the first "
                                f"{lay.n_cpu_moe} blocks stay in RAM so the rest fits in graphics memory"))
        elif lay.gpu_layers == "all":
            out.append(Decision(f"all {n} layers on the GPU", "they fit in graphics memory"))
        elif isinstance(lay.gpu_layers, int):
            why = "as set for this model" if ov.gpu_layers is not None else \
                (f"all {n + 1} (with the output layer) do not fit in graphics memory; "
                 f"{lay.gpu_layers} is the most that do")
            out.append(Decision(f"{lay.gpu_layers} of {n + 1} layers on the GPU (-ngl {lay.gpu_layers})", why))
    for d in r.devices:
        out.append(Decision(f"{d.name}: {gib(d.total_bytes)} of {gib(d.budget_bytes)}",
                            f"weights {gib(d.weights_bytes)}, KV {gib(d.kv_bytes)}, compute "
                            f"{gib(d.compute_bytes)}" + (f", other {gib(d.other_bytes)}" if d.other_bytes else "")))
    if r.measured:
        out.append(Decision("measured memory", "launches on this machine measured these settings; "
                            "the estimate is calibrated by what they took"))
    return out


def _refusal(model: ModelSummary, machine: Machine, ov: ModelOverrides, policy: PlanPolicy,
             draft: ModelSummary | None, mmproj: ModelSummary | None, measured: MeasuredMemory | None,
             broken: frozenset[str], attempt: _Result, decisions: list[Decision], spec: _Spec,
             suggest: bool) -> PlanRefusal:
    over = attempt.over
    need = _need(attempt)
    avail = _avail(attempt)
    if over:
        name, n_need, n_budget = max(over, key=lambda o: o[1] - o[2])
        where = ("RAM" if name == "CPU" else f"unified memory ({name})" if machine.unified_memory
                 else f"{name} graphics memory")
        reason = f"needs {gib(n_need)} of {where}, {gib(n_budget)} is free"
    else:
        reason = f"needs {gib(need)}, {gib(avail)} is free"
    c = attempt.config
    pinned = []
    if ov.ctx:
        pinned.append(f"context {_tokens(ov.ctx)}")
    if ov.slots:
        pinned.append(f"{ov.slots} slots")
    if ov.kv_type_k or ov.kv_type_v:
        pinned.append(f"KV {c.type_k}/{c.type_v}")
    if ov.gpu_layers is not None:
        pinned.append(f"-ngl {ov.gpu_layers}")
    if ov.n_cpu_moe is not None:
        pinned.append(f"--n-cpu-moe {ov.n_cpu_moe}")
    if ov.swa_full:
        pinned.append("--swa-full")
    if spec.choice.status == "forced" and spec.candidate is not None:
        pinned.append(f"the drafter {_base(spec.candidate.path)}")
    if pinned:
        reason += f" with {', '.join(pinned)} as set"
    else:
        reason += f" even at {_tokens(c.ctx)} tokens and {c.slots} slot{'s' if c.slots > 1 else ''}"

    # Re-plan real alternatives; name only those that produce a plan.
    alts: list[tuple[str, ModelOverrides, ModelSummary | None]] = []
    if c.type_k != "q4_0" or c.type_v != "q4_0":
        alts.append(("a q4_0 KV cache", replace(ov, kv_type_k="q4_0", kv_type_v="q4_0",
                                                flash_attn=None if ov.flash_attn == "off" else ov.flash_attn), draft))
    base_ctx = ov.ctx or c.ctx
    for smaller in sorted({base_ctx // 2, base_ctx // 4, policy.min_ctx}, reverse=True):
        if 256 <= smaller < base_ctx:
            alts.append((f"a {_tokens(smaller)}-token context", replace(ov, ctx=smaller), draft))
    if ov.slots and ov.slots > 1:
        alts.append(("1 slot", replace(ov, slots=1), draft))
    if ov.swa_full:
        alts.append(("no --swa-full", replace(ov, swa_full=False), draft))
    if ov.gpu_layers is not None or ov.n_cpu_moe is not None:
        alts.append(("letting Stoker place the layers", replace(ov, gpu_layers=None, n_cpu_moe=None), draft))
    if spec.candidate is not None:
        alts.append(("no drafter", replace(ov, spec_type="none", draft_model=None), None))
    suggestions = []
    ctx_suggested = False
    for label, alt_ov, alt_draft in (alts if suggest else ()):
        is_ctx = label.endswith("-token context")
        if is_ctx and ctx_suggested:
            continue  # only the largest smaller window that fits
        alt = _plan(model, machine, alt_ov, policy, alt_draft, mmproj, measured, broken, suggest=False)
        if isinstance(alt, LaunchPlan):
            ctx_suggested = ctx_suggested or is_ctx
            suggestions.append(f"{label} would fit (context {_tokens(alt.ctx)}, {alt.slots} "
                               f"slot{'s' if alt.slots > 1 else ''}, KV {alt.kv_type_k})")
            if len(suggestions) >= 3:
                break
    weights = model.weights_bytes
    if weights > avail:
        suggestions.append(f"the weights alone are {gib(weights)}: a smaller quantisation of this model "
                           f"or a machine with more memory is needed")
    elif not suggestions:
        suggestions.append("a smaller quantisation of this model, or closing other programs to free memory")
    if suggestions and "would fit" in suggestions[0]:
        reason += ": " + " or ".join(s.split(" would fit")[0] for s in suggestions if "would fit" in s) + " would fit"
    return PlanRefusal(model.path, reason, need, avail, tuple(suggestions), tuple(decisions))
