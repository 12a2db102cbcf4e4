"""`stoker models [--json]`: models in the library, the added folders and other tools' stores.

Only formats `shell.models.list_models` (each file once, with its origin and the store's
own name); a file whose header cannot be read is listed with its one-sentence reason, and
a store entry Stoker cannot run (a non-GGUF Ollama blob) is listed as skipped with why.
"""

from __future__ import annotations

import json
import os

from stoker.library.catalog import ModelCatalog
from stoker.library.models import added_folders, library_folder, list_models
from stoker.library.stores import scan_stores


def add_arguments(parser) -> None:
    parser.add_argument("--json", action="store_true", help="print a versioned JSON object (schema 2)")
    parser.add_argument("--all", action="store_true", help="also list the models hidden in the settings")


def human_size(n: int | None) -> str:
    if n is None:
        return "?"
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def catalog_roles(catalog) -> dict[str, tuple[str | None, str]]:
    """{real path: (gateway id or None, kind)}: a VAE or text encoder that goes with an image
    model has no id of its own; its kind says whose part it is."""
    roles: dict[str, tuple[str | None, str]] = {}
    for entry in catalog.entries:
        roles[entry.path] = (entry.id, entry.kind.value)
        for part in entry.image.files if entry.image is not None else ():
            roles.setdefault(os.path.realpath(part), (None, f"part of {entry.id}"))
    return roles


def model_row(m, ident: str | None = None, kind: str | None = None) -> dict:
    s = m.summary
    return {
        "id": ident,  # the gateway's name for it (the one clients send as "model")
        "kind": kind,  # chat, embedding, rerank, image, "part of ID" (an image model's VAE/encoder)
        "name": m.name, "path": str(m.path), "size_bytes": m.size_bytes, "origin": str(m.origin),
        "origin_name": m.origin_name, "aliases": list(m.aliases),
        "folder": str(m.folder) if m.folder else None, "mmproj": m.mmproj,
        "split_parts": m.split_parts,
        "vision_projector": str(m.vision_projector) if m.vision_projector else None,
        "architecture": getattr(s, "architecture", None),
        "parameter_count": getattr(s, "parameter_count", None),
        "file_type": getattr(s, "file_type", None),
        "n_ctx_train": getattr(s, "n_ctx_train", None),
        "n_layer": getattr(s, "n_layer", None),
        "error": m.error,
    }


def run(args) -> int:

    models = list_models(include_hidden=args.all)
    catalog = ModelCatalog()
    catalog.refresh()
    roles = catalog_roles(catalog.current)
    ids = {str(m.path): roles.get(os.path.realpath(m.path), (None, None)) for m in models}
    if args.json:
        scan = scan_stores()
        print(json.dumps({"schema": 2, "library": str(library_folder()),
                          "folders": [str(f) for f in added_folders()],
                          "stores": [{"origin": str(r.origin), "layout": str(r.layout), "path": r.path,
                                      "why": r.why} for r in scan.roots],
                          "models": [model_row(m, *ids[str(m.path)]) for m in models],
                          "skipped": [{"path": str(s.path), "origin": str(s.origin), "origin_name": s.origin_name,
                                       "reason": s.reason} for s in scan.skipped]}, indent=2))
        return 0
    if not models:
        print(f"No models in {library_folder()}. Run `stoker setup` for the demo model, or add a folder "
              "in the settings (model_folders).")
        return 0
    rows = [("ID", "KIND", "NAME", "ORIGIN", "SIZE", "ARCH", "QUANT", "CONTEXT", "WHERE")]
    for m in models:
        s = m.summary
        extra = f" +{m.split_parts - 1} parts" if m.split_parts > 1 else ""
        extra += " +vision" if m.vision_projector else ""
        ident, kind = ids[str(m.path)]
        rows.append((ident or "-", kind or "-", m.label + extra, str(m.origin), human_size(m.size_bytes),
                     getattr(s, "architecture", None) or "?", getattr(s, "file_type", None) or "?",
                     str(getattr(s, "n_ctx_train", None) or "?"), str(m.path.parent)))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r[:-1], widths, strict=True)) + "  " + r[-1])
    for m in models:
        if m.error:
            print(f"{m.origin_name or m.name}: {m.error}")
    for skipped in scan_stores().skipped:
        print(f"skipped {skipped.origin_name or skipped.path} ({skipped.origin}): {skipped.reason}")
    return 0
