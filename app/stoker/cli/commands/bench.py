"""`stoker bench NAME`: dispatch to `app/stoker/bench/NAME.py` (`add_arguments`, `run`)."""

from __future__ import annotations

import importlib

from stoker.errors import UserError

BENCHES = {
    "inspect": "GGUF summary time beside gguf.GGUFReader",
    "startup": "time from run to READY beside bare llama-server",
    "memory": "analytic memory estimate beside the engine's own accounting",
    "fit": "planned context beside the largest context that really starts",
    "rpc": "decode speed split across two loopback RPC workers beside local, and planned vs allocated bytes",
    "diagnose": "failure diagnosis against real users' logs (tests/data/wild), overall and held out",
    "speed": "predicted decode speed beside the engine's measured tokens/s on this CPU",
    "bundle": "the frozen bundle's size and start-to-tray time beside the venv install's",
    "library": "listing 200 models across Ollama, HF cache and LM Studio, cold and cached",
    "gateway": "what the gateway adds to latency, streaming, disconnects and loads, beside the engine's port",
    "soak": "clients over two models with unloads and kills: answered, failed beside a kill, unexplained",
    "idle": "what an idle Stoker with one model resident costs: its own processes' memory and CPU",
    "residency": "the next turn's time to first token of a 3,000-token chat: warm, restored after an unload, cold",
}


def add_arguments(parser) -> None:
    sub = parser.add_subparsers(dest="bench", metavar="BENCH", required=True)
    for name, help_text in BENCHES.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        try:
            importlib.import_module(f"stoker.bench.{name}").add_arguments(p)
        except ModuleNotFoundError as exc:
            if exc.name != f"stoker.bench.{name}":
                raise


def run(args) -> int:

    try:
        module = importlib.import_module(f"stoker.bench.{args.bench}")
    except ModuleNotFoundError as exc:
        if exc.name != f"stoker.bench.{args.bench}":
            raise
        raise UserError(f"the '{args.bench}' benchmark is not built yet.") from None
    return module.run(args)
