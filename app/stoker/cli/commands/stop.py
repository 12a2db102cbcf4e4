"""`stoker stop`: ask the running instance to stop its engine and exit, and wait until it has.

Exit 0 once it is gone, 1 when none is running or it did not stop within --timeout.
"""

from __future__ import annotations

import sys
import time

from stoker.instance.control import request


def add_arguments(parser) -> None:
    parser.add_argument("--timeout", type=float, default=30.0, metavar="S",
                        help="seconds to wait for the instance to exit (30)")


def run(args) -> int:

    answer = request("stop")
    if answer is None:
        print("stoker: no Stoker instance is running.", file=sys.stderr)
        return 1
    if not answer.get("ok"):
        print(f"stoker: the running instance answered: {answer.get('error')}", file=sys.stderr)
        return 1
    deadline = time.monotonic() + args.timeout
    while time.monotonic() < deadline:
        if request("status", timeout=1.0) is None:
            print("stopped")
            return 0
        time.sleep(0.1)
    print(f"stoker: the instance did not stop within {args.timeout:g} s; see `stoker status`.",
          file=sys.stderr)
    return 1
