"""`stoker connect APP [--undo] [--model ID] [--show-key]`: point an app at Stoker, then test it.

APP is one of claude-code, codex, opencode, continue, zed, open-webui, llm. It asks the running
instance for the endpoint, the chat models and the chosen model's real context window, writes
that app's own settings file (backed up first; `--undo` restores it), prints the environment
lines where the app reads only those, and sends one request the way the app would, reported
in one line. Exit 0 when the test request was answered, 1 when it was not or no Stoker runs,
2 for a name it does not know. The logic is stoker/integration/app_connect.py, shared with the
tray's "Connect an app…".
"""

from __future__ import annotations

import sys

from stoker.errors import UserError
from stoker.integration.app_configs import App, app_named
from stoker.integration.app_connect import ConnectError, connect_and_test, undo


def add_arguments(parser) -> None:
    parser.add_argument("app", metavar="APP", help="one of: " + ", ".join(a.value for a in App))
    parser.add_argument("--undo", action="store_true", help="give back the settings as they were before")
    parser.add_argument("--model", metavar="ID", help="the model the app uses (default: the loaded one)")
    parser.add_argument("--show-key", action="store_true",
                        help="print the API key in full in environment lines (it is masked otherwise)")


def run(args) -> int:

    app = app_named(args.app)
    if app is None:
        raise UserError(f"Stoker cannot connect {args.app!r}; choose one of: "
                        f"{', '.join(a.value for a in App)}.")
    try:
        if args.undo:
            for line in undo(app):
                print(line)
            return 0
        outcome = connect_and_test(app, args.model, show_key=args.show_key)
    except ConnectError as exc:
        print(f"stoker: {exc}", file=sys.stderr)
        return 1
    for line in outcome.lines:
        print(line)
    for sentence in outcome.problems:
        print(f"stoker: {sentence}", file=sys.stderr)
    return 0 if outcome.answered else 1
