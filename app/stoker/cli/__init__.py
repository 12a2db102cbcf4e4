"""The `stoker` command: one subcommand per module in `app/stoker/cli/commands`.

Each command module has `add_arguments(parser)` and `run(args) -> int`. Modules are
imported only when their command runs, so `stoker inspect` never pays for Qt.
Errors reach the user as one sentence on stderr and a non-zero exit code.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from stoker.errors import UserError  # re-exported: commands import it from here

# name -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "setup": ("stoker.cli.commands.setup", "build the engine and fetch the demo model, with progress"),
    "inspect": ("stoker.cli.commands.inspect", "summarise a GGUF model"),
    "plan": ("stoker.cli.commands.plan", "plan a launch without running it"),
    "devices": ("stoker.cli.commands.devices", "list this machine's memory and GPUs"),
    "engines": ("stoker.cli.commands.engines", "list the llama-server builds Stoker can use"),
    "models": ("stoker.cli.commands.models", "list models in the library and added folders"),
    "pull": ("stoker.cli.commands.pull", "get a model from Hugging Face, with the planner's verdict first"),
    "remove": ("stoker.cli.commands.remove", "delete a model Stoker downloaded, or hide another tool's"),
    "run": ("stoker.cli.commands.run", "launch and supervise a model; prints the endpoint"),
    "status": ("stoker.cli.commands.status", "ask the running instance how it is"),
    "stop": ("stoker.cli.commands.stop", "ask the running instance to stop its engine and exit"),
    "ps": ("stoker.cli.commands.ps", "list the models the running instance holds in memory"),
    "load": ("stoker.cli.commands.load", "load a model in the running instance (beside the others if it fits)"),
    "unload": ("stoker.cli.commands.load", "unload a model from the running instance"),
    "diagnose": ("stoker.cli.commands.diagnose", "explain a llama-server log and exit status"),
    "worker": ("stoker.cli.commands.worker", "lend this machine's devices to an engine elsewhere (llama.cpp RPC)"),
    "connect": ("stoker.cli.commands.connect", "point an app (Claude Code, Codex, Zed …) at Stoker, then test it"),
    "bench": ("stoker.cli.commands.bench", "benchmarks that print side-by-side ratios"),
    "tray": ("stoker.cli.commands.tray", "start the tray app (the default with no command)"),
    "desktop": ("stoker.cli.commands.desktop", "add Stoker to (or remove it from) the desktop's launcher"),
}


# Commands that supervise an engine keep Stoker's own log (<logs>/stoker.log).
LONG_RUNNING = frozenset({"run", "tray", "worker"})


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="stoker", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="store_true",
                        help="print Stoker's version and the engine builds it installed, then exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        if only is None or only == name:
            try:
                importlib.import_module(module).add_arguments(p)
            except ModuleNotFoundError as exc:
                if exc.name != module:
                    raise
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv:
        argv = ["tray"]
    command = argv[0] if argv[0] in COMMANDS else None
    parser = build_parser(only=command)
    args = parser.parse_args(argv)
    if args.version:
        # Lazy for start-up time: every `stoker` command imports this module, and only
        # --version needs the engine builds' facts (about_facts reads the installed builds).
        from stoker.engines.about import version_line
        from stoker.engines.about_facts import about_info

        print(version_line(about_info()))
        return 0
    if args.command is None:
        parser.print_usage(sys.stderr)
        return 2
    module_name = COMMANDS[args.command][0]
    try:
        module = importlib.import_module(module_name)
    except KeyboardInterrupt:
        return 0 if args.command in LONG_RUNNING else 130
    except ModuleNotFoundError as exc:
        if exc.name != module_name:
            raise
        print(f"stoker: '{args.command}' is not available in this build.", file=sys.stderr)
        return 2
    try:
        if args.command in LONG_RUNNING:
            # Lazy for start-up time: the log's handlers, the settings store and platformdirs
            # cost ~0.3 s, and short commands (`stoker status`, `ps`) never log to the file.
            from stoker.base.applog import configure_logging

            configure_logging()
        return int(module.run(args) or 0)
    except UserError as exc:
        print(f"stoker: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # The reader of our output left (`stoker bench diagnose | head`): nothing is wrong with
        # Stoker's folders, so say nothing, as a Unix tool stopped by SIGPIPE would, and point
        # stdout at /dev/null so the interpreter's own flush at exit does not fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + 13  # 141: what a shell reports for a process that SIGPIPE ended
    except OSError as exc:  # Stoker's own folders (read-only, full): one sentence, no traceback
        # Lazy for start-up time, like configure_logging above: only a failure needs it.
        from stoker.base.paths import storage_sentence

        print(f"stoker: {storage_sentence(exc)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        # `stoker run` / the tray promise Ctrl-C -> 0 at any moment; other commands were cut short
        return 0 if args.command in LONG_RUNNING else 130


def tray_main() -> int:
    """`stoker-tray`, the gui-scripts entry: on Windows it runs without a console window,
    where sys.stdout/sys.stderr are None; printing must not crash it, so they go nowhere."""
    for name in ("stdout", "stderr"):
        if getattr(sys, name) is None:
            setattr(sys, name, open(os.devnull, "w", encoding="utf-8"))  # noqa: SIM115 - for the process's life
    return main(["tray", *sys.argv[1:]])


if __name__ == "__main__":
    sys.exit(main())
