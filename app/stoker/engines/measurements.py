"""Measured memory lines on disk: `<data>/measurements.json`, one entry per (model file, engine build, settings).

Every launch's engine report (`core/engine_log.parse_memory_report`) adds a point here
(`record_launch`): per device, what each component took and what the plan's analytic
estimate said for it (`LaunchPlan.analytic_devices`, never the calibrated figures the plan
may have shown). `lookup` hands the planner a `core.measured.MeasuredMemory` whose lines
come from at least two contexts. A measurement is only true for the exact file and the
exact build it was taken with, so each entry carries both identities and is dropped on read
as soon as the model file (path, size, mtime_ns) or the engine build (binary sha256, size,
mtime_ns and its libraries' sizes and mtimes) no longer matches.

It must not decide anything about plans; it keeps numbers and says whether they still hold.
"""

from __future__ import annotations

import os
from pathlib import Path

from stoker.base.paths import stoker_paths
from stoker.base.store import read_json, write_json_atomic
from stoker.engines.engine_log import EngineMemoryReport
from stoker.engines.identity import binary_identity
from stoker.planning.measured import MeasuredKey, MeasuredMemory, MeasuredPoint, fit_line, kv_cells

# 2: points carry the analytic estimate beside the engine's bytes. Schema-1 points lack it and
# cannot calibrate anything, so a schema-1 file is dropped whole (the next launches re-measure).
SCHEMA = 2
MAX_POINTS_PER_LINE = 8  # the newest points win; old ones describe the same line anyway

def _read_json(path: Path):
    # A torn or hand-edited file is moved aside by the store; measurements are a cache, so
    # the next launch simply starts measuring again.
    value, _problem = read_json(path)
    return value


def store_path() -> Path:
    return stoker_paths().data / "measurements.json"


def _identity_or_none(fn, path) -> str | None:
    try:
        return fn(path)
    except OSError:
        return None


def model_identity(model_path: str | os.PathLike) -> str:
    """Resolved path, size and mtime_ns: replacing or touching the file changes it."""
    p = Path(model_path).resolve()
    st = p.stat()
    return f"{p}|{st.st_size}|{st.st_mtime_ns}"


def _load_valid() -> list[dict]:
    """Entries whose model file and build are still the ones measured; the rest are dropped."""
    data = _read_json(store_path())
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        return []
    keep, model_ids, build_ids = [], {}, {}
    for e in data.get("entries", ()):
        try:
            mpath, bpath = e["model_path"], e["binary"]
        except (KeyError, TypeError):
            continue
        if mpath not in model_ids:
            model_ids[mpath] = _identity_or_none(model_identity, mpath)
        if bpath not in build_ids:
            build_ids[bpath] = binary_identity(bpath)
        if e.get("model_identity") == model_ids[mpath] and e.get("build_identity") == build_ids[bpath]:
            keep.append(e)
    return keep


def _settings(plan) -> dict:
    """The settings a line depends on, from a LaunchPlan (or anything with its field names)."""
    return {
        "type_k": getattr(plan, "kv_type_k", None) or "f16",
        "type_v": getattr(plan, "kv_type_v", None) or "f16",
        "flash_attn": getattr(plan, "flash_attn", None) or "auto",
        "slots": int(getattr(plan, "slots", 1) or 1),
        "kv_unified": bool(getattr(plan, "kv_unified", False)),
        "ubatch": int(getattr(plan, "ubatch", None) or 512),
    }


def record_launch(model_path, binary, plan, report: EngineMemoryReport) -> int:
    """Add this launch's per-device buffers as points; returns how many devices were recorded.

    Nothing is recorded from a report that lacks weights, KV or compute lines (a failed or
    interrupted load), so a half-read log can never become a line. A device the plan has no
    analytic estimate for (a plan not made by the planner) is kept but calibrates nothing.
    """
    if not report.complete:
        return 0
    mid, bid = model_identity(model_path), binary_identity(binary)
    if bid is None:
        return 0  # the build went away: nothing it measured can be keyed to it
    settings = _settings(plan)
    analytic = {a.name: a for a in getattr(plan, "analytic_devices", ()) or ()}
    ctx = report.n_ctx or int(plan.ctx)
    cells = kv_cells(ctx, settings["slots"], settings["kv_unified"])
    entries = _load_valid()
    mpath, bpath = str(Path(model_path).resolve()), str(Path(binary).resolve())
    recorded = 0
    for dev in report.devices:
        key = dict(settings, device=dev.device)
        entry = next((e for e in entries if e["model_path"] == mpath and e["binary"] == bpath
                      and e["key"] == key), None)
        if entry is None:
            entry = {"model_path": mpath, "binary": bpath, "model_identity": mid,
                     "build_identity": bid, "key": key, "points": []}
            entries.append(entry)
        point = {"ctx": ctx, "cells": cells, "weights": dev.model_bytes, "kv": dev.kv_bytes,
                 "compute": dev.compute_bytes + dev.output_bytes}
        est = analytic.get(dev.device)
        if est is not None:
            point.update(est_weights=est.weights_bytes, est_kv=est.kv_bytes, est_compute=est.compute_bytes)
        entry["points"] = [p for p in entry["points"] if p.get("cells") != cells] + [point]
        entry["points"] = entry["points"][-MAX_POINTS_PER_LINE:]
        recorded += 1
    write_json_atomic(store_path(), {"schema": SCHEMA, "entries": entries})
    return recorded


def _int_or_none(v) -> int | None:
    return None if v is None else int(v)


def lookup(model_path, binary) -> MeasuredMemory:
    """Every line measured for this model file under this build (empty when none holds)."""
    mid = _identity_or_none(model_identity, model_path) or ""
    bid = binary_identity(binary) or ""
    lines = []
    for e in _load_valid():
        if e["model_identity"] != mid or e["build_identity"] != bid:
            continue
        try:
            pts = [MeasuredPoint(int(p["ctx"]), int(p["cells"]), int(p["weights"]), int(p["kv"]),
                                 int(p["compute"]), _int_or_none(p.get("est_weights")),
                                 _int_or_none(p.get("est_kv")), _int_or_none(p.get("est_compute")))
                   for p in e["points"]]
            k = e["key"]
            key = MeasuredKey(mid, bid, str(k["device"]), str(k["type_k"]), str(k["type_v"]),
                              str(k["flash_attn"]), int(k["slots"]), bool(k["kv_unified"]),
                              int(k["ubatch"]))
        except (KeyError, TypeError, ValueError):
            continue
        line = fit_line(pts)
        if line is not None:
            lines.append((key, line))
    return MeasuredMemory(mid, bid, tuple(lines))


def points_for(model_path, binary) -> int:
    """How many points are stored for this model and build (lines or not yet): for status text."""
    mid = _identity_or_none(model_identity, model_path)
    bid = binary_identity(binary)
    return sum(len(e["points"]) for e in _load_valid()
               if e["model_identity"] == mid and e["build_identity"] == bid)
