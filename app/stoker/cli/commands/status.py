"""`stoker status [--json]`: ask the running instance over the control channel how it is.

Exit 0 with the status, or exit 1 and "no Stoker instance is running" when none answers.
The JSON object is versioned (`"schema": 2`, see stoker/fleet/status_report.py).
"""

from __future__ import annotations

import json
import sys

from stoker.fleet.status_report import SCHEMA, status_lines
from stoker.instance.control import request


def add_arguments(parser) -> None:
    parser.add_argument("--json", action="store_true", help="print the versioned JSON object")


def run(args) -> int:

    answer = request("status")
    if answer is None:
        if args.json:
            print(json.dumps({"schema": SCHEMA, "running": False}))
        print("stoker: no Stoker instance is running; start one with `stoker run`.", file=sys.stderr)
        return 1
    if not answer.get("ok"):
        print(f"stoker: the running instance answered: {answer.get('error')}", file=sys.stderr)
        return 1
    status = {**answer["status"], "running": True}
    if args.json:
        print(json.dumps(status, indent=2))
    else:
        print("\n".join(status_lines(status)))
    return 0
