"""What `/v1/models` says about each model: the truth a client plans its prompts by.

A client that reads a model listing (Claude Code, Codex, Continue, LM Studio's own
clients …) sizes its prompts and its output by what it finds there; without it Claude Code
assumed a window of 1,000,000 tokens for a model planned at 8,192 per slot. Each entry
therefore carries the context one request may use (the plan's, per slot; None until the
model has been planned, never 0), the longest answer it allows, the capabilities its own
files show, the architecture, the quantization and the loaded state, under LM Studio's
field names where LM Studio has one. Pure: the catalog entry and the engine's view in,
one JSON-ready dict out.
"""

from __future__ import annotations

from typing import Any

from stoker.fleet.snapshot import EngineState, EngineView
from stoker.library.model_ids import CatalogEntry, ModelKind

_STATUS = {EngineState.READY: "loaded", EngineState.STARTING: "loading", EngineState.BACKOFF: "loading",
           EngineState.FAILED: "failed", EngineState.STOPPING: "unloading"}


def model_capabilities(entry: CatalogEntry) -> list[str]:
    """What the model's own files say it can do, in the words OpenAI-side listings use."""
    f = entry.facts
    if entry.kind is not ModelKind.CHAT:
        return [{ModelKind.EMBEDDING: "embeddings", ModelKind.RERANK: "rerank",
                 ModelKind.IMAGE: "image_generation"}[entry.kind]]
    out = ["completion", "chat"]
    if f is not None and f.template_tools:
        out.append("tool_use")
    if f is not None and f.projector:
        out.append("vision")
    if f is not None and f.fill_in_middle:
        out.append("infill")
    return out


def model_entry(entry: CatalogEntry, view: EngineView | None, planned_ctx: int | None) -> dict[str, Any]:
    """One /v1/models entry. `planned_ctx` is the context per slot of the model's last plan
    (kept by the gateway after an unload), used when no engine runs it now."""
    status = "unloaded"
    if view is not None:
        status = _STATUS.get(view.state, "loading" if view.queued else "unloaded")
    f = entry.facts
    ctx = (view.ctx_per_slot if view is not None else None) or planned_ctx or None
    kind = {ModelKind.CHAT: "vlm" if f is not None and f.projector else "llm",
            ModelKind.EMBEDDING: "embeddings", ModelKind.RERANK: "rerank", ModelKind.IMAGE: "image"}[entry.kind]
    out = {"id": entry.id, "object": "model", "created": int(f.modified_at) if f and f.modified_at else 0,
           "owned_by": "stoker", "status": status, "kind": entry.kind.value, "aliases": list(entry.aliases),
           "origin": entry.origin, "pinned": bool(view.pinned) if view else False,
           # LM Studio's names (GET /api/v0/models), so its clients read them as they are.
           "type": kind, "arch": f.architecture if f else None, "compatibility_type": "gguf",
           "quantization": f.quantization if f else None,
           "state": "loaded" if status == "loaded" else "not-loaded",
           "max_context_length": f.n_ctx_train if f else None,
           "capabilities": model_capabilities(entry),
           # What one request may use: the plan's context per slot (None: not planned yet).
           "context_length": ctx,
           "max_output_tokens": ctx if entry.kind is ModelKind.CHAT else None}
    if status == "loaded" and ctx:
        out["loaded_context_length"] = ctx
    return out
