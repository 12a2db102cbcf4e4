"""What the supervisor tells everyone else: frozen, sequence-numbered snapshots.

The supervisor thread is the only writer of engine state; the UI, the CLI and the
control channel only ever see these values. A consumer drops any snapshot whose `seq`
is not newer than the last one it showed, so out-of-order delivery never shows stale
state.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from stoker.diagnosis.views import BlockerView, IncidentView
from stoker.engines.rpc import WorkerDeviceView


class EngineState(StrEnum):
    STOPPED = "stopped"
    STARTING = "starting"
    READY = "ready"
    BACKOFF = "backoff"
    STOPPING = "stopping"
    FAILED = "failed"


@dataclass(frozen=True)
class EngineView:
    """One resident model's engine (or one waiting for room), as the tray and status show it."""

    model_id: str
    model_path: str | None
    state: EngineState
    pid: int | None = None
    endpoint: str | None = None  # the engine's private port: diagnostics only
    plan_summary: str | None = None
    bytes_by_device: tuple[tuple[str, int], ...] = ()  # the plan's totals per device
    in_flight: int = 0
    last_used_at: float | None = None  # when its last request ended (or it became READY)
    ready_at: float | None = None
    pinned: bool = False
    restarts: int = 0
    last_error: str | None = None
    queued: str | None = None  # waiting for room: the sentence why
    idle_timeout_s: float | None = None  # None: never unloaded for idleness
    engine_build: str | None = None
    backend: str | None = None
    ctx: int | None = None
    # The plan's slots and context per slot (what one request may use); None when unknown.
    slots: int | None = None
    ctx_per_slot: int | None = None
    # The last WidenContext for it: (tokens per slot asked, what was decided, in words).
    context_asked: tuple[int, str] | None = None
    engine_kind: str | None = None  # llama-server | ds4 | sd-server (core/engine_kind.EngineKind)
    progress: str | None = None  # what a working ds4 / sd-server says it is doing, in words
    # Cancel would stop its work: it renders a request it cannot cancel inside (sd-server).
    can_cancel: bool = False
    # Its measured load time (the median of its last loads with this build): what eviction
    # prices its reload at; None: never measured.
    reload_s: float | None = None

    def idle_for(self, now: float) -> float | None:
        if self.state is not EngineState.READY or self.in_flight or self.last_used_at is None:
            return None
        return max(0.0, now - self.last_used_at)


@dataclass(frozen=True)
class WorkerView:
    """This machine's RPC worker (Settings' "Share this machine as an RPC worker"): an
    rpc-server the supervisor runs for engines on other machines, as the tray and status show it."""

    host: str
    port: int
    endpoint: str  # HOST:PORT, as other machines write it in their --rpc
    state: EngineState
    pid: int | None = None
    restarts: int = 0  # automatic restarts since it was last started by a person
    cache: bool = False  # rpc-server --cache: received tensors kept on this disk
    loopback: bool = True  # False: other machines can reach it (no authentication)
    devices: tuple[WorkerDeviceView, ...] = ()  # () until the rpc-server has listed them
    next_retry_at: float | None = None  # while BACKOFF
    last_error: str | None = None
    last_incident: IncidentView | None = None


@dataclass(frozen=True)
class YieldView:
    """A model unloaded because other applications needed the memory (not reloaded by
    itself: its next request loads it as usual)."""

    at: float  # unix time
    model_id: str
    freed_bytes: int
    note: str  # "memory is tight: Gemma 3 12B unloaded, 5.1 GiB, for other applications"


@dataclass(frozen=True)
class AppSnapshot:
    seq: int
    state: EngineState
    model_path: str | None = None
    model_name: str | None = None
    engine_build: str | None = None  # e.g. "b11434-cpu"
    backend: str | None = None  # the backend really running: cuda rocm vulkan metal cpu
    endpoint: str | None = None
    pid: int | None = None
    ctx: int | None = None
    slots: int | None = None
    kv_type_k: str | None = None
    kv_type_v: str | None = None
    plan_summary: str | None = None  # one line
    plan_decisions: tuple[tuple[str, str], ...] = ()
    drafter_status: str | None = None  # none | in | left-out | forced | broken
    drafter_reason: str | None = None
    started_at: float | None = None  # unix time of the current READY
    restarts: int = 0
    next_retry_at: float | None = None
    last_error: str | None = None
    incidents: tuple[IncidentView, ...] = ()
    blockers: tuple[BlockerView, ...] = ()
    quarantined: tuple[tuple[str, str], ...] = ()  # (build, why)
    tray_shown: bool | None = None
    # Settings problems of this session, one sentence each (a corrupt file moved aside, a bad
    # hand-written override and the value used instead); from the preparer's engine_health.
    problems: tuple[str, ...] = ()
    argv: tuple[str, ...] = ()
    model_id: str | None = None  # the focused model's gateway id
    gateway_url: str | None = None  # Stoker's one endpoint, when a gateway runs
    engines: tuple[EngineView, ...] = ()  # every resident model, the focused one included
    # RPC workers (HOST:PORT) a model was re-planned without when they went away, that accept
    # a connection again: the tray offers "Use HOST:PORT again" (commands.UseWorkerAgain).
    workers_back: tuple[str, ...] = ()
    worker: WorkerView | None = None  # this machine's own RPC worker, when one was started
    yielded: tuple[YieldView, ...] = ()  # the last models unloaded for other applications, newest last
    extra: tuple[tuple[str, str], ...] = field(default_factory=tuple)

    def uptime(self, now: float) -> float | None:
        if self.state is not EngineState.READY or self.started_at is None:
            return None
        return max(0.0, now - self.started_at)
