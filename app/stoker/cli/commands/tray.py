"""`stoker` / `stoker tray [MODEL]`: the tray app; headless (like `stoker run --headless`)
when this desktop has no system tray. The work is in app/stoker/desktop/app.py; this only parses."""

from __future__ import annotations

from stoker.cli import build_parser
from stoker.cli.commands import run as run_command


def add_arguments(parser) -> None:
    parser.add_argument("model", nargs="?", metavar="MODEL",
                        help="a GGUF path or model name to start (default: the last used, "
                             "else the demo model)")
    parser.add_argument("--model", dest="model_opt", metavar="MODEL", help="same as MODEL")
    parser.add_argument("--port", type=int, metavar="N",
                        help="the endpoint's loopback port (default: Settings' gateway_port, 7857; "
                             "0: any free port)")


def run_headless(model: str | None) -> int:
    """Exactly `stoker run [MODEL] --headless`: the tray's fallback where no tray exists."""
    args = build_parser(only="run").parse_args(["run", *([model] if model else []), "--headless"])
    return int(run_command.run(args) or 0)


def run(args) -> int:
    # Lazy for start-up time: Qt (PySide6) is imported only for this command, not for every
    # `stoker` subcommand that parses its arguments.
    from stoker.desktop.app import run_tray

    model = getattr(args, "model_opt", None) or getattr(args, "model", None)
    return run_tray(model, headless=lambda: run_headless(model), port=getattr(args, "port", None))
