"""ds4 residency: hold a very large MoE fully in memory, or stream its experts from SSD.

ds4 runs models far larger than a GPU (DeepSeek-V4 Flash, GLM 5.2). Either the whole
model is resident, or only a bounded routed-expert cache is and the rest is read from
SSD. This module decides which, how big that cache is, and how many bytes the launch
must reserve. It is a port of the seed project's `residency.js` (gezel-inference 1.0.9):
a catalog entry may carry MEASURED memory lines, and a measured launch is priced from
them, while the old guesses (a 96 GiB full-residency floor, a 24 GiB headroom) apply
only to launches nobody measured.

Pure: RAM, budgets and catalog numbers come in as values; nothing here reads the
machine. Every choice carries a sentence a person can read.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

GIB = 1024**3

# Stands in for a missing measurement of a fully resident launch: the broker's
# workstation ceiling, so nothing else is admitted beside a working set nobody measured.
# Only for unmeasured launches: flooring a measured 45 GiB Qwen3.8 launch here put it
# over a 96 GiB Mac's 80 GiB budget.
FULL_RESIDENCY_RESERVATION_BYTES = 96 * GIB

# Guards a streamed footprint GUESSED as catalog resident - catalog cache, which omits the
# graph and staging memory ds4 also holds. A measured footprint has no such gap.
EXPERT_CACHE_HEADROOM_BYTES = 24 * GIB

# Memory kept beside the GGUF before full residency is allowed (OS, apps, Metal/CUDA
# context and compute buffers): the measured IQ2_XXS working set is ~103 GiB for an
# ~81 GiB file.
FULL_RESIDENCY_HEADROOM_BYTES = 32 * GIB

# Expert-cache size when neither the user nor the catalog names one, by total RAM.
RAM_TIER_CACHE_GB = ((120 * GIB, 64), (88 * GIB, 48), (0, 32))

MIN_CACHE_GB = 1


def _js_round(x: float) -> int:
    # The seed rounds half up (Math.round); Python's round() would round half to even.
    return int(math.floor(x + 0.5))


def _gib(n: float) -> str:
    return f"{n / GIB:.1f} GiB"


@dataclass(frozen=True)
class MeasuredLine:
    """Memory measured at one context window, as a line in the window:
    `context_free + bytes_per_token x ctx`, where context_free = bytes - bytes_per_token x ctx_tokens."""

    bytes: int
    ctx_tokens: int
    bytes_per_token: int


@dataclass(frozen=True)
class FullResidencyMemory:
    """A catalog measurement of a fully resident launch."""

    working_set_bytes: int
    ctx_tokens: int
    bytes_per_token: int


@dataclass(frozen=True)
class StreamingMemory:
    """A catalog measurement of a streamed launch, WITHOUT the expert cache."""

    fixed_bytes: int
    ctx_tokens: int
    bytes_per_token: int
    min_cache_bytes: int | None = None


@dataclass(frozen=True)
class Ds4Entry:
    """What a catalog says about one ds4 model; every field may be missing."""

    resident_bytes: int | None = None  # catalog footprint (unmeasured path)
    cache_experts_bytes: int | None = None  # catalog's recommended expert cache
    full_residency_memory: FullResidencyMemory | None = None
    streaming_memory: StreamingMemory | None = None
    max_launch_ctx: int | None = None  # the catalog's cap on the launch window


def measured_bytes_at(line: MeasuredLine, ctx: int) -> int:
    """A measured line evaluated at another window, never below its context-free part.

    A mis-measured slope that swallows the whole footprint clamps to 0 rather than
    billing negative memory.
    """
    context_free = max(0, line.bytes - line.bytes_per_token * line.ctx_tokens)
    return _js_round(context_free + line.bytes_per_token * max(0, ctx))


def full_residency_line(entry: Ds4Entry) -> MeasuredLine | None:
    m = entry.full_residency_memory
    return MeasuredLine(m.working_set_bytes, m.ctx_tokens, m.bytes_per_token) if m else None


def streaming_line(entry: Ds4Entry) -> MeasuredLine | None:
    m = entry.streaming_memory
    return MeasuredLine(m.fixed_bytes, m.ctx_tokens, m.bytes_per_token) if m else None


def streaming_fixed_bytes(entry: Ds4Entry, ctx: int) -> int | None:
    """Measured streamed footprint without the expert cache at a window; None when unmeasured."""
    line = streaming_line(entry)
    return measured_bytes_at(line, ctx) if line else None


# --- full residency or SSD streaming ------------------------------------------------------


@dataclass(frozen=True)
class ResidencyChoice:
    ssd_streaming: bool
    why: str


def can_use_full_residency(
    model_size_bytes: int | None,
    total_ram_bytes: int,
    os: str,
    arch: str,
    companion_bytes: int = 0,
) -> bool:
    """Whether this model can be held whole without eating what the OS and ds4 still need.

    Only on unified-memory arm64 machines (Apple Silicon, DGX Spark): a discrete card's
    capacity cannot be read from system RAM. An unknown model size never qualifies.
    """
    unified_target = arch in ("arm64", "aarch64") and os in ("darwin", "linux")
    return bool(
        unified_target
        and model_size_bytes
        and model_size_bytes + companion_bytes + FULL_RESIDENCY_HEADROOM_BYTES <= total_ram_bytes
    )


def should_use_ssd_streaming(
    configured: bool | None,
    model_size_bytes: int | None,
    total_ram_bytes: int,
    os: str,
    arch: str,
    companion_bytes: int = 0,
) -> ResidencyChoice:
    """Stream experts from SSD unless the user turned streaming off AND the model fits whole.

    Streaming is the safe default (as in the seed): a stale or hand-edited setting must
    not turn a model pick into a machine-wide memory-pressure event, so a request for
    full residency is honoured only when the model plus 32 GiB fits this machine.
    """
    if configured is not False:
        why = ("streaming experts from SSD, as set for this model" if configured
               else "streaming experts from SSD, the default for ds4")
        return ResidencyChoice(True, why)
    if can_use_full_residency(model_size_bytes, total_ram_bytes, os, arch, companion_bytes):
        return ResidencyChoice(False, "holding the whole model in memory, as set for this model; "
                                      f"it and {_gib(FULL_RESIDENCY_HEADROOM_BYTES)} of headroom fit "
                                      f"in {_gib(total_ram_bytes)}")
    if model_size_bytes is None:
        reason = "its size is unknown"
    elif not (arch in ("arm64", "aarch64") and os in ("darwin", "linux")):
        reason = "full residency needs a unified-memory arm64 machine"
    else:
        reason = (f"{_gib(model_size_bytes + companion_bytes)} plus {_gib(FULL_RESIDENCY_HEADROOM_BYTES)} "
                  f"of headroom does not fit in {_gib(total_ram_bytes)}")
    return ResidencyChoice(True, f"streaming experts from SSD although full residency was asked for: {reason}")


# --- expert cache ----------------------------------------------------------------------------


@dataclass(frozen=True)
class ExpertCachePlan:
    cache_gb: float  # the cache ds4 gets
    requested_gb: float  # what the user, the catalog or the RAM tier asked for
    clamped: bool  # cache_gb differs from requested_gb
    safe: bool  # False: even the minimum cache does not fit; do not launch
    limit: str  # "model-budget" (measured) | "headroom" (unmeasured)
    why: str = ""


def ram_tier_cache_gb(total_ram_bytes: int) -> int:
    for floor, gb in RAM_TIER_CACHE_GB:
        if total_ram_bytes >= floor:
            return gb
    return RAM_TIER_CACHE_GB[-1][1]


def plan_expert_cache(
    total_ram_bytes: int,
    *,
    configured_gb: float | None = None,
    catalog_cache_bytes: int | None = None,
    catalog_resident_bytes: int | None = None,
    measured_fixed_bytes: int | None = None,
    budget_bytes: int | None = None,
    min_cache_bytes: int | None = None,
) -> ExpertCachePlan:
    """Size the routed-expert cache for a streamed launch.

    Request: the user's GB, else the catalog's cache size, else 64/48/32 GiB for RAM
    >= 120 / >= 88 / less. Safe size: with a measured fixed footprint and a model budget,
    what the budget leaves beside it ("model-budget"); otherwise RAM - (catalog resident -
    catalog cache) - 24 GiB ("headroom"). Never below the entry's minimum cache (>= 1 GiB);
    when the safe size is below that minimum the plan is not safe.
    """
    cache_bytes = catalog_cache_bytes or 0
    requested: float
    if configured_gb is not None:
        requested, source = configured_gb, "the size set for this model"
    elif cache_bytes > 0:
        requested, source = cache_bytes / GIB, "the catalog's size"
    else:
        requested, source = ram_tier_cache_gb(total_ram_bytes), f"the default for {_gib(total_ram_bytes)} of RAM"
    model_budget = measured_fixed_bytes is not None and budget_bytes is not None
    if measured_fixed_bytes is not None and budget_bytes is not None:
        safe_bytes = budget_bytes - measured_fixed_bytes
        room = f"the {_gib(budget_bytes)} model budget less the measured {_gib(measured_fixed_bytes)}"
    else:
        fixed = max(0, (catalog_resident_bytes or 0) - cache_bytes)
        safe_bytes = total_ram_bytes - fixed - EXPERT_CACHE_HEADROOM_BYTES
        room = (f"{_gib(total_ram_bytes)} of RAM less {_gib(fixed)} of fixed model state "
                f"and {_gib(EXPERT_CACHE_HEADROOM_BYTES)} of headroom")
    safe_gb = math.floor(safe_bytes / GIB)
    min_gb = max(MIN_CACHE_GB, math.ceil((min_cache_bytes or 0) / GIB))
    limit = "model-budget" if model_budget else "headroom"
    if safe_gb < min_gb:
        return ExpertCachePlan(
            min_gb, requested, True, False, limit,
            f"not safe to launch: {room} leaves {max(safe_gb, 0)} GiB for the expert cache, "
            f"below its {min_gb} GiB minimum",
        )
    cache = max(min_gb, min(requested, safe_gb))
    clamped = cache != requested
    if not clamped:
        why = f"expert cache {cache:g} GiB, {source}"
    elif cache < requested:
        why = f"expert cache {cache:g} GiB instead of {requested:g} GiB ({source}): {room} leaves {safe_gb} GiB"
    else:
        why = (f"expert cache {cache:g} GiB instead of {requested:g} GiB ({source}): "
               f"the model needs at least {min_gb} GiB")
    return ExpertCachePlan(cache, requested, clamped, True, limit, why)


# --- what a launch reserves --------------------------------------------------------------------


@dataclass(frozen=True)
class MeasuredLaunch:
    working_set_bytes: int  # what to reserve at the launch window
    context_free_bytes: int  # the same at a zero-token window
    bytes_per_token: int
    cache: ExpertCachePlan | None = None  # streamed launches only
    why: str = ""


def plan_measured_launch(
    entry: Ds4Entry,
    *,
    ssd_streaming: bool,
    num_ctx: int,
    total_ram_bytes: int,
    budget_bytes: int | None = None,
    sidecar_bytes: int = 0,
    configured_cache_gb: float | None = None,
) -> MeasuredLaunch | None:
    """Price a launch from the entry's measurement for the chosen mode.

    None when that mode is unmeasured (or a streamed launch has no budget to size the
    cache against): the caller then keeps the catalog path, including the 96 GiB
    full-residency floor that stands in for a missing measurement.
    """
    if not ssd_streaming:
        line = full_residency_line(entry)
        if line is None:
            return None
        context_free = measured_bytes_at(line, 0) + sidecar_bytes
        working = context_free + line.bytes_per_token * max(0, num_ctx)
        return MeasuredLaunch(
            working, context_free, line.bytes_per_token,
            why=f"reserving the measured full-residency working set, {_gib(working)} at {num_ctx} tokens",
        )
    line = streaming_line(entry)
    if line is None or budget_bytes is None:
        return None
    fixed = measured_bytes_at(line, num_ctx) + sidecar_bytes
    cache = plan_expert_cache(
        total_ram_bytes,
        configured_gb=configured_cache_gb,
        catalog_cache_bytes=entry.cache_experts_bytes,
        measured_fixed_bytes=fixed,
        budget_bytes=budget_bytes,
        min_cache_bytes=entry.streaming_memory.min_cache_bytes if entry.streaming_memory else None,
    )
    cache_bytes = _js_round(cache.cache_gb * GIB)
    working = fixed + cache_bytes
    return MeasuredLaunch(
        working,
        measured_bytes_at(line, 0) + sidecar_bytes + cache_bytes,
        line.bytes_per_token,
        cache,
        why=f"reserving the measured streamed footprint {_gib(fixed)} at {num_ctx} tokens plus the "
            f"{cache.cache_gb:g} GiB expert cache",
    )


def resident_bytes_for_mode(catalog_resident_bytes: int, ssd_streaming: bool) -> int:
    """The unmeasured reservation: the catalog footprint, floored at 96 GiB when fully resident."""
    if ssd_streaming:
        return catalog_resident_bytes
    return max(catalog_resident_bytes, FULL_RESIDENCY_RESERVATION_BYTES)


@dataclass(frozen=True)
class Ds4Reservation:
    bytes: int
    measured: bool
    why: str


def plan_reservation(
    entry: Ds4Entry,
    *,
    ssd_streaming: bool,
    num_ctx: int,
    total_ram_bytes: int,
    budget_bytes: int | None = None,
    sidecar_bytes: int = 0,
    configured_cache_gb: float | None = None,
) -> Ds4Reservation | None:
    """Bytes a ds4 launch must reserve: the measurement when there is one, else the catalog
    footprint (with the 96 GiB floor for full residency). None when nothing is known."""
    measured = plan_measured_launch(
        entry, ssd_streaming=ssd_streaming, num_ctx=num_ctx, total_ram_bytes=total_ram_bytes,
        budget_bytes=budget_bytes, sidecar_bytes=sidecar_bytes, configured_cache_gb=configured_cache_gb,
    )
    if measured is not None:
        return Ds4Reservation(measured.working_set_bytes, True, measured.why)
    if entry.resident_bytes is None:
        return None
    reserved = resident_bytes_for_mode(entry.resident_bytes + sidecar_bytes, ssd_streaming)
    if not ssd_streaming and reserved > entry.resident_bytes + sidecar_bytes:
        why = (f"reserving {_gib(reserved)} for full residency: nobody measured this launch, so the "
               f"{_gib(FULL_RESIDENCY_RESERVATION_BYTES)} floor stands in for its working set")
    else:
        why = f"reserving the catalog footprint, {_gib(reserved)} (unmeasured)"
    return Ds4Reservation(reserved, False, why)
