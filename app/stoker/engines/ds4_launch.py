"""ds4 as an engine kind: whether this machine may run it, which binary, the launch plan, its
exact argv, and what its output says (progress, readiness, the memory it planned).

ds4 (antirez/ds4, `ds4-server`) runs DeepSeek-V4-class MoE models of tens to hundreds of
GiB, either fully resident or streaming routed experts from SSD. The residency arithmetic
is `stoker/planning/ds4.py` (the seed's residency.js); this module wires it into one plan:
`plan_ds4(model, machine, overrides, catalog=…, measured=…)` -> `Ds4Plan | PlanRefusal`,
then `ds4_launch_spec(plan, …)` -> the LaunchSpec the process module spawns. The argv is
the seed's (gezel-behaviours.md §1 "ds4 launch") and nothing else, so tests pin it whole.

The log lines parsed here are ds4's own (ds4_server.c / ds4.c format strings, and real runs
quoted in antirez/ds4 issues #554, #929, #759, #16; tests/data/ds4/*.log holds them).

Pure: RAM, devices, measurements and the catalog come in as values.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from stoker.base.overrides import ModelOverrides
from stoker.engines.launch_spec import LaunchSpec
from stoker.planning.ds4 import (
    GIB,
    Ds4Entry,
    ExpertCachePlan,
    FullResidencyMemory,
    StreamingMemory,
    plan_expert_cache,
    plan_measured_launch,
    plan_reservation,
    should_use_ssd_streaming,
)
from stoker.planning.machine import Machine
from stoker.planning.plan import Decision, DeviceMemory, PlanRefusal

# GGUF architectures ds4 runs (ds4.c reads `deepseek4.*` keys and nothing else).
DS4_ARCHITECTURES = frozenset({"deepseek4"})
# The seed hides ds4 below this: even SSD streaming needs the non-expert weights, the KV
# cache and ds4's staging buffers resident beside the OS.
DS4_MIN_RAM_BYTES = 45 * GIB
KV_DISK_SPACE_MB = 16384  # the seed's GEZEL_DS4_KV_DISK_MB default
# Context by RAM tier (the seed's ds4 build provider) and the floor an override may not go under.
CTX_LARGE_RAM_BYTES = 192 * GIB
CTX_LARGE = 262_144
CTX_DEFAULT = 131_072
# ds4 prefills in 2048-4096-token chunks and agent prompts alone run to ~10k tokens; a
# window under this serves nothing ds4 is chosen for.
DS4_MIN_CTX = 16_384
# Used when nothing else is known of a model's streamed footprint (the seed's fallback).
UNKNOWN_RESIDENT_CAP_BYTES = 48 * GIB


def _gib(n: float) -> str:
    return f"{n / GIB:.1f} GiB"


# --- availability and discovery -------------------------------------------------------------


@dataclass(frozen=True)
class Ds4Availability:
    available: bool
    backend: str | None  # "metal" | "cuda"; None when not available
    reason: str  # one sentence, also when available


def ds4_availability(machine: Machine) -> Ds4Availability:
    """Whether ds4 is offered here: Metal on Apple Silicon, CUDA on Linux, never the CPU path
    (ds4's CPU backend panics the macOS kernel and is far too slow for models this size),
    and hidden below 45 GiB of RAM."""
    ram = machine.ram_total_bytes
    if machine.os == "windows":
        return Ds4Availability(False, None, "ds4 is not offered on Windows: it has no Windows build.")
    if machine.os == "darwin":
        if machine.arch not in ("arm64", "aarch64"):
            return Ds4Availability(False, None, "ds4 is not offered on this Mac: it needs Apple Silicon "
                                                "(Metal); Intel Macs have no ds4 build.")
        backend = "metal"
    else:
        if not any(d.backend == "cuda" for d in machine.devices):
            return Ds4Availability(False, None, "ds4 is not offered here: on Linux it runs only on an NVIDIA "
                                                "GPU through CUDA, and none was found; Stoker never uses "
                                                "ds4's CPU path.")
        backend = "cuda"
    if ram < DS4_MIN_RAM_BYTES:
        return Ds4Availability(False, None, f"ds4 is hidden: it needs at least {_gib(DS4_MIN_RAM_BYTES)} of "
                                            f"RAM even when streaming experts from SSD, and this machine "
                                            f"has {_gib(ram)}.")
    return Ds4Availability(True, backend, f"ds4 can run here on {backend.upper() if backend == 'cuda' else 'Metal'} "
                                          f"with {_gib(ram)} of RAM.")


@dataclass(frozen=True)
class Ds4Binary:
    path: str
    source: str  # configured | path | own


def choose_ds4_binary(configured: str | None, on_path: str | None, own: Iterable[str]) -> Ds4Binary | None:
    """The ds4-server to run: the user's configured path, else `ds4-server` on PATH, else one
    in Stoker's own folder (`<data>/engines/ds4/`). Existence is the shell's business: it
    passes only paths that are executable files."""
    if configured:
        return Ds4Binary(configured, "configured")
    if on_path:
        return Ds4Binary(on_path, "path")
    for p in own:
        return Ds4Binary(p, "own")
    return None


def is_ds4_model(architecture: str | None) -> bool:
    return architecture in DS4_ARCHITECTURES


# --- measurements ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Ds4MemoryLine:
    """ds4's own startup accounting: `ds4: memory: KV 0.61 GiB (…) + buffers 0.25 GiB +
    resident model 42.34 GiB = 43.20 GiB planned`, with the window of its detail line."""

    kv_bytes: int | None
    total_bytes: int
    ctx: int | None  # from `ds4: memory detail: ctx=N …`; None until that line is read


@dataclass(frozen=True)
class Ds4Measurement:
    """A memory line recorded at READY for one (model file, ds4 build) and residency mode.

    `bytes` is what the launch held at `ctx_tokens` WITHOUT the expert cache (streaming) or
    the whole working set (full residency); `bytes_per_token` is the KV slope."""

    ssd_streaming: bool
    bytes: int
    ctx_tokens: int
    bytes_per_token: int


def measurement_from_line(line: Ds4MemoryLine, plan: Ds4Plan) -> Ds4Measurement | None:
    """What a launch's memory line says about its mode, or None when it cannot be used.

    The slope is the KV bytes over the window (ds4's KV grows with --ctx; its buffers do not
    enough to matter). For a streamed launch the expert cache Stoker asked for is taken off
    the planned total: it is a setting, not a property of the model.
    """
    ctx = line.ctx or plan.ctx
    if ctx <= 0 or line.total_bytes <= 0:
        return None
    per_token = round(line.kv_bytes / ctx) if line.kv_bytes else 0
    fixed = line.total_bytes
    if plan.ssd_streaming:
        fixed -= round((plan.cache_gb or 0) * GIB)
        if fixed <= 0:
            return None
    return Ds4Measurement(plan.ssd_streaming, fixed, ctx, per_token)


def entry_with_measurements(catalog: Ds4Entry | None, measured: Iterable[Ds4Measurement]) -> Ds4Entry:
    """The catalog entry, its measured lines replaced by this machine's own measurements."""
    entry = catalog or Ds4Entry()
    full, streaming = entry.full_residency_memory, entry.streaming_memory
    for m in measured:  # newest last: later measurements of a mode win
        if m.ssd_streaming:
            min_cache = streaming.min_cache_bytes if streaming else None
            streaming = StreamingMemory(m.bytes, m.ctx_tokens, m.bytes_per_token, min_cache)
        else:
            full = FullResidencyMemory(m.bytes, m.ctx_tokens, m.bytes_per_token)
    return Ds4Entry(entry.resident_bytes, entry.cache_experts_bytes, full, streaming, entry.max_launch_ctx)


# --- the plan ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Ds4Model:
    path: str
    size_bytes: int | None
    architecture: str | None = "deepseek4"
    trained_ctx: int | None = None


@dataclass(frozen=True)
class Ds4Plan:
    model_path: str
    backend: str  # metal | cuda
    ctx: int
    ssd_streaming: bool
    cache_gb: int | None  # --ssd-streaming-cache-experts; None: full residency
    cache: ExpertCachePlan | None  # requested/chosen/clamped/limit, streamed launches only
    reservation_bytes: int
    measured: bool  # priced from a measured line (this machine's or the catalog's)
    kv_disk_dir: str
    kv_disk_space_mb: int
    devices: tuple[DeviceMemory, ...]
    decisions: tuple[Decision, ...]

    @property
    def estimate_source(self) -> str:
        return "measured" if self.measured else "estimated"


def ds4_context(total_ram_bytes: int, catalog_max_ctx: int | None, override_ctx: int | None,
                trained_ctx: int | None) -> tuple[int, Decision]:
    """The launch window: by RAM tier, capped by the catalog; an override wins, but not below
    the 16k floor unless the catalog's own cap is below it; never past the trained window."""
    tier = CTX_LARGE if total_ram_bytes >= CTX_LARGE_RAM_BYTES else CTX_DEFAULT
    cap = catalog_max_ctx
    if override_ctx is not None:
        floor = min(DS4_MIN_CTX, cap) if cap else DS4_MIN_CTX
        ctx = max(override_ctx, floor)
        why = ("as set for this model" if ctx == override_ctx
               else f"{override_ctx:,} was asked for, raised to ds4's {floor:,}-token floor")
    else:
        ctx = tier
        why = f"ds4's window for {_gib(total_ram_bytes)} of RAM ({'≥' if tier == CTX_LARGE else '<'} 192 GiB)"
        if cap and cap < ctx:
            ctx, why = cap, f"the catalog's cap for this model (the RAM tier allows {tier:,})"
    if trained_ctx and ctx > trained_ctx:
        ctx, why = trained_ctx, f"the model's trained window ({why} asked for more)"
    return ctx, Decision(f"context {ctx:,}", why)


def ds4_model_budget(machine: Machine) -> int:
    """What a ds4 launch may hold: the seed's capacity budget (gezel-behaviours.md §3) for
    unified memory, and RAM share plus 95 % of the largest card for a discrete GPU; never
    more RAM than the machine has left for it."""
    ram = machine.ram_total_bytes
    high = ram >= 96 * GIB
    # What the machine it is planned on has left (free memory plus what Stoker's other
    # residents hold, capped at the memory budget: fleet/pipeline), when it is known.
    left = machine.ram_available_bytes
    if machine.unified_memory or machine.os == "darwin":
        frac = int(ram * (0.8 if high else 0.7))
        capacity = max(0, min(max(frac, ram - 16 * GIB), ram - 4 * GIB))
        return capacity if left is None else min(capacity, left)
    share = min(int(ram * (0.8 if high else 0.6)), 96 * GIB)
    if left is not None:
        share = min(share, left)
    vram = max((d.total_bytes or 0 for d in machine.devices if d.backend == "cuda"), default=0)
    return share + int(vram * 0.95)


def plan_ds4(model: Ds4Model, machine: Machine, overrides: ModelOverrides | None = None, *,
             catalog: Ds4Entry | None = None, measured: Iterable[Ds4Measurement] = (),
             kv_disk_dir: str) -> Ds4Plan | PlanRefusal:
    """The one decision of a ds4 launch: backend, window, residency, expert cache, reservation.

    `measured` are this machine's memory lines for (model, build), oldest first; they replace
    the catalog's lines of the same mode. A refusal names what does not fit and what to try.
    """
    ov = overrides or ModelOverrides()
    decisions: list[Decision] = []
    avail = ds4_availability(machine)
    if not avail.available:
        return PlanRefusal(model.path, avail.reason, DS4_MIN_RAM_BYTES, machine.ram_total_bytes, ())
    decisions.append(Decision(f"backend {avail.backend}", avail.reason))
    ram = machine.ram_total_bytes
    entry = entry_with_measurements(catalog, measured)
    ctx, ctx_decision = ds4_context(ram, entry.max_launch_ctx, ov.ctx, model.trained_ctx)
    decisions.append(ctx_decision)

    residency = should_use_ssd_streaming(ov.ds4_ssd_streaming, model.size_bytes, ram, machine.os, machine.arch)
    decisions.append(Decision("SSD streaming" if residency.ssd_streaming else "full residency", residency.why))
    streaming = residency.ssd_streaming
    budget = ds4_model_budget(machine)
    if entry.resident_bytes is None and model.size_bytes:
        # No catalog footprint: a streamed launch is guessed at min(file, 48 GiB) (the seed's
        # fallback), a fully resident one at the file itself (then floored at 96 GiB).
        guess = min(model.size_bytes, UNKNOWN_RESIDENT_CAP_BYTES) if streaming else model.size_bytes
        entry = Ds4Entry(guess, entry.cache_experts_bytes, entry.full_residency_memory,
                         entry.streaming_memory, entry.max_launch_ctx)

    cache: ExpertCachePlan | None = None
    if streaming:
        launch = plan_measured_launch(entry, ssd_streaming=True, num_ctx=ctx, total_ram_bytes=ram,
                                      budget_bytes=budget, configured_cache_gb=ov.ds4_cache_gb)
        if launch is not None:
            cache = launch.cache
        else:
            cache = plan_expert_cache(ram, configured_gb=ov.ds4_cache_gb,
                                      catalog_cache_bytes=entry.cache_experts_bytes,
                                      catalog_resident_bytes=entry.resident_bytes,
                                      min_cache_bytes=(entry.streaming_memory.min_cache_bytes
                                                       if entry.streaming_memory else None))
        assert cache is not None
        if not cache.safe:
            return PlanRefusal(model.path, f"ds4 is {cache.why}.", None, budget,
                               ("close other programs or run this model on a machine with more RAM",),
                               tuple(decisions))
        decisions.append(Decision(f"expert cache {cache.cache_gb:g} GiB",
                                  f"{cache.why} (limit: {cache.limit})"))

    reservation = plan_reservation(entry, ssd_streaming=streaming, num_ctx=ctx, total_ram_bytes=ram,
                                   budget_bytes=budget,
                                   configured_cache_gb=ov.ds4_cache_gb if streaming else None)
    if reservation is None:
        return PlanRefusal(model.path, "ds4 cannot price this launch: the model's size is unknown and "
                                       "nothing was measured; check that the file is readable.",
                           None, budget, (), tuple(decisions))
    decisions.append(Decision(f"reserve {_gib(reservation.bytes)}", reservation.why))
    if reservation.bytes > budget:
        suggestions = ("turn SSD streaming on for this model",) if not streaming else (
            "lower the ds4 expert cache for this model", "lower the context for this model")
        return PlanRefusal(model.path, f"this ds4 launch needs {_gib(reservation.bytes)} and the model "
                                       f"budget here is {_gib(budget)}.", reservation.bytes, budget,
                           suggestions, tuple(decisions))

    cache_gb = int(cache.cache_gb) if cache is not None else None
    # A measured streamed reservation is the fixed line plus the cache; the catalog's
    # unmeasured footprint is one number with the cache inside it.
    cache_bytes = (cache_gb or 0) * GIB if reservation.measured else 0
    device = DeviceMemory(name="ds4 (unified memory)" if machine.unified_memory or machine.os == "darwin"
                          else "ds4 (RAM + GPU)", budget_bytes=budget,
                          weights_bytes=reservation.bytes - cache_bytes, kv_bytes=0, compute_bytes=0,
                          other_bytes=cache_bytes)
    return Ds4Plan(model.path, avail.backend or "cuda", ctx, streaming, cache_gb, cache, reservation.bytes,
                   reservation.measured, kv_disk_dir, KV_DISK_SPACE_MB, (device,), tuple(decisions))


def ds4_summary_line(plan: Ds4Plan) -> str:
    """The tray's one line for a ds4 plan: `ds4, context 131,072, SSD streaming with a 56 GiB
    expert cache, metal`."""
    mode = (f"SSD streaming with a {plan.cache_gb} GiB expert cache" if plan.ssd_streaming and plan.cache_gb
            else "SSD streaming" if plan.ssd_streaming else "fully resident")
    return f"ds4, context {plan.ctx:,}, {mode}, {plan.backend}"


# --- argv --------------------------------------------------------------------------------------


def ds4_launch_spec(plan: Ds4Plan, *, binary: str, port: int, log_file: str | None = None) -> LaunchSpec:
    """The ds4-server command for a plan: exactly the seed's flags, cwd the binary's folder
    (ds4 finds its Metal shaders there). ds4-server has no API key option (its --help lists
    none), so it listens on loopback without one: Settings and the README say so."""
    if not 0 < port < 65536:
        raise ValueError(f"port must be between 1 and 65535, got {port}")
    argv = [binary, "--model", plan.model_path, f"--{plan.backend}", "--ctx", str(plan.ctx),
            "--host", "127.0.0.1", "--port", str(port), "--kv-disk-dir", plan.kv_disk_dir,
            "--kv-disk-space-mb", str(plan.kv_disk_space_mb), "--cors"]
    if plan.ssd_streaming:
        argv.append("--ssd-streaming")
        if plan.cache_gb is not None:
            argv += ["--ssd-streaming-cache-experts", f"{plan.cache_gb}GB"]
    folder = binary.rsplit("/", 1)[0] if "/" in binary else None
    return LaunchSpec(binary=binary, argv=tuple(argv), env=(), drop_env_prefixes=("DS4_",), secret_env=(),
                      host="127.0.0.1", port=port, log_file=log_file, cwd=folder)


# --- output -----------------------------------------------------------------------------------


def split_repaints(chunk: str) -> tuple[str, ...]:
    """ds4 repaints core progress with `\\r` (`ds4: gpu prefill layer 3/43\\r`): each repaint
    is its own line, so the last state is never glued to the next message."""
    return tuple(part for part in re.split(r"[\r\n]+", chunk) if part.strip())


@dataclass(frozen=True)
class Ds4Progress:
    phase: str  # mapping | warming | warmed | ready | prefill | rebuild | generating | memory
    done: int | None = None
    total: int | None = None
    tokens_per_s: float | None = None
    bytes: int | None = None
    text: str = ""

    @property
    def fraction(self) -> float | None:
        if self.done is None or not self.total:
            return None
        return min(1.0, self.done / self.total)


_UNIT = {"KiB": 1024, "MiB": 1024 ** 2, "GiB": GIB}
_LISTENING = re.compile(r"ds4-server: listening on http://\S+:(\d+)")
_CHUNK = re.compile(r"(?:ds4-server: )?\b(?:chat|completion|\w+) ctx=\S+(?: [A-Z_ ]+?)? "
                    r"(prefill|tool checkpoint rebuild) chunk "
                    r"(\d+)/(\d+) \([\d.]+%\) chunk=[\d.]+ t/s avg=([\d.]+) t/s")
_GEN = re.compile(r"(?:ds4-server: )?\b(?:chat|completion|\w+) ctx=\S+ gen=(\d+)\b"
                  r".*? decoding chunk=[\d.]+ t/s avg=([\d.]+) t/s")
_MAPPING = re.compile(r"ds4: (?:CUDA|ROCm|Metal) (?:registered ([\d.]+) (GiB|MiB) model mapping|"
                      r".*?(?:tensor mappings|loading model tensors|\(mapped)[:\s]+([\d.]+) (GiB|MiB))")
_WARMING = re.compile(r"ds4: warming mapped tensor pages: ([\d.]+) (GiB|MiB)")
_WARMED = re.compile(r"ds4: warmed tensor pages in ([\d.]+)s")
_CORE_PREFILL = re.compile(r"ds4: (?:gpu )?prefill (?:token (\d+)/(\d+) )?layer (\d+)/(\d+)")
_MEMORY = re.compile(r"ds4: memory: KV ([\d.]+) (GiB|MiB)\b.*?= ([\d.]+) (GiB|MiB) planned")
_MEMORY_DETAIL = re.compile(r"ds4: memory detail: ctx=(\d+)")


def _bytes(value: str, unit: str) -> int:
    return round(float(value) * _UNIT[unit])


def parse_ds4_line(line: str) -> Ds4Progress | None:
    """One ds4 output line as progress, or None for lines that say nothing about it."""
    if m := _LISTENING.search(line):
        return Ds4Progress("ready", text=line.strip())
    if m := _CHUNK.search(line):
        phase = "prefill" if m.group(1) == "prefill" else "rebuild"
        return Ds4Progress(phase, int(m.group(2)), int(m.group(3)), float(m.group(4)), text=line.strip())
    if m := _GEN.search(line):
        return Ds4Progress("generating", int(m.group(1)), None, float(m.group(2)), text=line.strip())
    if m := _WARMING.search(line):
        return Ds4Progress("warming", bytes=_bytes(m.group(1), m.group(2)), text=line.strip())
    if m := _WARMED.search(line):
        return Ds4Progress("warmed", text=line.strip())
    if m := _MEMORY.search(line):
        return Ds4Progress("memory", bytes=_bytes(m.group(3), m.group(4)), text=line.strip())
    if m := _MAPPING.search(line):
        value, unit = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
        return Ds4Progress("mapping", bytes=_bytes(value, unit), text=line.strip())
    if m := _CORE_PREFILL.search(line):
        if m.group(1):
            return Ds4Progress("prefill", int(m.group(1)), int(m.group(2)), text=line.strip())
        return Ds4Progress("prefill", int(m.group(3)), int(m.group(4)), text=line.strip())
    return None


def parse_memory_line(lines: Iterable[str]) -> Ds4MemoryLine | None:
    """The last `ds4: memory: … planned` line with its detail line's window, or None."""
    found: Ds4MemoryLine | None = None
    for raw in lines:
        for line in split_repaints(raw):
            if m := _MEMORY.search(line):
                found = Ds4MemoryLine(_bytes(m.group(1), m.group(2)), _bytes(m.group(3), m.group(4)), None)
            elif (m := _MEMORY_DETAIL.search(line)) and found is not None:
                found = Ds4MemoryLine(found.kv_bytes, found.total_bytes, int(m.group(1)))
    return found


def parse_ds4_output(lines: Iterable[str]) -> tuple[Ds4Progress, ...]:
    """Every progress event in some output, each line first split at its `\\r` repaints
    (a line reader hands over `a\\rb\\rc` as one line)."""
    return tuple(p for raw in lines for line in split_repaints(raw) if (p := parse_ds4_line(line)) is not None)
