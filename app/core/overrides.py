"""Per-model overrides: what the user pinned for one model, and whether each value is sane.

Only values and their validation live here; `shell/store.py` keeps them on disk
atomically. Every field is optional: `None` means "let the planner decide".
"""

from __future__ import annotations

from dataclasses import dataclass, field

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


def validate_overrides(raw: dict) -> tuple[ModelOverrides, tuple[str, ...]]:
    raise NotImplementedError  # filled in by the planner work (issue 2)
