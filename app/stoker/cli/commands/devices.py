"""`stoker devices [--json] [--engine PATH] [--machine FILE]`: this machine's memory and GPUs.

Shows what the planner will plan with: RAM, cores, whether memory is unified, and each
GPU the engine build lists (or, with --machine, the machine a description file gives).
Only formats; the facts come from `shell.probe` and `core.machine.machine_from_json`.
"""

from __future__ import annotations

import json
from pathlib import Path

from stoker.engines.find import discover_engines
from stoker.engines.probe import probe_machine
from stoker.errors import UserError
from stoker.planning.machine import machine_from_json

GIB = 1024**3


def add_arguments(parser) -> None:
    parser.add_argument("--json", action="store_true", help="print a versioned JSON object (schema 1)")
    parser.add_argument("--engine", metavar="PATH", default=None,
                        help="list the GPUs this llama-server sees (default: the best discovered build)")
    parser.add_argument("--machine", metavar="FILE", default=None,
                        help="show a machine described in a JSON file instead of this one")
    parser.add_argument("--no-cache", action="store_true",
                        help="run --list-devices again even if the engine has not changed")


def _default_engine() -> tuple[str | None, str | None]:
    """(binary, note): the best usable discovered build, when engine discovery exists."""
    try:
        builds = discover_engines()
    except Exception as exc:  # discovery is best effort here: devices still lists RAM and vendor GPUs
        return None, f"Engine discovery failed ({exc}), so GPUs are listed from vendor tools only."
    usable = [b for b in builds if getattr(b, "usable", True)]
    if not usable:
        return None, "No usable llama-server build was found; run `stoker setup` to list the GPUs it would use."
    return str(usable[0].binary), None


def _load_machine(args):

    if args.machine:

        path = Path(args.machine).expanduser()
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise UserError(f"could not read the machine file {path} ({exc.strerror or exc}); "
                            "check the path.") from None
        try:
            return machine_from_json(text, str(path)), None
        except ValueError as exc:
            raise UserError(f"{exc}.") from None

    engine, note = (args.engine, None) if args.engine else _default_engine()
    if args.engine and not Path(args.engine).expanduser().is_file():
        raise UserError(f"no engine binary at {args.engine}; give the path to a llama-server file.")
    machine = probe_machine(engine, use_cache=not args.no_cache)
    if note:
        from dataclasses import replace

        machine = replace(machine, notes=(*machine.notes, note))
    return machine, engine


def machine_to_dict(machine, engine: str | None) -> dict:
    return {
        "schema": 1,
        "source": machine.source,
        "engine": engine,
        "os": machine.os,
        "arch": machine.arch,
        "ram_total_bytes": machine.ram_total_bytes,
        "ram_available_bytes": machine.ram_available_bytes,
        "physical_cores": machine.physical_cores,
        "logical_cores": machine.logical_cores,
        "unified_memory": machine.unified_memory,
        "devices": [
            {
                "name": d.name, "description": d.description, "backend": d.backend, "kind": d.kind,
                "total_bytes": d.total_bytes, "free_bytes": d.free_bytes, "compute_cap": d.compute_cap,
                "gfx_target": d.gfx_target, "driver_cuda_version": d.driver_cuda_version,
            }
            for d in machine.devices
        ],
        "notes": list(machine.notes),
    }


def _gib(n: int | None) -> str:
    return "?" if n is None else f"{n / GIB:.1f} GiB"


def format_table(machine, engine: str | None) -> str:
    cores = f"{machine.physical_cores or '?'} physical / {machine.logical_cores or '?'} logical"
    lines = [
        f"Machine   {machine.os} {machine.arch}" + ("" if machine.source == "probed" else f"  ({machine.source})"),
        f"RAM       {_gib(machine.ram_total_bytes)} total, {_gib(machine.ram_available_bytes)} available",
        f"Cores     {cores}",
        f"Memory    {'unified (the GPU uses system RAM)' if machine.unified_memory else 'separate GPU memory'}",
    ]
    if engine:
        lines.append(f"Engine    {engine}")
    if machine.devices:
        rows = [("DEVICE", "BACKEND", "KIND", "TOTAL", "FREE", "DETAILS", "DESCRIPTION")]
        for d in machine.devices:
            details = ", ".join(x for x in (
                f"sm {d.compute_cap}" if d.compute_cap else "",
                f"CUDA {d.driver_cuda_version}" if d.driver_cuda_version else "",
                d.gfx_target or "") if x) or "-"
            rows.append((d.name, d.backend, d.kind, _gib(d.total_bytes), _gib(d.free_bytes), details, d.description))
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
        lines.append("")
        lines += ["  ".join(c.ljust(w) for c, w in zip(r[:-1], widths, strict=True)) + "  " + r[-1] for r in rows]
    else:
        lines.append("GPUs      none (models run on the CPU)")
    for note in machine.notes:
        lines.append(f"note: {note}")
    return "\n".join(lines)


def run(args) -> int:
    machine, engine = _load_machine(args)
    if args.json:
        print(json.dumps(machine_to_dict(machine, engine), indent=2))
    else:
        print(format_table(machine, engine))
    return 0
