"""`stoker remove NAME [--yes] [--unhide]`: delete a model Stoker downloaded, hide any other.

Deleting asks first (or takes --yes) and says what it deletes; a model from Ollama,
LM Studio, llama.cpp, another tool's download or an added folder is hidden from
`stoker models` and the tray instead, never deleted (`--unhide` shows it again).
"""

from __future__ import annotations

import sys

from stoker.errors import UserError
from stoker.library.models import find_model, list_models
from stoker.library.removal import carry_out, plan_removal, unhide


def add_arguments(parser) -> None:
    parser.add_argument("model", metavar="NAME", help="a model name from `stoker models` (or its path)")
    parser.add_argument("--yes", action="store_true", help="delete without asking")
    parser.add_argument("--unhide", action="store_true", help="show a hidden model again")


def run(args) -> int:
    from pathlib import Path


    models = list_models(with_summary=False, include_hidden=True)
    model = find_model(args.model, models)
    if model is None:
        target = Path(args.model).expanduser()
        model = next((m for m in models if target.exists() and m.path.resolve() == target.resolve()), None)
    if model is None:
        raise UserError(f"no model named '{args.model}'; see `stoker models --all` for the names.")
    if args.unhide:
        print(f"{model.label} is shown again." if unhide(model) else f"{model.label} was not hidden.")
        return 0
    removal = plan_removal(model)
    if removal.hides:
        carry_out(removal)
        print(f"hidden: {model.label} ({model.origin}) stays where it is, {model.path}; Stoker deletes only "
              f"what it downloaded. `stoker remove {model.label} --unhide` shows it again.")
        return 0
    if not removal.delete:
        raise UserError(f"{model.label}'s files are already gone.")
    print(f"{model.label}: deleting {len(removal.delete)} file(s), {removal.size_bytes / (1 << 20):,.0f} MiB:")
    for f in removal.delete:
        print(f"  {f}")
    if not args.yes:
        if not sys.stdin.isatty():
            raise UserError("not deleting without a yes; run it again with --yes.")
        if input("Delete them? [y/N] ").strip().lower() not in ("y", "yes"):
            print("nothing deleted.")
            return 1
    carry_out(removal)
    print("deleted.")
    return 0
