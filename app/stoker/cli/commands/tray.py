"""`stoker` / `stoker tray [MODEL]`: the tray app; headless (like `stoker run --headless`)
when this desktop has no system tray. The work is in app/stoker/desktop/app.py; this only parses."""

from __future__ import annotations


def add_arguments(parser) -> None:
    parser.add_argument("model", nargs="?", metavar="MODEL",
                        help="a GGUF path or model name to start (default: the last used, "
                             "else the demo model)")
    parser.add_argument("--model", dest="model_opt", metavar="MODEL", help="same as MODEL")
    parser.add_argument("--port", type=int, metavar="N",
                        help="the endpoint's loopback port (default: Settings' gateway_port, 7857; "
                             "0: any free port)")


def run(args) -> int:
    from stoker.desktop.app import run_tray  # Qt is imported only for this command

    return run_tray(getattr(args, "model_opt", None) or getattr(args, "model", None),
                    port=getattr(args, "port", None))
