"""`stoker engines [--json]`: the builds of every engine kind Stoker can see (llama-server,
rpc-server, sd-server, ds4-server), each kind best first.

Only formats what each kind's driver finds (stoker/engines/drivers); the first usable
llama-server is the one `stoker run` would use (before any quarantine the supervisor applies).
"""

from __future__ import annotations

import json

from stoker.engines.drivers import all_drivers
from stoker.engines.find import discover_engines


def add_arguments(parser) -> None:
    parser.add_argument("--engine-path", default=None, metavar="PATH",
                        help="also consider this llama-server (instead of the configured engine_path)")
    parser.add_argument("--json", action="store_true", help="print a versioned JSON object (schema 1)")


def engine_row(b, selected: bool) -> dict:
    """A llama-server build with everything discovery knows of it."""
    return {
        "kind": "llama-server", "id": b.id, "backend": b.backend, "version": b.version, "build": b.build,
        "commit": b.commit, "source": b.source, "status": b.status, "status_reason": b.status_reason,
        "missing_libraries": list(b.missing_libraries), "path": b.binary, "sha256": b.sha256,
        "built_at": b.built_at, "usable": b.usable, "selected": selected,
    }


def build_row(b) -> dict:
    """A build of another kind, as its driver found it."""
    return {"kind": b.kind.value, "id": b.id, "backend": b.backend, "version": b.version, "source": b.source,
            "status": "ok" if b.usable else "unusable", "status_reason": b.reason, "path": b.path,
            "usable": b.usable, "selected": False}


def run(args) -> int:

    llama = discover_engines(args.engine_path)
    chosen = next((b for b in llama if b.usable), None)
    others = [b for d in all_drivers()[1:] for b in d.builds()]
    if args.json:
        rows = [engine_row(b, b is chosen) for b in llama] + [build_row(b) for b in others]
        print(json.dumps({"schema": 1, "engines": rows}, indent=2))
        return 0
    table = [("", "KIND", "ID", "BACKEND", "VERSION", "SOURCE", "STATUS", "PATH")]
    for b in llama:
        version = f"{b.version or '?'} (b{b.build})" if b.build is not None else (b.version or "?")
        table.append(("*" if b is chosen else "", "llama-server", b.id, b.backend or "?", version, b.source,
                      b.status, b.binary))
    for o in others:
        table.append(("", o.kind.value, o.id, o.backend or "?", o.version or "?", o.source,
                      "ok" if o.usable else "unusable", o.path))
    if len(table) > 1:
        widths = [max(len(r[i]) for r in table) for i in range(len(table[0]) - 1)]
        for r in table:
            print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)) + "  " + r[-1])
    for b in llama:
        if b.status_reason:
            print(f"{b.id}: {b.status_reason}")
    for o in others:
        if o.reason:
            print(f"{o.id}: {o.reason}")
    if not llama:
        print("No llama-server found. Run `stoker setup` to build one, or set engine_path in the settings.")
    elif chosen is None:
        print("No usable build; run `stoker setup` to build one.")
    kinds = {o.kind.value for o in others}
    missing = [f"{k} (`stoker setup {flag}`)" for k, flag in
               (("rpc-server", "--rpc"), ("sd-server", "--image")) if k not in kinds]
    if "ds4" not in kinds:
        missing.append("ds4-server (build antirez/ds4 and set `ds4_server` in the settings)")
    if missing:
        print("Not installed: " + ", ".join(missing) + ".")
    return 0
