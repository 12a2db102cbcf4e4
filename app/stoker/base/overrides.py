"""Per-model overrides: what the user pinned for one model, and whether each value is sane.

Only values and their validation live here; `stoker/base/store.py` keeps them on disk
atomically. Every field is optional: `None` means "let the planner decide".
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field, replace
from typing import Any

KV_CACHE_TYPES = ("f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1")
SPEC_TYPES = ("none", "draft-simple", "draft-eagle3", "draft-mtp", "draft-dflash", "draft-dspark",
              "ngram-simple", "ngram-map-k", "ngram-map-k4v", "ngram-mod", "ngram-cache")
FLASH_ATTN = ("on", "off", "auto")
SPEC_SAMPLING = ("greedy", "probabilistic")


@dataclass(frozen=True)
class ModelOverrides:
    ctx: int | None = None
    slots: int | None = None
    kv_type_k: str | None = None
    kv_type_v: str | None = None
    kv_unified: bool | None = None
    flash_attn: str | None = None  # on | off | auto
    gpu_layers: int | str | None = None  # int, "all" or "auto"
    n_cpu_moe: int | None = None
    spec_type: str | None = None
    draft_model: str | None = None
    draft_max: int | None = None
    spec_sampling: str | None = None
    ds4_cache_gb: int | None = None
    ds4_ssd_streaming: bool | None = None
    swa_full: bool | None = None
    threads: int | None = None
    batch: int | None = None
    ubatch: int | None = None
    extra_args: tuple[str, ...] = field(default_factory=tuple)
    # The gateway: other names a request may use for this model, and minutes without a
    # request before its engine is stopped (0: never; None: the Settings default).
    aliases: tuple[str, ...] = field(default_factory=tuple)
    idle_minutes: int | None = None


MIN_CTX = 256  # the engine pads -c to 256 cells; anything smaller is a typo
MAX_CTX = 16 * 1024 * 1024
MAX_SLOTS = 256
# Flags the planner owns or that Stoker must never pass; extra_args may not smuggle them in.
FORBIDDEN_EXTRA_ARGS = ("--no-mmap", "--mlock", "--api-key", "--api-key-file", "--host", "--port",
                        "-m", "--model", "--log-file")

# llama-server b11434 flags that reach the network or hand a request more than a model
# (downloads, RPC servers, tools and MCP servers, local media files) or that move the
# routes the gateway forwards to: refused in extra_args, whoever wrote them.
REACHES_OUT_EXTRA_ARGS = frozenset({
    "--rpc", "-mu", "--model-url", "-dr", "--docker-repo", "-hf", "-hfr", "--hf-repo", "-hff", "--hf-file",
    "-hft", "--hf-token", "--spec-draft-hf", "-hfd", "-hfrd", "--hf-repo-draft", "-hfv", "-hfrv",
    "--hf-repo-v", "-hffv", "--hf-file-v", "-mmu", "--mmproj-url", "--tools", "--tools-runtime",
    "--mcp-servers-config", "--mcp-servers-json", "-ag", "--agent", "--ui-mcp-proxy", "--webui-mcp-proxy",
    "--media-path", "--api-prefix", "--ssl-key-file", "--ssl-cert-file",
})

_TRUE = ("true", "on", "yes", "1", "enabled")
_FALSE = ("false", "off", "no", "0", "disabled")


def _whole(value: object, key: str, what: str, low: int, high: int | None, errors: list[str]) -> int | None:
    text = repr(value) if isinstance(value, str) else str(value)
    if isinstance(value, bool):
        ok = None
    elif isinstance(value, int):
        ok = value
    elif isinstance(value, float) and value.is_integer():
        ok = int(value)
    elif isinstance(value, str) and value.strip().lstrip("+").isdigit():
        ok = int(value.strip())
    else:
        ok = None
    bound = f"≥ {low}" if high is None else f"between {low} and {high}"
    if ok is None or ok < low or (high is not None and ok > high):
        errors.append(f"{key} must be a whole number of {what} {bound}, got {text}")
        return None
    return ok


def _choice(value: object, key: str, choices: tuple[str, ...], errors: list[str]) -> str | None:
    if isinstance(value, str) and value.strip().lower() in choices:
        return value.strip().lower()
    errors.append(f"{key} must be one of {', '.join(choices)}, got {value!r}")
    return None


def _flag(value: object, key: str, errors: list[str]) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _TRUE + _FALSE:
        return value.strip().lower() in _TRUE
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    errors.append(f"{key} must be true or false, got {value!r}")
    return None


def _gpu_layers(value: object, errors: list[str]) -> int | str | None:
    if isinstance(value, str) and value.strip().lower() in ("all", "auto"):
        return value.strip().lower()
    if isinstance(value, int) and not isinstance(value, bool) and value == -1:
        return "auto"
    if isinstance(value, int) and not isinstance(value, bool) and value == -2:
        return "all"
    n = _whole(value, "gpu_layers", "layers (or 'all' / 'auto')", 0, 100_000, errors)
    return n


def _extra_args(value: object, errors: list[str]) -> tuple[str, ...] | None:
    if isinstance(value, str):
        try:
            value = shlex.split(value)
        except ValueError as exc:
            errors.append(f"extra_args could not be split into arguments ({exc}); quote it like a shell line")
            return None
    if not isinstance(value, (list, tuple)) or not all(isinstance(a, str) for a in value):
        errors.append(f"extra_args must be a list of strings, got {value!r}")
        return None
    for a in value:
        problem = extra_arg_problem(a)
        if problem is not None:
            errors.append(problem)
            return None
    return tuple(value)


def extra_arg_problem(arg: str) -> str | None:
    """Why one extra argument may not reach llama-server, or None."""
    name = arg.split("=", 1)[0]
    if name in FORBIDDEN_EXTRA_ARGS:
        return (f"extra_args may not contain {name}: Stoker sets it itself or it does not "
                f"exist in llama-server b11434")
    if name in REACHES_OUT_EXTRA_ARGS:
        what = ("moves the routes Stoker forwards to" if name == "--api-prefix" else
                "changes how Stoker talks to the engine" if name.startswith("--ssl") else
                "lets the engine reach the network or local files on a request's behalf")
        return (f"extra_args may not contain {name}: it {what}; Stoker refuses it (pull models with "
                f"`stoker pull`, add RPC workers in Settings or with `stoker run --rpc`)")
    return None


def _aliases(value: object, errors: list[str]) -> tuple[str, ...] | None:
    if isinstance(value, str):
        value = [v for v in value.replace(",", " ").split()]
    if not isinstance(value, (list, tuple)) or not all(isinstance(a, str) for a in value):
        errors.append(f"aliases must be a list of names such as gpt-4o-mini, got {value!r}")
        return None
    out = []
    for a in value:
        a = a.strip().lower()
        if not a or len(a) > 200:
            errors.append(f"the alias {a!r} must be 1 to 200 characters")
            return None
        if a not in out:
            out.append(a)
    return tuple(out)


def validate_overrides(raw: dict[str, Any]) -> tuple[ModelOverrides, tuple[str, ...]]:
    """Read stored or typed overrides; every bad value gets one sentence and is dropped.

    Accepts the strings a settings form or a command line produce ("4096", "on", "q8_0")
    as well as JSON values. `kv_type` sets both K and V. `None` / "" means "planner decides".
    """
    errors: list[str] = []
    if not isinstance(raw, dict):
        return ModelOverrides(), (f"overrides must be an object of key/value pairs, got {type(raw).__name__}",)
    raw = {k: v for k, v in raw.items() if v is not None and v != ""}
    known = {f for f in ModelOverrides.__dataclass_fields__} | {"kv_type"}
    for key in raw:
        if key not in known:
            errors.append(f"unknown override '{key}'; known ones are {', '.join(sorted(known))}")
    out: dict[str, Any] = {}
    if "ctx" in raw:
        out["ctx"] = _whole(raw["ctx"], "ctx", "tokens", MIN_CTX, MAX_CTX, errors)
    if "slots" in raw:
        out["slots"] = _whole(raw["slots"], "slots", "slots", 1, MAX_SLOTS, errors)
    if "kv_type" in raw:
        t = _choice(raw["kv_type"], "kv_type", KV_CACHE_TYPES, errors)
        out["kv_type_k"] = out["kv_type_v"] = t
    for key in ("kv_type_k", "kv_type_v"):
        if key in raw:
            out[key] = _choice(raw[key], key, KV_CACHE_TYPES, errors)
    if "kv_unified" in raw:
        out["kv_unified"] = _flag(raw["kv_unified"], "kv_unified", errors)
    if "flash_attn" in raw:
        v = raw["flash_attn"]
        if isinstance(v, bool):
            v = "on" if v else "off"
        out["flash_attn"] = _choice(v, "flash_attn", FLASH_ATTN, errors)
    if "gpu_layers" in raw:
        out["gpu_layers"] = _gpu_layers(raw["gpu_layers"], errors)
    if "n_cpu_moe" in raw:
        out["n_cpu_moe"] = _whole(raw["n_cpu_moe"], "n_cpu_moe", "layers", 0, 100_000, errors)
    if "spec_type" in raw:
        out["spec_type"] = _choice(raw["spec_type"], "spec_type", SPEC_TYPES, errors)
    if "draft_model" in raw:
        v = raw["draft_model"]
        if isinstance(v, str) and v.strip():
            out["draft_model"] = v.strip()
        else:
            errors.append(f"draft_model must be a path to a GGUF file, got {v!r}")
    if "draft_max" in raw:
        out["draft_max"] = _whole(raw["draft_max"], "draft_max", "tokens", 1, 64, errors)
    if "spec_sampling" in raw:
        out["spec_sampling"] = _choice(raw["spec_sampling"], "spec_sampling", SPEC_SAMPLING, errors)
    if "ds4_cache_gb" in raw:
        out["ds4_cache_gb"] = _whole(raw["ds4_cache_gb"], "ds4_cache_gb", "GiB", 1, 4096, errors)
    if "ds4_ssd_streaming" in raw:
        out["ds4_ssd_streaming"] = _flag(raw["ds4_ssd_streaming"], "ds4_ssd_streaming", errors)
    if "swa_full" in raw:
        out["swa_full"] = _flag(raw["swa_full"], "swa_full", errors)
    if "threads" in raw:
        out["threads"] = _whole(raw["threads"], "threads", "threads", 1, 1024, errors)
    if "batch" in raw:
        out["batch"] = _whole(raw["batch"], "batch", "tokens", 1, 1 << 20, errors)
    if "ubatch" in raw:
        out["ubatch"] = _whole(raw["ubatch"], "ubatch", "tokens", 1, 1 << 20, errors)
    if "extra_args" in raw:
        out["extra_args"] = _extra_args(raw["extra_args"], errors)
    if "aliases" in raw:
        out["aliases"] = _aliases(raw["aliases"], errors)
    if "idle_minutes" in raw:
        out["idle_minutes"] = _whole(raw["idle_minutes"], "idle_minutes", "minutes", 0, 7 * 24 * 60, errors)
    # Cross-field rules the engine would otherwise reject at start-up.
    if out.get("batch") and out.get("ubatch") and out["ubatch"] > out["batch"]:
        errors.append(f"ubatch ({out['ubatch']}) must not be larger than batch ({out['batch']})")
        out["ubatch"] = None
    if out.get("flash_attn") == "off" and out.get("kv_type_v") not in (None, "f32", "f16", "bf16"):
        errors.append(f"a quantised V cache ({out['kv_type_v']}) needs flash attention; set flash_attn "
                      f"to on or auto, or use an f16 V cache")
        out["flash_attn"] = None
    if out.get("draft_model") and out.get("spec_type") not in (None, "draft-simple", "draft-eagle3",
                                                                "draft-dflash", "draft-dspark"):
        errors.append(f"draft_model is only used by draft-simple, draft-eagle3, draft-dflash or "
                      f"draft-dspark, not spec_type {out['spec_type']}")
    clean = {k: v for k, v in out.items() if v is not None}
    return ModelOverrides(**clean), tuple(errors)


# What the running engine never sees: the catalog reads the aliases (rescanned when they are
# saved) and the supervisor the idle timeout (re-decided for a running model when it is saved).
SERVING_FIELDS = ("aliases", "idle_minutes")


def needs_restart(before: ModelOverrides, after: ModelOverrides) -> bool:
    """Whether going from `before` to `after` changes how the engine is launched (its plan
    and argv), so a running engine must restart to honour it; alias and idle-timeout
    changes alone never interrupt the requests in flight."""
    unset = ModelOverrides()
    clear = {name: getattr(unset, name) for name in SERVING_FIELDS}
    return replace(before, **clear) != replace(after, **clear)


def overrides_to_dict(overrides: ModelOverrides) -> dict[str, Any]:
    """The JSON form for storage: only the values the user set; validate_overrides reads it back."""
    out = {}
    for name in ModelOverrides.__dataclass_fields__:
        value = getattr(overrides, name)
        if value is None or value == ():
            continue
        out[name] = list(value) if isinstance(value, tuple) else value
    return out
