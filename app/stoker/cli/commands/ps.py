"""`stoker ps [--json]`: the models the running instance holds, as Ollama's `ps` shows them.

One line per resident model: id, state, memory per device, idle time or requests in flight,
pinned; `--json` prints the status object's `engines[]` (schema 2). Exit 1 when no instance runs.
"""

from __future__ import annotations

import json
import sys

from stoker.instance.control import request


def add_arguments(parser) -> None:
    parser.add_argument("--json", action="store_true", help="print engines[] as JSON")


def _mib(n: int) -> str:
    return f"{n / 2**30:.1f} GiB" if n >= 2**30 else f"{n / 2**20:.0f} MiB"


def run(args) -> int:

    answer = request("ps")
    if answer is None:
        print("stoker: no Stoker instance is running; start one with `stoker run`.", file=sys.stderr)
        return 1
    if not answer.get("ok"):
        print(f"stoker: the running instance answered: {answer.get('error')}", file=sys.stderr)
        return 1
    engines = answer["status"].get("engines") or []
    if args.json:
        print(json.dumps({"schema": answer.get("schema"), "gateway": answer["status"].get("gateway"),
                          "engines": engines}, indent=2))
        return 0
    gateway = (answer["status"].get("gateway") or {}).get("url")
    if gateway:
        print(f"endpoint: {gateway}/v1")
    if not engines:
        print("no model is loaded; a request to the endpoint (or `stoker load ID`) loads one.")
        return 0
    rows = [("ID", "STATE", "MEMORY", "IDLE", "IN FLIGHT", "PINNED")]
    for e in engines:
        mem = ", ".join(f"{dev} {_mib(b)}" for dev, b in (e.get("bytes") or {}).items()) or "-"
        idle = "-" if e.get("idle_s") is None else f"{e['idle_s']:.0f} s"
        state = e["state"] + (" (waiting for room)" if e.get("queued") else "")
        rows.append((e["id"], state, mem, idle, str(e.get("in_flight", 0)), "yes" if e.get("pinned") else "no"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    return 0
