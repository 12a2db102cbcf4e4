"""What the tray says about a snapshot: the icon state, the tooltip and the menu's lines.

The tray must tell the truth at a glance, so the mapping from engine state, blockers and
drafter status to one of five looks is decided here, once, where it can be tested without
a display. Values in, values out: no Qt, no clock (times are formatted by the UI).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from stoker.core.snapshot import AppSnapshot, EngineState

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
        if snap.blockers or snap.drafter_status in ("left-out", "broken"):
            return "degraded"
        return "ready"
    return "stopped"


def model_label(snap: AppSnapshot) -> str | None:
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
    endpoint: str | None
    can_start: bool
    can_stop: bool
    can_restart: bool


def menu_view(snap: AppSnapshot | None, *, max_incidents: int = 3) -> MenuView:
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
        endpoint=snap.endpoint if snap.state is EngineState.READY else None,
        can_start=snap.state in (EngineState.STOPPED, EngineState.FAILED),
        can_stop=running,
        can_restart=running or snap.state is EngineState.FAILED,
    )
