"""The status of a running instance as a versioned JSON object and as lines for a terminal.

The running instance turns its latest AppSnapshot into `status_object` and sends it over
the control channel; `stoker status` prints it as JSON or as `status_lines`. Keeping both
here means the JSON schema and the human text cannot drift apart. Pure: `now` is passed in.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from stoker.fleet.snapshot import AppSnapshot, EngineView, WorkerView

# 2: `gateway` (url, port) and `engines[]` (one entry per resident model); `endpoint` is the
# gateway's URL where one runs (the engines' private ports are in `engines[].endpoint`).
# Added within 2: `plan_decisions` and `blockers`; `worker` (this machine's RPC worker) and
# `rpc_workers_back` (workers that went away and are reachable again) — new keys only,
# nothing changed meaning. `yielded` (models unloaded because other applications needed the
# memory, newest last) and `engines[].reload_s` (its measured load time) are new within 2 too.
SCHEMA = 2


def running_status(snap: AppSnapshot, now: float, *, instance_pid: int, tray_shown: bool | None,
                   gateway_pid: int | None) -> dict[str, Any]:
    """The running instance's answer to `stoker status --json` and `GET /stoker/v1/status`
    (the control channel and the gateway process build it from the same snapshot)."""
    status = status_object(replace(snap, tray_shown=tray_shown), now, instance_pid=instance_pid)
    status["tray_shown"] = tray_shown
    status["running"] = True
    if status["gateway"] is not None:
        status["gateway"]["pid"] = gateway_pid  # the endpoint's own process (None while it restarts)
    return status


def status_object(snap: AppSnapshot, now: float, *, instance_pid: int | None = None) -> dict[str, Any]:
    last = snap.incidents[-1] if snap.incidents else None
    uptime = snap.uptime(now)
    return {
        "schema": SCHEMA,
        "seq": snap.seq,
        "state": snap.state.value,
        "model": snap.model_name,
        "model_path": snap.model_path,
        "engine_build": snap.engine_build,
        "backend": snap.backend,
        "endpoint": snap.endpoint,
        "pid": snap.pid,
        "ctx": snap.ctx,
        "slots": snap.slots,
        "kv_type_k": snap.kv_type_k,
        "kv_type_v": snap.kv_type_v,
        "plan_summary": snap.plan_summary,
        "drafter_status": snap.drafter_status,
        "uptime_s": None if uptime is None else round(uptime, 1),
        "restarts": snap.restarts,
        "next_retry_at": snap.next_retry_at,
        "last_error": snap.last_error,
        "incidents": len(snap.incidents),
        "last_incident": None if last is None else {
            "at": last.at, "kind": last.kind, "summary": last.summary, "evidence": last.evidence,
            "advice": last.advice, "action": last.action},
        "instance_pid": instance_pid,
        "problems": list(snap.problems),
        "model_id": snap.model_id,
        "gateway": gateway_object(snap.gateway_url),
        "engines": [engine_object(e, now) for e in snap.engines],
        # What the focused model's plan decided and why (where its layers run: this machine,
        # RPC workers), and what blocks or could improve a launch (a worker that is back).
        "plan_decisions": [{"what": what, "why": why} for what, why in snap.plan_decisions],
        "blockers": [{"kind": b.kind, "message": b.message, "advice": b.advice} for b in snap.blockers],
        # HOST:PORT of each RPC worker a model was re-planned without that accepts connections
        # again; the tray's "Use HOST:PORT again" re-plans with it (commands.UseWorkerAgain).
        "rpc_workers_back": list(snap.workers_back),
        "worker": None if snap.worker is None else worker_object(snap.worker),
        "yielded": [{"at": y.at, "model_id": y.model_id, "freed_bytes": y.freed_bytes, "note": y.note}
                    for y in snap.yielded],
    }


def worker_object(w: WorkerView) -> dict[str, Any]:
    """This machine's RPC worker: where it listens, its state, what it lends (bytes)."""
    inc = w.last_incident
    return {
        "endpoint": w.endpoint,
        "host": w.host,
        "port": w.port,
        "state": w.state.value,
        "pid": w.pid,
        "restarts": w.restarts,
        "cache": w.cache,
        "loopback": w.loopback,
        "devices": [{"name": d.name, "description": d.description, "total_bytes": d.total_bytes,
                     "free_bytes": d.free_bytes} for d in w.devices],
        "next_retry_at": w.next_retry_at,
        "last_error": w.last_error,
        "last_incident": None if inc is None else {
            "at": inc.at, "kind": inc.kind, "summary": inc.summary, "evidence": inc.evidence,
            "advice": inc.advice, "action": inc.action},
    }


def gateway_object(url: str | None) -> dict[str, Any] | None:
    if not url:
        return None
    port = url.rsplit(":", 1)[-1].split("/", 1)[0]
    return {"url": url, "openai_base_url": f"{url}/v1", "port": int(port) if port.isdigit() else None}


def engine_object(e: EngineView, now: float) -> dict[str, Any]:
    idle = e.idle_for(now)
    return {
        "id": e.model_id,
        "model_path": e.model_path,
        "state": e.state.value,
        "queued": e.queued,
        "pid": e.pid,
        "endpoint": e.endpoint,
        "engine_build": e.engine_build,
        "backend": e.backend,
        "engine_kind": e.engine_kind,
        "ctx": e.ctx,
        "plan_summary": e.plan_summary,
        "progress": e.progress,
        "bytes": {dev: b for dev, b in e.bytes_by_device},
        "last_used_at": e.last_used_at,
        "idle_s": None if idle is None else round(idle, 1),
        "idle_timeout_s": e.idle_timeout_s,
        "reload_s": e.reload_s,
        "in_flight": e.in_flight,
        "pinned": e.pinned,
        "restarts": e.restarts,
        "last_error": e.last_error,
    }


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h}h {m:02d}m" if h else (f"{m}m {s:02d}s" if m else f"{s}s")


def status_lines(obj: dict[str, Any]) -> list[str]:
    """Human lines for `stoker status`; only what is known is shown."""
    lines = [f"state:     {obj['state']}"]
    if obj.get("model"):
        lines.append(f"model:     {obj['model']}")
    if obj.get("endpoint"):
        lines.append(f"endpoint:  {obj['endpoint']}/v1")
    for e in obj.get("engines") or ():
        mem = sum((e.get("bytes") or {}).values())
        extra = f", {mem / 2**20:,.0f} MiB" if mem else ""
        extra += f", idle {_duration(e['idle_s'])}" if e.get("idle_s") is not None else ""
        extra += f", {e['in_flight']} in flight" if e.get("in_flight") else ""
        extra += ", pinned" if e.get("pinned") else ""
        extra += f", loads in {e['reload_s']:.1f} s" if e.get("reload_s") is not None else ""
        lines.append(f"  {e['id']}: {e['state']}{extra}" + (f" ({e['queued']})" if e.get("queued") else ""))
    engine = " ".join(x for x in (obj.get("backend"), f"({obj['engine_build']})"
                                  if obj.get("engine_build") else None) if x)
    if engine:
        lines.append(f"engine:    {engine}" + (f", pid {obj['pid']}" if obj.get("pid") else ""))
    elif obj.get("pid"):
        lines.append(f"pid:       {obj['pid']}")
    if obj.get("ctx") is not None or obj.get("kv_type_k"):
        ctx = f"{obj['ctx']:,}" if obj.get("ctx") is not None else "unknown"
        slots = f", {obj['slots']} slot(s)" if obj.get("slots") else ""
        lines.append(f"context:   {ctx}{slots}, KV {obj.get('kv_type_k')}/{obj.get('kv_type_v')}")
    if obj.get("uptime_s") is not None:
        lines.append(f"uptime:    {_duration(obj['uptime_s'])}")
    lines.append(f"restarts:  {obj['restarts']}")
    if obj.get("last_error"):
        lines.append(f"error:     {obj['last_error']}")
    for problem in obj.get("problems") or ():
        lines.append(f"problem:   {problem}")
    worker = obj.get("worker")
    if worker:
        lends = ", ".join(f"{d['name']} {d['free_bytes'] / 2**30:.1f} GiB free" for d in worker["devices"]
                          if d.get("free_bytes") is not None)
        lines.append(f"worker:    {worker['endpoint']} {worker['state']}" + (f", lends {lends}" if lends else "")
                     + f", {worker['restarts']} restart(s)")
    for ep in obj.get("rpc_workers_back") or ():
        lines.append(f"back:      RPC worker {ep} is reachable again (the tray offers to use it again)")
    for y in (obj.get("yielded") or ())[-3:]:
        lines.append(f"yielded:   {y['note']}")
    inc = obj.get("last_incident")
    if inc:
        lines.append(f"incident:  {inc['summary']} ({inc['kind']}); {inc['action']}")
        if inc.get("advice"):
            lines.append(f"advice:    {inc['advice']}")
    return lines
