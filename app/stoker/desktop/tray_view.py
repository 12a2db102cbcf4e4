"""What the tray says about a snapshot: the icon state, the tooltip and the menu's lines.

The tray must tell the truth at a glance, so the mapping from engine state, blockers and
drafter status to one of five looks is decided here, once, where it can be tested without
a display; so are each resident model's line (state, bytes per device, idle time) and
which of Load / Unload / Pin / Switch would do something; so are this machine's RPC worker's
line (state, address, what it lends, restarts, last incident, Start / Stop) and the offers to
use a worker that came back. Values in, values out: no Qt,
and no clock of its own (the UI passes `now` in and formats wall-clock times itself).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from stoker.fleet.snapshot import AppSnapshot, EngineState, EngineView, WorkerView

# The five looks the icons are drawn for (stoker/resources/icons/<state>-<panel>.svg).
TRAY_STATES = ("stopped", "loading", "ready", "degraded", "failed")

_STATE_WORDS = {
    EngineState.STOPPED: "stopped",
    EngineState.STARTING: "loading",
    EngineState.READY: "ready",
    EngineState.BACKOFF: "restarting after a crash",
    EngineState.STOPPING: "stopping",
    EngineState.FAILED: "failed",
}


def tray_state(snap: AppSnapshot | None) -> str:
    """One of TRAY_STATES.

    READY with a blocker or a drafter that had to be left out (or broke) is "degraded":
    the engine answers, but slower or with less than the user asked for, and that is the
    thing a user would otherwise never notice. A crash waiting for its retry reads as
    "loading" (it is on its way back); giving up reads as "failed".
    """
    if snap is None:
        return "stopped"
    if snap.state is EngineState.FAILED:
        return "failed"
    if snap.state in (EngineState.STARTING, EngineState.BACKOFF, EngineState.STOPPING):
        return "loading"
    if snap.state is EngineState.READY:
        if (snap.blockers or snap.drafter_status in ("left-out", "broken")
                or (snap.worker is not None and snap.worker.state is EngineState.FAILED)):
            return "degraded"
        return "ready"
    return "stopped"


def model_label(snap: AppSnapshot) -> str | None:
    """The gateway's id when there is one (the name clients send), else the file's name."""
    if snap.model_id:
        return snap.model_id
    if snap.model_name:
        return snap.model_name
    if snap.model_path:
        name = os.path.basename(snap.model_path)
        return name[:-5] if name.lower().endswith(".gguf") else name
    return None


def kv_label(snap: AppSnapshot) -> str | None:
    if snap.kv_type_k is None and snap.kv_type_v is None:
        return None
    if snap.kv_type_k == snap.kv_type_v or snap.kv_type_v is None:
        return f"KV {snap.kv_type_k}"
    if snap.kv_type_k is None:
        return f"KV {snap.kv_type_v}"
    return f"KV {snap.kv_type_k}/{snap.kv_type_v}"


def plan_line(snap: AppSnapshot) -> str | None:
    """`model · backend · ctx N · KV t`: the parts that are known, in that order."""
    parts = [model_label(snap), snap.backend]
    if snap.ctx is not None:
        parts.append(f"ctx {snap.ctx:,}")
    parts.append(kv_label(snap))
    known = [p for p in parts if p]
    return " · ".join(known) if known else None


def tooltip_text(snap: AppSnapshot | None) -> str:
    if snap is None:
        return "Stoker: starting up"
    head = f"Stoker: {_STATE_WORDS.get(snap.state, snap.state.value)}"
    line = plan_line(snap)
    lines = [head] if line is None else [head, line]
    state = tray_state(snap)
    if state == "degraded":
        if snap.blockers:
            lines.append(snap.blockers[0].message)
        elif snap.drafter_status in ("left-out", "broken"):
            lines.append(f"drafter {snap.drafter_status}")
    elif state == "failed" and snap.last_error:
        lines.append(snap.last_error)
    if snap.worker is not None and snap.worker.state is not EngineState.STOPPED:
        lines.append(f"RPC worker {snap.worker.endpoint}: {_WORKER_WORDS[snap.worker.state]}")
    resident = len(resident_keys(snap))
    if resident > 1:
        lines.append(f"{resident} models loaded")
    return "\n".join(lines)


def drafter_line(snap: AppSnapshot) -> str | None:
    """The drafter as one menu line, or None when there is nothing to say."""
    status = snap.drafter_status
    if status in (None, "none"):
        return None
    if status in ("in", "forced"):
        return "Drafter: in" + (" (forced)" if status == "forced" else "")
    why = f": {snap.drafter_reason}" if snap.drafter_reason else ""
    return f"Drafter {status}{why}"


@dataclass(frozen=True)
class MenuView:
    """The informational part of the tray menu, top to bottom."""

    headline: str  # "SmolLM2 · cpu · ctx 2,048 · KV f16 — ready"
    plan: str | None  # the plan in one line
    drafter: str | None
    blockers: tuple[tuple[str, str], ...]  # (message, advice)
    incidents: tuple[tuple[float, str, str], ...]  # (at, kind, one line), newest first
    endpoint: str | None  # what "Copy endpoint" copies: the gateway's OpenAI base URL
    can_start: bool
    can_stop: bool
    can_restart: bool
    engines: tuple[EngineLine, ...] = ()  # every resident model, in the supervisor's order
    worker: WorkerLine | None = None  # this machine's RPC worker, once one was started
    offers: tuple[WorkerOffer, ...] = ()  # "Use HOST:PORT again", one per worker that is back


def menu_view(snap: AppSnapshot | None, *, now: float | None = None,
              max_incidents: int = 3) -> MenuView:
    """The menu for `snap`; `now` (unix time) dates the resident models' idle times
    (None: they are left out)."""
    if snap is None:
        return MenuView("Stoker is starting", None, None, (), (), None, False, False, False)
    label = model_label(snap) or "no model"
    backend = f" on {snap.backend}" if snap.backend else ""
    headline = f"{label}{backend}: {_STATE_WORDS.get(snap.state, snap.state.value)}"
    if snap.state is EngineState.BACKOFF and snap.next_retry_at is not None:
        headline += " (retry scheduled)"
    incidents = tuple(sorted(((i.at, i.kind, i.summary) for i in snap.incidents),
                             key=lambda t: t[0], reverse=True))[:max_incidents]
    running = snap.state in (EngineState.STARTING, EngineState.READY, EngineState.BACKOFF)
    return MenuView(
        headline=headline,
        plan=snap.plan_summary or plan_line(snap),
        drafter=drafter_line(snap),
        blockers=tuple((b.message, b.advice) for b in snap.blockers),
        incidents=incidents,
        endpoint=client_base_url(snap.gateway_url),
        can_start=snap.state in (EngineState.STOPPED, EngineState.FAILED),
        can_stop=running or any(e.state in _RESIDENT for e in snap.engines),
        can_restart=running or snap.state is EngineState.FAILED,
        engines=tuple(engine_line(e, now) for e in snap.engines),
        worker=worker_line(snap.worker, now) if snap.worker is not None else None,
        offers=worker_offers(snap),
    )


def client_base_url(gateway_url: str | None) -> str | None:
    """The URL a chat client is given: the gateway's OpenAI base (`…/v1`), which is what
    OpenAI-compatible clients ask for as their base URL. None when no gateway runs: the
    engines' own ports take only the gateway's per-launch key, so they are no endpoint."""
    if not gateway_url:
        return None
    return gateway_url.rstrip("/") + "/v1"


# -- resident models ---------------------------------------------------------------------

_RESIDENT = (EngineState.STARTING, EngineState.READY, EngineState.BACKOFF)
_ENGINE_WORDS = {
    EngineState.STOPPED: "stopped",
    EngineState.STARTING: "loading",
    EngineState.READY: "ready",
    EngineState.BACKOFF: "restarting after a crash",
    EngineState.STOPPING: "unloading",
    EngineState.FAILED: "failed",
}


def format_bytes(n: int | None) -> str:
    """MiB below a GiB (weights of small models are tens of MiB), else GiB with 1-2 decimals."""
    if n is None:
        return "?"
    if n < 1024 ** 3:
        return f"{n / 2 ** 20:,.0f} MiB"
    gib = n / 1024 ** 3
    return f"{gib:.2f} GiB" if gib < 10 else f"{gib:.1f} GiB"


def format_duration(seconds: float) -> str:
    """42 s · 3 min · 1 h 05 min: coarse on purpose, the menu is not a stopwatch."""
    s = int(seconds)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


@dataclass(frozen=True)
class EngineLine:
    """One resident model in the menu: a title line and what its submenu offers."""

    model_id: str
    model_path: str | None
    title: str  # "smollm2-135m-instruct:q4_1: ready · CPU 180 MiB · idle 3 min"
    details: tuple[str, ...]  # the plan, why it waits, its error, when it unloads
    can_load: bool  # Load would start it (failed, or unloading): else it is on its way already
    can_unload: bool
    pinned: bool
    progress: str | None = None  # "rendering step 3 of 20 (1.20 s per step)"
    can_cancel: bool = False  # Cancel stops the engine: it cannot cancel the render it is on


def engine_line(e: EngineView, now: float | None) -> EngineLine:
    queued = e.state is EngineState.STOPPED and e.queued is not None
    parts = ["waiting for room" if queued else _ENGINE_WORDS.get(e.state, e.state.value)]
    parts += [f"{dev} {format_bytes(n)}" for dev, n in e.bytes_by_device]
    if e.in_flight:
        parts.append(f"{e.in_flight} request{'s' if e.in_flight != 1 else ''} in flight")
    idle = e.idle_for(now) if now is not None else None
    if idle is not None:
        parts.append(f"idle {format_duration(idle)}")
    if e.pinned:
        parts.append("pinned")
    if e.progress:
        parts.append(e.progress)
    details = []
    if e.plan_summary:
        details.append(e.plan_summary)
    if queued and e.queued is not None:
        details.append(e.queued)
    if e.last_error and e.state in (EngineState.FAILED, EngineState.BACKOFF):
        details.append(e.last_error)
    if e.pinned:
        details.append("Pinned: never unloaded for idleness or for room")
    elif e.idle_timeout_s is None:
        details.append("Never unloaded for idleness")
    else:
        details.append(f"Unloads after {format_duration(e.idle_timeout_s)} without requests")
    return EngineLine(
        model_id=e.model_id, model_path=e.model_path,
        title=f"{e.model_id}: {' · '.join(parts)}",
        details=tuple(details),
        can_load=e.model_path is not None and e.state in (EngineState.FAILED, EngineState.STOPPING),
        can_unload=queued or e.state in _RESIDENT + (EngineState.FAILED,),
        pinned=e.pinned,
        progress=e.progress,
        can_cancel=e.can_cancel and e.model_path is not None,
    )


def resident_keys(snap: AppSnapshot | None) -> frozenset[str]:
    """The model paths (as the supervisor keys them) that hold or await an engine."""
    if snap is None:
        return frozenset()
    return frozenset(e.model_path for e in snap.engines
                     if e.model_path and (e.state in _RESIDENT or e.queued is not None))


def switch_does_something(snap: AppSnapshot | None, key: str) -> bool:
    """Switching to `key` (a resolved model path) loads it and unloads the others: it is a
    no-op only when `key` is running and nothing else is resident. (Switching to a model
    that runs does not restart it.)"""
    if snap is None:
        return True
    others = resident_keys(snap) - {key}
    running = key in resident_keys(snap) or (
        snap.model_path == key and snap.state in (EngineState.READY, EngineState.STARTING))
    return bool(others) or not running


# -- RPC workers -------------------------------------------------------------------------

_WORKER_WORDS = {
    EngineState.STOPPED: "stopped",
    EngineState.STARTING: "starting",
    EngineState.READY: "ready",
    EngineState.BACKOFF: "restarting",
    EngineState.STOPPING: "stopping",
    EngineState.FAILED: "failed",
}


@dataclass(frozen=True)
class WorkerLine:
    """This machine's RPC worker in the menu: a title line and what its submenu offers."""

    title: str  # "RPC worker 127.0.0.1:50052: ready · CPU 23.5 GiB free · 1 restart"
    details: tuple[str, ...]  # what it lends, how it is bound, why it waits or failed
    last_incident: tuple[float, str] | None  # (at, one line): the UI writes the time
    can_start: bool
    can_stop: bool


def worker_line(w: WorkerView, now: float | None) -> WorkerLine:
    """The worker's line for its state: STARTING / READY / BACKOFF (with the seconds to the
    retry when `now` is given) / FAILED / STOPPING / STOPPED."""
    state = _WORKER_WORDS.get(w.state, w.state.value)
    if w.state is EngineState.BACKOFF and w.next_retry_at is not None and now is not None:
        state = f"restarting in {max(0, round(w.next_retry_at - now))} s"
    parts = [state]
    running = w.state in (EngineState.STARTING, EngineState.READY)
    if running:
        parts += [f"{d.name} {format_bytes(d.free_bytes)} free" for d in w.devices]
    if w.restarts:
        parts.append(f"{w.restarts} restart{'s' if w.restarts != 1 else ''}")
    details: list[str] = []
    if w.state is EngineState.READY:
        details.append(f"Other machines use it with --rpc {w.endpoint}")
    for d in w.devices:
        details.append(f"Lends {d.name} ({d.description}): {format_bytes(d.total_bytes)}, "
                       f"{format_bytes(d.free_bytes)} free when it started")
    if w.state is EngineState.READY and not w.devices:
        details.append("Its devices are not listed yet (rpc-server had not written them)")
    if w.last_error and w.state in (EngineState.BACKOFF, EngineState.FAILED):
        details.append(w.last_error)
    if w.state is EngineState.FAILED:
        details.append("Start tries again; the worker log (Open logs folder) says why it stopped")
    if not w.loopback:
        details.append("Reachable from other machines: RPC has no authentication or encryption, "
                       "so keep it on a trusted network")
    elif w.state is not EngineState.STOPPED:
        details.append("Bound to loopback: other machines reach it through an SSH tunnel")
    if w.cache:
        details.append("Keeps received tensors in a local file cache")
    inc = w.last_incident
    return WorkerLine(
        title=f"RPC worker {w.endpoint}: {' · '.join(parts)}",
        details=tuple(details),
        last_incident=(inc.at, f"{inc.summary} {inc.action}".strip()) if inc is not None else None,
        can_start=w.state in (EngineState.STOPPED, EngineState.FAILED),
        can_stop=w.state in (EngineState.STARTING, EngineState.READY, EngineState.BACKOFF),
    )


@dataclass(frozen=True)
class WorkerOffer:
    """An RPC worker that went away is reachable again: the action that uses it again."""

    endpoint: str  # what commands.UseWorkerAgain names
    label: str  # "Use 192.168.1.20:50052 again"
    detail: str


def worker_offers(snap: AppSnapshot | None) -> tuple[WorkerOffer, ...]:
    if snap is None:
        return ()
    model = model_label(snap) or "the model"
    return tuple(WorkerOffer(
        endpoint=ep, label=f"Use {ep} again",
        detail=f"The RPC worker {ep} is reachable again; using it restarts {model} across the workers")
        for ep in snap.workers_back)
