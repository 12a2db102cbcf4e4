"""`stoker engines [--json]`: the llama-server builds Stoker can see, best first.

Only formats what `shell.engines.discover_engines` found; the first usable build is the
one `stoker run` would use (before any quarantine the supervisor applies).
"""

from __future__ import annotations

import json

from stoker.engines.find import discover_engines


def add_arguments(parser) -> None:
    parser.add_argument("--engine-path", default=None, metavar="PATH",
                        help="also consider this llama-server (instead of the configured engine_path)")
    parser.add_argument("--json", action="store_true", help="print a versioned JSON object (schema 1)")


def engine_row(b, selected: bool) -> dict:
    return {
        "id": b.id, "backend": b.backend, "version": b.version, "build": b.build, "commit": b.commit,
        "source": b.source, "status": b.status, "status_reason": b.status_reason,
        "missing_libraries": list(b.missing_libraries), "path": b.binary, "sha256": b.sha256,
        "built_at": b.built_at, "selected": selected,
    }


def run(args) -> int:

    builds = discover_engines(args.engine_path)
    chosen = next((b for b in builds if b.usable), None)
    if args.json:
        print(json.dumps({"schema": 1, "engines": [engine_row(b, b is chosen) for b in builds]}, indent=2))
        return 0
    if not builds:
        print("No llama-server found. Run `stoker setup` to build one, or set engine_path in the settings.")
        return 0
    rows = [("", "ID", "BACKEND", "VERSION", "SOURCE", "STATUS", "PATH")]
    for b in builds:
        version = f"{b.version or '?'} (b{b.build})" if b.build is not None else (b.version or "?")
        rows.append(("*" if b is chosen else "", b.id, b.backend or "?", version, b.source, b.status, b.binary))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[-1])
    for b in builds:
        if b.status_reason:
            print(f"{b.id}: {b.status_reason}")
    if chosen is None:
        print("No usable build; run `stoker setup` to build one.")
    return 0
