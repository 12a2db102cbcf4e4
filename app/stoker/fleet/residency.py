"""Which models stay resident: admission by planned bytes, LRU eviction, idle expiry.

More than one model may run at once when the planner says they fit together. The gateway
asks for a model; the supervisor asks `admit` whether its plan fits beside the resident
ones on every device. If not, idle unpinned models are unloaded, the cheapest to load again
per byte they free first (`eviction_order`); if the ones that would have to go are busy (a
request in flight, or still loading), the load waits its turn (FIFO) and work in flight is
never killed to make room. A model that could not fit even with every unpinned model gone is refused with a sentence.
`expired` says which idle models have outlived their idle timeout (the clock starts when a
model's last request ends, never during a load; pinned models never expire).
`yield_to_desktop` decides what goes when other applications grow: which idle models to
unload so that what is free again covers the reserve (see its docstring).

The budget a plan is checked against is what Stoker could use with none of its own engines
running (free memory now plus what its resident engines hold, capped by the user's memory
budget): `budget_machine` makes that machine for the planner, so the candidate is planned
as if alone and its bytes are then added to the residents'.

Pure: bytes, times and flags in, decisions out; the clock is passed in.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from stoker.planning.machine import Machine

GIB = 1024 ** 3
# Requests held while their model loads or waits for room, across all models; beyond it a
# request is answered 503 with Retry-After (Ollama's OLLAMA_MAX_QUEUE is 512; a desktop
# with a few chat clients never comes near this, a runaway script does).
MAX_WAITING_REQUESTS = 256
RETRY_AFTER_S = 5
# A model whose load was never measured is priced as its bytes read at this rate: a load is
# mostly the weights read from disk (and copied to the GPU). The rate is the same for every
# unmeasured model, so among themselves they keep the old least-recently-used order; beside
# measured ones it is a middling SSD's speed (1 GiB/s), so a measured fast model is not
# pushed behind an unknown one nor a measured slow one in front of it without reason.
ESTIMATED_LOAD_BYTES_PER_S = GIB


@dataclass(frozen=True)
class Resident:
    """A model the supervisor holds an engine for (starting, ready, or backing off)."""

    key: str  # the model's path
    model_id: str
    bytes_by_device: tuple[tuple[str, int], ...]  # its plan's totals per device
    busy: bool  # requests in flight, or still loading: never evicted
    pinned: bool = False
    last_used_at: float | None = None  # when its last request ended (or it became ready)
    idle_timeout_s: float | None = None  # None: never expires
    # Seconds its load took from spawn to READY, as measured for this model and build
    # (stoker/engines/load_times.py); None: never measured (priced by its bytes instead).
    reload_s: float | None = None
    # An embedding or rerank model: small, and used beside a chat model, so making room
    # for a load takes every chat model that may go before it; only memory that is tight
    # (another application's growth, `yield_to_desktop`) prices it like any other.
    beside: bool = False


class AdmissionKind(StrEnum):
    FITS = "fits"  # load it now, beside the resident ones
    EVICT = "evict"  # unload `evict` (idle, cheapest to load again first), then load it
    WAIT = "wait"  # the models in the way are busy: wait for them, then decide again
    REFUSE = "refuse"  # cannot fit beside the pinned models, whatever else goes


@dataclass(frozen=True)
class Admission:
    kind: AdmissionKind
    reason: str  # a sentence a person can read, also for FITS
    evict: tuple[str, ...] = ()  # keys to unload first (EVICT)
    blocking: tuple[str, ...] = ()  # model ids it waits for (WAIT) or that pin it out (REFUSE)


def _sum(residents: Sequence[Resident]) -> dict[str, int]:
    used: dict[str, int] = {}
    for r in residents:
        for dev, b in r.bytes_by_device:
            used[dev] = used.get(dev, 0) + b
    return used


def _over(need: Mapping[str, int], budget: Mapping[str, int], used: Mapping[str, int]) -> dict[str, int]:
    """Bytes over budget per device (only devices that are over)."""
    out = {}
    for dev, b in need.items():
        if b <= 0:
            continue
        room = budget.get(dev)
        if room is None:
            continue  # the plan put nothing there that the budget knows of
        excess = used.get(dev, 0) + b - room
        if excess > 0:
            out[dev] = excess
    return out


def _gib(n: int) -> str:
    return f"{n / GIB:.2f} GiB" if n < 10 * GIB else f"{n / GIB:.1f} GiB"


def freed_bytes(r: Resident, pools: Collection[str] | None = None) -> int:
    """What unloading `r` gives back on `pools` (every device when None)."""
    return sum(b for dev, b in r.bytes_by_device if pools is None or dev in pools)


def reload_cost_per_byte(r: Resident, pools: Collection[str] | None = None) -> float:
    """Seconds of loading again per byte freed on `pools`: the measured load time where
    there is one, else the bytes priced at ESTIMATED_LOAD_BYTES_PER_S. A model that frees
    nothing there costs infinitely much (unloading it makes no room)."""
    freed = freed_bytes(r, pools)
    if freed <= 0:
        return math.inf
    if r.reload_s is None:
        return freed_bytes(r) / ESTIMATED_LOAD_BYTES_PER_S / freed
    return r.reload_s / freed


def eviction_order(residents: Sequence[Resident], pools: Collection[str] | None = None, *,
                   tight: bool = False) -> list[Resident]:
    """The models that may be unloaded to make room on `pools` (every device when None), in
    the order they go: idle and unpinned only (a busy or pinned model is never a
    candidate); the cheapest to load again per byte freed first; unless memory is `tight`,
    embedding and rerank models after every chat model (they stay beside it); among equal
    costs the least recently used first (a model never used before any used one)."""
    return sorted((r for r in residents if not r.busy and not r.pinned),
                  key=lambda r: (r.beside and not tight, reload_cost_per_byte(r, pools),
                                 r.last_used_at is not None, r.last_used_at or 0.0, r.model_id))


def admit(model_id: str, need: Mapping[str, int], budget: Mapping[str, int],
          residents: Sequence[Resident]) -> Admission:
    """Whether a model whose plan needs `need` bytes per device may load beside `residents`,
    given the per-device `budget` its plan was made for."""
    residents = [r for r in residents if r.model_id != model_id]
    over = _over(need, budget, _sum(residents))
    if not over:
        if residents:
            return Admission(AdmissionKind.FITS, f"{model_id} fits beside "
                             + ", ".join(r.model_id for r in residents))
        return Admission(AdmissionKind.FITS, f"{model_id} is the only model loaded")
    idle = eviction_order(residents, pools=over.keys())
    evict: list[str] = []
    keep = list(residents)
    for r in idle:
        evict.append(r.key)
        keep.remove(r)
        if not _over(need, budget, _sum(keep)):
            gone = ", ".join(x.model_id for x in residents if x.key in evict)
            return Admission(AdmissionKind.EVICT, f"{model_id} needs room: unloading idle {gone} "
                             "(the cheapest to load again first)", evict=tuple(evict))
    busy = [r for r in keep if not r.pinned]
    pinned = [r for r in keep if r.pinned]
    if busy and not _over(need, budget, _sum(pinned)):
        names = tuple(r.model_id for r in busy)
        return Admission(AdmissionKind.WAIT, f"{model_id} waits for {', '.join(names)} to finish "
                         "the requests in flight; they are unloaded then", blocking=names)
    dev, excess = max(over.items(), key=lambda kv: kv[1])
    names = tuple(r.model_id for r in pinned)
    return Admission(AdmissionKind.REFUSE,
                     f"{model_id} does not fit beside the pinned {', '.join(names)} "
                     f"({_gib(excess)} short on {dev}); unpin one or unload it first",
                     blocking=names)


def expired(residents: Sequence[Resident], now: float) -> tuple[str, ...]:
    """Keys of idle, unpinned models whose idle timeout has passed."""
    out = []
    for r in residents:
        if r.busy or r.pinned or r.idle_timeout_s is None or r.last_used_at is None:
            continue
        if now - r.last_used_at >= r.idle_timeout_s:
            out.append(r.key)
    return tuple(out)


def next_expiry(residents: Sequence[Resident]) -> float | None:
    """When the next idle model would expire, for the supervisor's wait (None: none will)."""
    times = [r.last_used_at + r.idle_timeout_s for r in residents
             if not r.busy and not r.pinned and r.idle_timeout_s is not None
             and r.last_used_at is not None]
    return min(times) if times else None


@dataclass(frozen=True)
class FreeMemory:
    """One reading of what is free now, per pool ("CPU" is RAM: under a memory cgroup's
    limit, the group's room; a GPU by the name the engine gives it), and the reserve each
    pool must keep for the system and other applications. A pool that could not be read is
    absent: nothing is decided about it."""

    free_by_pool: tuple[tuple[str, int], ...]
    reserve_by_pool: tuple[tuple[str, int], ...]
    unified: bool = False  # one pool: the GPU's bytes come out of RAM ("CPU")


@dataclass(frozen=True)
class YieldedModel:
    key: str
    model_id: str
    freed_bytes: int  # what its plan held on the pools that were short
    note: str  # the sentence a person reads: "memory is tight: X unloaded, 5.1 GiB, for other applications"


@dataclass(frozen=True)
class MemoryYield:
    """What a reading decided: the models to unload now, in order, and the ones that would
    have had to go but may not (busy or pinned), by id."""

    unload: tuple[YieldedModel, ...]
    short_by_pool: tuple[tuple[str, int], ...]
    kept: tuple[str, ...] = ()


def _size_words(n: int) -> str:
    """"5.1 GiB", "300 MiB": the size a person reads in a notification."""
    return f"{n / GIB:.1f} GiB" if n >= GIB else f"{n / 1024 ** 2:.0f} MiB"


def _pool_bytes(r: Resident, unified: bool) -> dict[str, int]:
    if not unified:
        return dict(r.bytes_by_device)
    return {"CPU": sum(b for _, b in r.bytes_by_device)}


def yield_to_desktop(residents: Sequence[Resident], reading: FreeMemory,
                     freeing: Mapping[str, int] | None = None) -> MemoryYield | None:
    """Which idle models to unload because other applications grew: on every pool where
    what is free now, plus what models already stopping will give back (`freeing`), is
    below the reserve, idle unpinned models go in `eviction_order` (memory is tight, so
    embedding and rerank models are priced like any other) until the shortfall is
    covered. A busy or pinned model is never chosen; when they alone could cover it they
    are named in `kept`. None: nothing is short."""
    free, reserve = dict(reading.free_by_pool), dict(reading.reserve_by_pool)
    freeing = freeing or {}
    short = {pool: reserve[pool] - room - freeing.get(pool, 0) for pool, room in free.items()
             if pool in reserve and reserve[pool] - room - freeing.get(pool, 0) > 0}
    if not short:
        return None
    pools = {r.key: _pool_bytes(r, reading.unified) for r in residents}
    left = dict(short)
    unload: list[YieldedModel] = []
    candidates = eviction_order([dataclasses.replace(r, bytes_by_device=tuple(pools[r.key].items()))
                                 for r in residents], pools=short.keys(), tight=True)
    for r in candidates:
        if all(n <= 0 for n in left.values()):
            break
        gives = {pool: pools[r.key].get(pool, 0) for pool in left}
        if not any(gives[p] > 0 and left[p] > 0 for p in left):
            continue
        for pool in left:
            left[pool] -= gives[pool]
        freed = sum(gives.values())
        unload.append(YieldedModel(r.key, r.model_id, freed,
                                   f"memory is tight: {r.model_id} unloaded, {_size_words(freed)}, "
                                   "for other applications"))
    kept: tuple[str, ...] = ()
    if any(n > 0 for n in left.values()):
        kept = tuple(r.model_id for r in residents if (r.busy or r.pinned)
                     and any(pools[r.key].get(p, 0) > 0 for p, n in left.items() if n > 0))
    return MemoryYield(tuple(unload), tuple(sorted(short.items())), kept)


def budget_machine(machine: Machine, held: Mapping[str, int], cap_bytes: int | None,
                   reserve_bytes: int, device_margin_bytes: int) -> Machine:
    """The machine as a candidate is planned on: free memory plus what Stoker's own resident
    engines hold (`held`, per device name; "CPU" is host RAM), each pool capped at the
    user's memory budget when one is set (`cap_bytes`, what the plan may use, before the
    planner's own reserve and margins are taken off)."""
    ram = machine.ram_available_bytes if machine.ram_available_bytes is not None else machine.ram_total_bytes
    ram = min(machine.ram_total_bytes, ram + held.get("CPU", 0))
    if machine.unified_memory and machine.devices:
        # One pool: the GPU's name carries the held bytes and CPU RAM is the same memory.
        ram = min(machine.ram_total_bytes, ram + sum(b for d, b in held.items() if d != "CPU"))
    if cap_bytes is not None:
        ram = min(ram, cap_bytes + reserve_bytes)
    devices = []
    for d in machine.devices:
        free = d.free_bytes if d.free_bytes is not None else d.total_bytes
        if free is not None:
            free += held.get(d.name, 0)
            if d.total_bytes is not None:
                free = min(free, d.total_bytes)
            if cap_bytes is not None and d.backend != "rpc":  # a worker's memory is not this machine's
                free = min(free, cap_bytes + device_margin_bytes)
        devices.append(dataclasses.replace(d, free_bytes=free))
    return dataclasses.replace(machine, ram_available_bytes=ram, devices=tuple(devices))
