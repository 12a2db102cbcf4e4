"""`stoker desktop install|uninstall|status`: Stoker in the Linux desktop's launcher.

Writes (or removes exactly) the freedesktop entry and hicolor icons under the user's XDG
data folder; the work is stoker.integration.desktop_entry, this only parses and prints.
"""

from __future__ import annotations

import json

from stoker.errors import UserError
from stoker.integration.desktop_entry import (
    DesktopError,
    install_launcher,
    is_installed,
    read_record,
    uninstall_launcher,
)


def add_arguments(parser) -> None:
    parser.add_argument("action", choices=("install", "uninstall", "status"),
                        help="install: add the launcher entry and icons; uninstall: remove exactly "
                             "what install wrote; status: say whether it is installed")
    parser.add_argument("--json", action="store_true", help="print the files as JSON (schema 1)")


def run(args) -> int:

    if args.action == "status":
        record = read_record()
        files = record.get("files", []) if record else []
        if args.json:
            print(json.dumps({"schema": 1, "installed": is_installed(), "files": files}))
        else:
            print("Stoker is in the desktop's launcher." if is_installed()
                  else "Stoker is not in the desktop's launcher; run `stoker desktop install`.")
        return 0
    try:
        result = install_launcher() if args.action == "install" else uninstall_launcher()
    except DesktopError as exc:
        raise UserError(str(exc)) from None
    if args.json:
        print(json.dumps({"schema": 1, "action": args.action, "files": list(result.files),
                          "refreshed": list(result.refreshed)}))
    else:
        print(result.sentence)
        for f in result.files:
            print(f"  {'wrote' if args.action == 'install' else 'removed'} {f}")
        if result.refreshed:
            print(f"  refreshed with {', '.join(result.refreshed)}")
    return 0
