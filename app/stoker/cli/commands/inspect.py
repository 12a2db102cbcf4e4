"""`stoker inspect MODEL [--json]`: what Stoker reads from a GGUF header, as a table or JSON.

It only formats `load_summary`'s answer; deciding what the facts mean is the planner's job.
"""

from __future__ import annotations

import json
from pathlib import Path

from stoker.errors import UserError
from stoker.library.gguf_io import GGUFError, load_summary
from stoker.library.gguf_summary import ModelSummary, summary_to_dict

JSON_SCHEMA = 1


def add_arguments(parser) -> None:
    parser.add_argument("model", metavar="MODEL", help="path to a .gguf file (any part of a split set)")
    parser.add_argument("--json", action="store_true", help="print a versioned JSON object")


def human_count(n: int | None) -> str:
    if n is None:
        return "unknown"
    for unit, size in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return str(n)


def human_bytes(n: int | None) -> str:
    if n is None:
        return "unknown"
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n} B"


def _range(values: tuple[int, ...]) -> str:
    if not values:
        return "unknown"
    lo, hi = min(values), max(values)
    return str(lo) if lo == hi else f"{lo}-{hi} (per layer)"


def summary_rows(s: ModelSummary) -> list[tuple[str, str]]:
    """The table `stoker inspect` prints: (label, value) pairs."""
    rows = [
        ("architecture", s.architecture + ("  (vision projector)" if s.is_vision_projector else "")),
        ("name", s.name or "unknown"),
        ("parameters", human_count(s.parameter_count)),
        ("file type", s.file_type or "unknown"),
        ("file size", human_bytes(s.file_bytes)
         + (f" in {s.split_count} parts" if s.split_count > 1 else "")),
        ("trained context", str(s.n_ctx_train) if s.n_ctx_train is not None else "unknown"),
        ("layers", "unknown" if s.n_layer is None else
         str(s.n_layer) + (f" (+{s.nextn_layers} MTP)" if s.nextn_layers else "")),
        ("embedding", str(s.n_embd) if s.n_embd is not None else "unknown"),
        ("heads", _range(s.n_head)),
        ("KV heads", "none (every layer is recurrent)"
         if s.recurrent_layers and all(s.recurrent_layers) else
         # not strict: a summary without per-layer flags (or head counts) has an empty tuple
         _range(tuple(h for h, r in zip(s.n_head_kv, s.recurrent_layers, strict=False) if not r)
                or s.n_head_kv)),
        ("head size K/V", f"{s.head_k}/{s.head_v}"
         + (f" (SWA {s.head_k_swa}/{s.head_v_swa})"
            if (s.head_k_swa, s.head_v_swa) != (s.head_k, s.head_v) else "")),
    ]
    if s.n_swa:
        rows.append(("sliding window", f"{s.n_swa} tokens on {sum(s.swa_layers)} of "
                                       f"{len(s.swa_layers)} layers"))
    if s.shared_kv_layers:
        rows.append(("shared-KV layers", str(s.shared_kv_layers)))
    if s.n_expert:
        rows.append(("experts", f"{s.n_expert} ({s.n_expert_used} used per token)"))
    if s.nextn_layers:
        rows.append(("MTP layers", str(s.nextn_layers)))
    if any(s.recurrent_layers):
        rows.append(("recurrent layers", f"{sum(s.recurrent_layers)} of {len(s.recurrent_layers)}"))
    if s.ssm:
        rows.append(("SSM", f"d_inner {s.ssm.d_inner}, d_state {s.ssm.d_state}, "
                            f"d_conv {s.ssm.d_conv}, groups {s.ssm.n_group}, dt_rank {s.ssm.dt_rank}"))
    if s.shortconv_l_cache:
        rows.append(("short conv cache", str(s.shortconv_l_cache)))
    if s.rwkv_head_size:
        rows.append(("RWKV head size", str(s.rwkv_head_size)))
    if s.mla:
        rows.append(("MLA", f"kv_lora_rank {s.mla.kv_lora_rank}, K/V head {s.mla.key_length_mla}/"
                            f"{s.mla.value_length_mla}"))
    rows.append(("vocabulary", str(s.n_vocab) if s.n_vocab is not None else "unknown"))
    lb = s.layer_bytes
    for label, total in (
        ("attention", sum(x.attention for x in lb)),
        ("dense FFN", sum(x.ffn_dense for x in lb)),
        ("routed experts", sum(x.ffn_experts for x in lb)),
        ("shared experts/router", sum(x.ffn_shared for x in lb)),
        ("recurrent", sum(x.recurrent for x in lb)),
        ("norms/other", sum(x.other for x in lb) + s.other_bytes),
        ("embeddings", s.embedding_bytes),
        ("output", s.output_bytes),
    ):
        if total:
            rows.append((f"bytes: {label}", human_bytes(total)))
    rows.append(("tensor types", ", ".join(f"{t} x{n}" for t, n in s.quant_counts)))
    return rows


def run(args) -> int:

    path = Path(args.model).expanduser()
    if not path.exists():
        raise UserError(f"{path} does not exist; give the path of a .gguf model file.")
    if path.is_dir():
        raise UserError(f"{path} is a folder; give the path of a .gguf model file in it.")
    try:
        summary = load_summary(path)
    except GGUFError as exc:
        raise UserError(str(exc)) from None
    if args.json:
        print(json.dumps({"schema": JSON_SCHEMA, "summary": summary_to_dict(summary)}, indent=2))
        return 0
    rows = summary_rows(summary)
    width = max(len(k) for k, _ in rows)
    print(summary.path)
    for k, v in rows:
        print(f"  {k:<{width}}  {v}")
    return 0
