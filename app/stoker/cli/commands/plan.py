"""`stoker plan MODEL`: what Stoker would launch for a model, and why, without launching it.

Reads the model header (shell.gguf_io), this machine (shell.probe) or a machine file
(`--machine FILE`, core.machine.machine_from_json), turns flags into overrides checked by
core.overrides, and prints the planner's decisions as a table, or as JSON (schema 1).
The argv shown uses the best discovered engine build (else the bare name `llama-server`)
and the placeholder port 8080; `stoker run` picks a free port at launch time.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from enum import Enum
from pathlib import Path

from stoker.base.overrides import validate_overrides
from stoker.base.paths import stoker_paths
from stoker.base.store import OverridesStore, moved_aside_problems
from stoker.engines.drivers.inputs import EngineChoice
from stoker.errors import UserError
from stoker.fleet.launcher import RealPreparer, merge_overrides
from stoker.fleet.pipeline import load_settings
from stoker.library.catalog import ModelCatalog
from stoker.library.gguf_io import load_summary
from stoker.library.model_ids import base_id
from stoker.library.models import resolve_model
from stoker.planning.machine import machine_from_json
from stoker.planning.plan import LaunchPlan, PlanRefusal
from stoker.planning.speed import speed_text

PLACEHOLDER_PORT = 8080
SCHEMA = 1


def add_arguments(parser) -> None:
    parser.add_argument("model", nargs="?", help="a GGUF path or a model name from `stoker models`")
    parser.add_argument("--machine", metavar="FILE", help="plan for the machine described in this JSON file")
    parser.add_argument("--json", action="store_true", help="print a versioned JSON object (schema 1)")
    parser.add_argument("--ctx", metavar="N", help="total context (-c), tokens")
    parser.add_argument("--slots", metavar="N", help="parallel slots (-np)")
    parser.add_argument("--kv", metavar="TYPE", help="KV cache type for both K and V")
    parser.add_argument("--kv-k", metavar="TYPE", help="K cache type")
    parser.add_argument("--kv-v", metavar="TYPE", help="V cache type")
    parser.add_argument("--kv-unified", action="store_const", const=True, default=None,
                        help="one KV pool shared by all slots")
    parser.add_argument("--flash-attn", metavar="on|off|auto")
    parser.add_argument("--gpu-layers", metavar="N|all|auto")
    parser.add_argument("--n-cpu-moe", metavar="N", help="keep the experts of the first N blocks in RAM")
    parser.add_argument("--spec", metavar="TYPE", help="speculative type (draft-simple, draft-mtp, none …)")
    parser.add_argument("--draft", metavar="PATH", help="draft model GGUF")
    parser.add_argument("--draft-max", metavar="N")
    parser.add_argument("--spec-sampling", metavar="greedy|probabilistic")
    parser.add_argument("--swa-full", action="store_const", const=True, default=None)
    parser.add_argument("--threads", metavar="N")
    parser.add_argument("--batch", metavar="N")
    parser.add_argument("--ubatch", metavar="N")
    parser.add_argument("--mmproj", metavar="PATH", help="vision projector GGUF")
    parser.add_argument("--extra", metavar="ARGS", help="extra llama-server arguments, as one shell-quoted string")


def overrides_from_args(args) -> dict:
    raw = {"ctx": args.ctx, "slots": args.slots, "kv_type": args.kv, "kv_type_k": args.kv_k,
           "kv_type_v": args.kv_v, "kv_unified": args.kv_unified, "flash_attn": args.flash_attn,
           "gpu_layers": args.gpu_layers, "n_cpu_moe": args.n_cpu_moe, "spec_type": args.spec,
           "draft_model": args.draft, "draft_max": args.draft_max, "spec_sampling": args.spec_sampling,
           "swa_full": args.swa_full, "threads": args.threads, "batch": args.batch, "ubatch": args.ubatch,
           "extra_args": args.extra}
    return {k: v for k, v in raw.items() if v is not None}


def _flag_name(sentence: str) -> str:
    """Say the CLI flag instead of the stored key in an override error."""
    for key, flag in (("kv_type_k", "--kv-k"), ("kv_type_v", "--kv-v"), ("kv_type", "--kv"),
                      ("draft_model", "--draft"), ("spec_type", "--spec"), ("extra_args", "--extra"),
                      ("n_cpu_moe", "--n-cpu-moe"), ("gpu_layers", "--gpu-layers"),
                      ("flash_attn", "--flash-attn"), ("draft_max", "--draft-max"),
                      ("spec_sampling", "--spec-sampling")):
        if sentence.startswith(key + " "):
            return flag + sentence[len(key):]
    word = sentence.split(" ", 1)[0]
    return f"--{word}{sentence[len(word):]}" if word in ("ctx", "slots", "threads", "batch", "ubatch") else sentence


def _load_machine(args):
    """The machine described in `--machine FILE`."""

    path = Path(args.machine).expanduser()
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UserError(f"cannot read the machine file {path} ({exc.strerror}); check the path.") from None
    try:
        return machine_from_json(text, str(path))
    except ValueError as exc:
        raise UserError(f"{exc}.") from None


def _summary(path: str, what: str):

    try:
        return load_summary(path)
    except FileNotFoundError:
        raise UserError(f"the {what} {path} does not exist; check the path.") from None
    except ValueError as exc:  # GGUFError is a ValueError with one sentence
        raise UserError(f"cannot read the {what} {path}: {exc}") from None


def run(args) -> int:

    overrides, errors = validate_overrides(overrides_from_args(args))
    if errors:
        raise UserError(_flag_name(errors[0]) + ("." if not errors[0].endswith(".") else ""))
    model_path = resolve_model(args.model)
    _summary(str(model_path), "model")  # one sentence for a missing or broken file
    if overrides.draft_model:
        _summary(overrides.draft_model, "draft model")
    if args.mmproj:
        _summary(args.mmproj, "vision projector")
    # The launch's own inputs: saved overrides under these flags, Settings' reserve and budget,
    # the model's projector, the build a launch would choose, its measured lines and broken
    # drafters, the RPC workers (fleet/pipeline.gather_plan_inputs, through the launcher).
    store = OverridesStore(stoker_paths().config)
    overrides = merge_overrides(store.get(model_path), overrides)
    settings, problems = load_settings()
    for problem in (*moved_aside_problems(), *problems, *store.problems):
        print(f"stoker: {problem}", file=sys.stderr)
    preparer = RealPreparer(remember_last_model=False)
    driver = preparer.driver_of(model_path)
    if args.machine:
        machine = _load_machine(args)
        # A described machine runs whatever build fits its GPUs; name the backend from them.
        # Lines measured here and this build's ledger do not apply to it.
        build = EngineChoice(None, backend=machine.gpus[0].backend if machine.gpus else "cpu")
    else:
        try:
            build = preparer.choose_build(driver)
        except (UserError, OSError, ValueError):  # no build: the argv just names the binary
            build = EngineChoice(None, backend="cpu")
        machine = preparer.machine_for(driver, build)
    try:
        inputs = preparer.plan_inputs(model_path, held_bytes={}, driver=driver, build=build, machine=machine,
                                      settings=settings, overrides=overrides, use_measured=not args.machine,
                                      projector=args.mmproj,
                                      broken_drafters=frozenset() if args.machine else None)
        result = driver.plan(inputs)
    except (OSError, ValueError) as exc:
        raise UserError(f"cannot plan {model_path}: {exc}") from None
    if isinstance(result, PlanRefusal):
        if args.json:
            print(json.dumps(refusal_json(result, machine), indent=2))
        else:
            print(refusal_text(result), file=sys.stderr)
        return 3
    spec = driver.launch_spec(result, inputs, binary=build.binary or driver.description.binary_name,
                              port=PLACEHOLDER_PORT, alias=None)
    if args.json:
        print(json.dumps(plan_json(result, spec, machine, driver), indent=2))
    elif isinstance(result, LaunchPlan):
        print(plan_table(result, spec, machine))
    else:
        print(other_plan_table(result, spec, machine, driver))
    return 0


# ---------------------------------------------------------------------------- output

def _machine_json(machine) -> dict:
    return {"source": machine.source, "os": machine.os, "arch": machine.arch,
            "ram_total_bytes": machine.ram_total_bytes, "ram_available_bytes": machine.ram_available_bytes,
            "unified_memory": machine.unified_memory,
            "gpus": [{"name": d.name, "description": d.description, "backend": d.backend,
                      "total_bytes": d.total_bytes, "free_bytes": d.free_bytes} for d in machine.gpus]}


def plan_json(plan, spec, machine, driver) -> dict:
    """The plan as JSON: every kind's engine, argv, env, memory and decisions; a llama-server
    plan adds its context, KV, layers, drafter and predicted speed."""
    if not isinstance(plan, LaunchPlan):
        return {"schema": SCHEMA, "kind": "plan", "engine": driver.launch_kind.value,
                "model": _plan_model(plan), "memory": {"estimate_source": getattr(plan, "estimate_source", "estimated"),
                                                       "devices": [_device_json(m) for m in plan.devices]},
                "engine_plan": _plain(plan), "decisions": [{"what": x.what, "why": x.why} for x in plan.decisions],
                "argv": list(spec.argv), "env": dict(spec.env), "port_is_placeholder": True,
                "machine": _machine_json(machine)}
    d = plan.drafter
    return {
        "schema": SCHEMA, "kind": "plan", "engine": driver.launch_kind.value, "model": plan.model_path,
        "ctx": plan.ctx, "ctx_per_slot": plan.ctx_per_slot, "slots": plan.slots, "kv_unified": plan.kv_unified,
        "kv_type_k": plan.kv_type_k, "kv_type_v": plan.kv_type_v, "flash_attn": plan.flash_attn,
        "gpu_layers": plan.gpu_layers, "n_cpu_moe": plan.n_cpu_moe, "cpu_moe": plan.cpu_moe,
        "swa_full": plan.swa_full,
        "drafter": {"status": d.status, "spec_type": d.spec_type, "draft_path": d.draft_path,
                    "draft_max": d.draft_max, "sampling": d.sampling, "resident_bytes": d.resident_bytes,
                    "reason": d.reason},
        "memory": {
            "estimate_source": plan.estimate_source,
            "devices": [_device_json(m) for m in plan.devices],
        },
        "decode_speed": _speed_json(plan.decode_speed),
        "decisions": [{"what": x.what, "why": x.why} for x in plan.decisions],
        "argv": list(spec.argv),
        "env": dict(spec.env),
        "port_is_placeholder": True,
        "machine": _machine_json(machine),
    }


def _device_json(m) -> dict:
    return {"name": m.name, "budget_bytes": m.budget_bytes, "weights_bytes": m.weights_bytes,
            "kv_bytes": m.kv_bytes, "compute_bytes": m.compute_bytes, "other_bytes": m.other_bytes,
            "total_bytes": m.total_bytes}


def _plain(value):
    """A ds4 or sd-server plan's own fields as JSON values (nested dataclasses as objects)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)
                if f.name not in ("decisions", "devices")}
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    if isinstance(value, Enum):
        return value.value
    return value


def _plan_model(plan) -> str:
    """The model file a ds4 or sd-server plan runs (an image plan names its diffusion model)."""
    path = getattr(plan, "model_path", None)
    if isinstance(path, str):
        return path
    model = plan.model
    return model.diffusion_model or model.checkpoint or ""


def other_plan_table(plan, spec, machine, driver) -> str:
    """A ds4 or sd-server plan as text: its memory, decisions and command."""
    lines = [f"Plan for {Path(_plan_model(plan)).name} on {machine.source} ({driver.launch_kind.value})", ""]
    for m in plan.devices:
        lines.append(f"  {m.name:<8} budget {_mib(m.budget_bytes)}, holds {_mib(m.total_bytes)}")
    lines += ["", "Decisions:"] + [f"  - {d.what}: {d.why}" for d in plan.decisions]
    lines += ["", f"Command (port {PLACEHOLDER_PORT} is a placeholder):", "  " + " ".join(_quote(a) for a in spec.argv)]
    return "\n".join(lines)


def _speed_json(speed) -> dict | None:
    """Predicted decode speed: tokens/s (null when a device's bandwidth is unknown) and its reads."""
    if speed is None:
        return None
    return {"tokens_per_s": speed.tokens_per_s, "context_tokens": speed.context_tokens,
            "limited_by": speed.limited_by,
            "reads": [{"device": r.name, "bytes_per_token": r.bytes_per_token,
                       "bandwidth_bytes_per_s": r.bandwidth_bytes_per_s} for r in speed.reads]}


def refusal_json(refusal, machine) -> dict:
    return {"schema": SCHEMA, "kind": "refusal", "model": refusal.model_path, "reason": refusal.reason,
            "needed_bytes": refusal.needed_bytes, "available_bytes": refusal.available_bytes,
            "suggestions": list(refusal.suggestions),
            "decisions": [{"what": x.what, "why": x.why} for x in refusal.decisions],
            "machine": _machine_json(machine)}


def _mib(n: int) -> str:
    return f"{n / (1 << 20):,.1f} MiB" if n < (1 << 30) else f"{n / (1 << 30):,.2f} GiB"


def plan_table(plan, spec, machine) -> str:
    lines = [f"Plan for {model_id_of(plan.model_path)} ({Path(plan.model_path).name}) on "
             f"{machine.source}", ""]
    rows = [("context", f"{plan.ctx:,} ({plan.ctx_per_slot:,} per slot)"), ("slots", str(plan.slots)),
            ("KV cache", f"K {plan.kv_type_k}, V {plan.kv_type_v}" + (", unified" if plan.kv_unified else "")),
            ("flash attention", plan.flash_attn),
            ("GPU layers", "-" if plan.gpu_layers is None else str(plan.gpu_layers)),
            ("expert offload", "all experts in RAM" if plan.cpu_moe else
             f"--n-cpu-moe {plan.n_cpu_moe}" if plan.n_cpu_moe else "-"),
            ("drafter", f"{plan.drafter.status}" + (f" ({plan.drafter.spec_type})" if plan.drafter.spec_type else "")),
            ("predicted decode", speed_text(plan.decode_speed))]
    w = max(len(k) for k, _ in rows)
    lines += [f"  {k:<{w}}  {v}" for k, v in rows]
    lines += ["", f"  {'device':<8} {'budget':>12} {'weights':>12} {'KV':>12} {'compute':>12} "
                  f"{'other':>12} {'total':>12}"]
    for m in plan.devices:
        lines.append(f"  {m.name:<8} {_mib(m.budget_bytes):>12} {_mib(m.weights_bytes):>12} {_mib(m.kv_bytes):>12} "
                     f"{_mib(m.compute_bytes):>12} {_mib(m.other_bytes):>12} {_mib(m.total_bytes):>12}")
    source = "measured on this machine" if plan.estimate_source == "measured" else "estimated"
    lines += ["", f"  memory figures: {source}", "", "Decisions:"]
    lines += [f"  - {d.what}: {d.why}" for d in plan.decisions]
    lines += ["", f"Command (port {PLACEHOLDER_PORT} is a placeholder):", "  " + " ".join(_quote(a) for a in spec.argv)]
    return "\n".join(lines)


def refusal_text(refusal) -> str:
    lines = [f"stoker: {Path(refusal.model_path).name} does not fit: {refusal.reason}."]
    lines += [f"  try: {s}" for s in refusal.suggestions]
    return "\n".join(lines)


def _quote(a: str) -> str:
    import shlex

    return shlex.quote(a)


def model_id_of(path: str) -> str:
    """The gateway's id for the model (the catalog's, so a collision suffix or a store's name
    is the same here as in `stoker models` and /v1/models)."""

    catalog = ModelCatalog((path,))
    catalog.refresh()
    return catalog.id_for(path) or base_id(Path(path).name)
