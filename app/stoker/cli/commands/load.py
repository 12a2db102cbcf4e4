"""`stoker load ID [--pin]` / `stoker unload ID`: make a model resident in the running
instance, or let it go once its requests in flight end.

ID is a model id from `stoker models`, an alias, or a GGUF path. Loading admits the model
by its planned bytes like a request does (unloading idle models, or waiting for busy ones);
`--pin` keeps it loaded (no idle timeout, never unloaded for room). Exit 1 when no
instance runs or the name matches nothing.
"""

from __future__ import annotations

import sys

from stoker.instance.control import request


def add_arguments(parser) -> None:
    parser.add_argument("model", metavar="ID", help="a model id, an alias or a GGUF path")
    if parser.prog.endswith("load") and not parser.prog.endswith("unload"):
        parser.add_argument("--pin", action="store_true", help="keep it loaded until unloaded")


def run(args) -> int:

    op = args.command
    fields = {"model": args.model}
    if op == "load" and args.pin:
        fields["pin"] = True
    answer = request(op, fields=fields)
    if answer is None:
        print("stoker: no Stoker instance is running; start one with `stoker run`.", file=sys.stderr)
        return 1
    if not answer.get("ok"):
        print(f"stoker: {answer.get('error')}", file=sys.stderr)
        return 1
    print(answer.get("message", "done"))
    return 0
