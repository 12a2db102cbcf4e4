"""How many bytes a llama-server b11434 launch needs, and on which device.

The planner asks this module "what would these settings cost?" and nothing else. The
KV cache and recurrent state follow llama.cpp's own allocation code exactly
(src/llama-kv-cache.cpp, llama-kv-cache-iswa.cpp, llama-context.cpp,
llama-memory-recurrent.cpp): 256-cell padding, one stream per slot unless unified,
SWA layers sized by their window, MLA caching K only, shared-KV layers costing nothing.
Weights are placed by the engine's rules (src/llama-model.cpp: token_embd always on the
CPU, `-ngl N` counts the output layer, `--n-cpu-moe N` keeps layers 0..N-1's experts on
the CPU). Compute buffers are an estimate calibrated against the real engine's
`compute buffer size` lines (see `compute_bytes`).

Pure arithmetic: no files, no clock, no engine. It must not decide anything; deciding
is the planner's job.
"""

from __future__ import annotations

from dataclasses import dataclass

from stoker.library.gguf_summary import ModelSummary

MIB = 1024 * 1024
GIB = 1024 * MIB

# Cache types llama-server accepts (-ctk/-ctv), as (values per block, bytes per block):
# ggml/src/ggml-common.h. Quantised blocks hold 32 values.
KV_TYPE_BLOCKS: dict[str, tuple[int, int]] = {
    "f32": (1, 4),
    "f16": (1, 2),
    "bf16": (1, 2),
    "q8_0": (32, 34),
    "q4_0": (32, 18),
    "q4_1": (32, 20),
    "iq4_nl": (32, 18),
    "q5_0": (32, 22),
    "q5_1": (32, 24),
}
QUANTISED_KV_TYPES = frozenset(t for t, (blk, _) in KV_TYPE_BLOCKS.items() if blk > 1)

KV_PAD = 256  # the engine pads n_ctx, n_ctx_seq and SWA caches to 256 cells
DEFAULT_UBATCH = 512
DEFAULT_BATCH = 2048
# Speculative types whose recurrent state keeps one extra row per drafted token.
RS_SEQ_SPEC_TYPES = frozenset({"draft-mtp", "draft-eagle3", "draft-dflash", "draft-dspark"})


def pad(n: int, to: int = KV_PAD) -> int:
    return ((n + to - 1) // to) * to


def row_bytes(cache_type: str, n_values: int) -> int:
    """ggml_row_size: bytes of one row of `n_values` values stored as `cache_type`."""
    try:
        blk, size = KV_TYPE_BLOCKS[cache_type]
    except KeyError:
        raise ValueError(f"unknown KV cache type '{cache_type}'; use one of "
                         f"{', '.join(KV_TYPE_BLOCKS)}") from None
    return (n_values // blk) * size if blk > 1 else n_values * size


# ---------------------------------------------------------------------------- KV cache

@dataclass(frozen=True)
class KVBreakdown:
    """What the KV cache and recurrent state of one launch cost, as the engine allocates them."""

    n_ctx: int  # -c after padding to 256
    n_ctx_seq: int  # cells one stream holds (full-attention layers)
    streams: int  # 1 when unified, else one per slot
    cells_swa: int | None  # cells per stream on SWA layers; None when the model has none
    k_bytes: int
    v_bytes: int
    state_bytes: int  # recurrent/SSM state (f32, independent of ctx)
    per_layer: tuple[int, ...]  # bytes per trunk layer (KV + state), for device placement
    kv_layers: int  # layers that own a KV cache
    swa_layers: int  # of those, how many are sliding-window layers

    @property
    def kv_bytes(self) -> int:
        return self.k_bytes + self.v_bytes

    @property
    def total(self) -> int:
        return self.k_bytes + self.v_bytes + self.state_bytes


def _per_layer(values: tuple[int, ...], n_layer: int, default: int | None) -> list[int]:
    if len(values) >= n_layer:
        return list(values[:n_layer])
    if values:  # a scalar the reader kept as a 1-tuple
        return [values[0]] * n_layer
    return [default or 0] * n_layer


def recurrent_state_row(model: ModelSummary) -> int:
    """n_embd_r + n_embd_s for one recurrent layer (llama_hparams::n_embd_r/n_embd_s)."""
    n_embd = model.n_embd or 0
    if model.rwkv_head_size:
        return (model.token_shift_count or 2) * n_embd + n_embd * model.rwkv_head_size
    if model.shortconv_l_cache:
        return n_embd * (model.shortconv_l_cache - 1)
    ssm = model.ssm
    if ssm is None:
        return 0
    d_conv, d_inner = ssm.d_conv or 0, ssm.d_inner or 0
    d_state, n_group = ssm.d_state or 0, ssm.n_group or 0
    r = max(0, d_conv - 1) * (d_inner + 2 * n_group * d_state)
    s = d_state * d_inner
    return r + s


def kv_bytes(model: ModelSummary, *, ctx: int, slots: int, kv_unified: bool,
             type_k: str = "f16", type_v: str = "f16", swa_full: bool = False,
             ubatch: int = DEFAULT_UBATCH, flash_attn: bool = True,
             n_rs_seq: int = 0) -> KVBreakdown:
    """The engine's KV cache + recurrent state for these settings, byte for byte.

    `flash_attn` is the resolved setting (the engine's "auto" enables it on every backend
    we plan for); without it V is stored transposed and padded to the widest layer.
    `n_rs_seq` is --spec-draft-n-max for the MTP/eagle3/dflash/dspark speculative types.
    """
    if ctx < 1 or slots < 1:
        raise ValueError("ctx and slots must be at least 1")
    n_layer = model.n_layer or 0
    n_ctx = pad(ctx)
    streams = 1 if kv_unified else slots
    n_ctx_seq = n_ctx if kv_unified else pad(n_ctx // slots)
    heads = _per_layer(model.n_head, n_layer, None)
    heads_kv = _per_layer(model.n_head_kv, n_layer, None)
    if not model.n_head_kv:
        heads_kv = heads
    swa = list(model.swa_layers[:n_layer]) + [False] * max(0, n_layer - len(model.swa_layers))
    recurrent = (list(model.recurrent_layers[:n_layer])
                 + [False] * max(0, n_layer - len(model.recurrent_layers)))
    has_swa = bool(model.n_swa) and any(swa)
    kv_from_start = n_layer - (model.shared_kv_layers or 0)
    mla = model.mla is not None and bool(model.mla.kv_lora_rank)

    def head_size(kind: str, is_swa: bool) -> int:
        if kind == "k":
            size = (model.head_k_swa if is_swa and model.head_k_swa else model.head_k)
        else:
            size = (model.head_v_swa if is_swa and model.head_v_swa else model.head_v)
        if size:
            return size
        n_head = max(heads) if heads else 0
        return (model.n_embd or 0) // n_head if n_head else 0

    # Which layers own a cache, and their K/V widths.
    owners: list[tuple[int, int, int, bool]] = []  # (layer, n_embd_k_gqa, n_embd_v_gqa, is_swa)
    for il in range(n_layer):
        if recurrent[il] or il >= kv_from_start:
            continue
        is_swa = has_swa and swa[il]
        hkv = heads_kv[il]
        k = head_size("k", is_swa) * hkv
        v = 0 if mla else head_size("v", is_swa) * hkv
        owners.append((il, k, v, is_swa))
    if not flash_attn and not mla and owners:
        widest_v = max(v for _, _, v, _ in owners)  # [TAG_V_CACHE_VARIABLE]: transposed V
        owners = [(il, k, widest_v, s) for il, k, _, s in owners]

    cells_swa = None
    if has_swa:
        cells_swa = n_ctx_seq if swa_full else pad(
            min(n_ctx_seq, (model.n_swa or 0) * (slots if kv_unified else 1) + ubatch))

    per_layer = [0] * n_layer
    k_total = v_total = 0
    for il, k, v, is_swa in owners:
        cells = (cells_swa if is_swa and cells_swa is not None else n_ctx_seq) * streams
        kb = row_bytes(type_k, k) * cells
        vb = row_bytes(type_v, v) * cells if v else 0
        k_total += kb
        v_total += vb
        per_layer[il] += kb + vb

    state_total = 0
    row = recurrent_state_row(model)
    if any(recurrent) and row:
        per = 4 * max(1, slots) * (1 + n_rs_seq) * row
        for il in range(n_layer):
            if recurrent[il]:
                per_layer[il] += per
                state_total += per
    return KVBreakdown(n_ctx=n_ctx, n_ctx_seq=n_ctx_seq, streams=streams, cells_swa=cells_swa,
                       k_bytes=k_total, v_bytes=v_total, state_bytes=state_total,
                       per_layer=tuple(per_layer), kv_layers=len(owners),
                       swa_layers=sum(1 for o in owners if o[3]))


# ---------------------------------------------------------------------------- weights

@dataclass(frozen=True)
class Placement:
    """Which device holds each block, the output layer, and the routed experts."""

    layer_devices: tuple[str, ...]  # per block (n_layer_all), "CPU" or a GPU name
    output_device: str
    experts_on_cpu: tuple[bool, ...]  # per block: routed experts forced to CPU

    def device_of_layer(self, il: int) -> str:
        return self.layer_devices[il] if il < len(self.layer_devices) else "CPU"


def place_layers(model: ModelSummary, gpu_layers: int | str | None, *, n_cpu_moe: int | None = None,
                 cpu_moe: bool = False, gpus: tuple[tuple[str, float], ...] = ()) -> Placement:
    """The engine's tensor placement (llama_model::load_tensors).

    `gpu_layers` is what -ngl would say: an int, "all" or None (no GPU). Like the engine,
    the count includes the output layer: -ngl 1 offloads only the output, -ngl n+1 all.
    `gpus` are (device name, split proportion); layers are split across them as
    --tensor-split would (proportions default to free memory in the engine).
    """
    n_all = model.n_layer_all or len(model.layer_bytes) or 0
    if not gpus or gpu_layers in (None, 0):
        ngl = 0
    elif gpu_layers == "all" or gpu_layers == "auto":
        ngl = n_all + 1
    else:
        ngl = max(0, min(int(gpu_layers), n_all + 1))
    i_gpu_start = max(n_all + 1 - ngl, 0)
    act = min(ngl, n_all + 1) if gpus else 0
    total = sum(p for _, p in gpus) or 1.0
    cumulative, acc = [], 0.0
    for _, p in gpus:
        acc += p / total
        cumulative.append(acc)

    def device(il: int) -> str:
        if il < i_gpu_start or (il - i_gpu_start) >= act:
            return "CPU"
        frac = (il - i_gpu_start) / act
        for idx, edge in enumerate(cumulative):  # std::upper_bound over the splits
            if frac < edge:
                return gpus[idx][0]
        return gpus[-1][0]

    if cpu_moe:
        experts = tuple(True for _ in range(n_all))
    else:
        n = max(0, n_cpu_moe or 0)
        experts = tuple(il < n for il in range(n_all))
    return Placement(layer_devices=tuple(device(il) for il in range(n_all)),
                     output_device=device(n_all), experts_on_cpu=experts)


# CPU_REPACK (ggml/src/ggml-cpu/repack.cpp, b11434): on these CPUs the CPU backend copies
# matrix weights of these types (rows a multiple of 8) into an interleaved buffer *beside*
# the mmap'd file, so the weights cost file + copy. x86-64 is assumed to have AVX2 (every
# x86 CPU since 2013 that runs LLMs at a usable speed); AVX-512 adds Q2_K. Arm64 is assumed
# to have dotprod (Apple M1+, Graviton2+); Q8_0/Q5_K/Q6_K repack only there.
_REPACK_X86_AVX2 = frozenset({"Q4_0", "Q4_K", "IQ4_NL", "MXFP4"})
_REPACK_ARM_DOTPROD = frozenset({"Q1_0", "Q4_0", "Q4_K", "Q5_K", "Q6_K", "IQ4_NL", "MXFP4", "Q8_0"})


def repacked_types(cpu_arch: str | None, cpu_features: frozenset[str] | None = None) -> frozenset[str]:
    """Tensor types the engine's CPU backend repacks on this CPU (empty: none).

    `cpu_features` (lower-case flags such as "avx2", "avx512f") overrides the assumption
    above when known; an empty set means a CPU without the SIMD the repack kernels need.
    """
    arch = (cpu_arch or "").lower()
    if arch in ("x86_64", "amd64", "x64"):
        if cpu_features is None:
            return _REPACK_X86_AVX2
        types = set(_REPACK_X86_AVX2) if "avx2" in cpu_features else set()
        if "avx512f" in cpu_features:
            types.add("Q2_K")
        return frozenset(types)
    if arch in ("arm64", "aarch64"):
        if cpu_features is None or "asimddp" in cpu_features or "dotprod" in cpu_features:
            return _REPACK_ARM_DOTPROD
        return frozenset()
    return frozenset()


def repack_bytes(model: ModelSummary, placement: Placement, repack_types: frozenset[str], *,
                 tied_only: bool = False) -> int:
    """Bytes of the CPU_REPACK buffer: repackable weights that sit on the CPU.

    `tied_only`: just the copy of token_embd made for a tied output layer, the one copy that
    is extra even in the resident view (token_embd itself stays in use for get_rows).
    """
    if not repack_types:
        return 0
    total = 0
    for blk, type_name, experts, n in model.repackable:
        if type_name not in repack_types or (tied_only and blk != -2):
            continue
        if blk < 0:
            dev = placement.output_device
        elif experts and placement.experts_on_cpu[blk:blk + 1] == (True,):
            dev = "CPU"
        else:
            dev = placement.device_of_layer(blk)
        if dev == "CPU":
            total += n
    return total


def output_is_tied(model: ModelSummary) -> bool:
    """No separate `output.weight`: the engine duplicates token_embd onto the output device."""
    return model.embedding_bytes > 0 and model.output_bytes * 8 < model.embedding_bytes


def weights_by_device(model: ModelSummary, placement: Placement, *,
                      repack_types: frozenset[str] = frozenset(),
                      count_mapped_original: bool = True) -> dict[str, int]:
    """Model buffer bytes per device, as the `model buffer size` lines would split them.

    The CPU's share includes the CPU_REPACK copy of `repack_types` weights (see
    `repacked_types`); pass the empty set for a build or run without it (`--no-repack`).
    With mmap the file's own pages of a repacked tensor stay in `CPU_Mapped` too (that is
    what the buffer lines add up), but after the copy they are clean page cache the kernel
    takes back under pressure: `count_mapped_original=False` counts each repacked tensor
    once, as the engine's own fit projection does, for budgeting resident memory.
    """
    copy = repack_bytes(model, placement, repack_types, tied_only=not count_mapped_original)
    out: dict[str, int] = {"CPU": model.embedding_bytes + model.other_bytes + copy}
    for il, lb in enumerate(model.layer_bytes):
        dev = placement.device_of_layer(il)
        experts_dev = "CPU" if placement.experts_on_cpu[il:il + 1] == (True,) else dev
        out[dev] = out.get(dev, 0) + lb.total - lb.ffn_experts
        out[experts_dev] = out.get(experts_dev, 0) + lb.ffn_experts
    out_dev = placement.output_device
    out[out_dev] = out.get(out_dev, 0) + model.output_bytes
    if output_is_tied(model) and out_dev != "CPU":
        out[out_dev] += model.embedding_bytes
    return out


def kv_by_device(kv: KVBreakdown, placement: Placement) -> dict[str, int]:
    """Each layer's cache sits on that layer's device (KV offload is on by default)."""
    out: dict[str, int] = {}
    for il, b in enumerate(kv.per_layer):
        dev = placement.device_of_layer(il)
        out[dev] = out.get(dev, 0) + b
    return out


# ---------------------------------------------------------------------------- compute

def _ffn_width(model: ModelSummary) -> int:
    """Per-token FFN activation width: n_ff for dense, n_ff_exp × experts used for MoE.

    When the header does not say, 4 × n_embd (dense) and n_embd per used expert are the
    common shapes; they only feed the compute estimate.
    """
    n_embd = model.n_embd or 0
    if model.is_moe:
        return (model.n_ff_exp or n_embd) * (model.n_expert_used or 1)
    return model.n_ff or 4 * n_embd


def compute_bytes(model: ModelSummary, *, n_ctx_seq: int, ubatch: int, slots: int,
                  flash_attn: bool, n_ctx: int | None = None, n_kv_swa: int | None = None) -> int:
    """Estimated `compute buffer size` of the device running the layers.

    The graph is reserved for min(n_ctx, ubatch) tokens against a full cache. Calibrated on
    the demo model (SmolLM2-135M, CPU build b11434, 13 launches varying -c, -np, -ub, -fa,
    -ctk): within 0.05 MiB of every logged value. The peak live set is
      FA on : mask n_kv×ub×2 B (f16) + ub × 4 B × (5·n_embd + 3·n_ff)
      FA off: mask + KQ n_kv×ub×4 B×(1 + n_head) + ub × 4 B × (4·n_embd + n_ff)
    where n_kv is the cells of one stream. Larger models and GPU backends keep the shape;
    the per-token constants are the part that is least certain.

    A model with sliding-window layers has a second mask, as wide as one stream of the SWA
    cache (`n_kv_swa`, KVBreakdown.cells_swa): llm_graph_context::build_attn_inp_kv_iswa
    builds `self_kq_mask_swa` beside the full one, and both are graph inputs alive for the
    whole reserve. With `--swa-full` that cache is as long as the window, so the mask grows
    with the context: Gemma 3 270M at -c 8192 measured 34.28 MiB against 27.28 MiB without
    it, exactly (8192 - 1024) cells x 512 tokens x 2 bytes more.
    """
    n_embd = model.n_embd or 0
    ub = min(ubatch, pad(n_ctx) if n_ctx else ubatch)
    n_ff = _ffn_width(model)
    n_head = max(model.n_head) if model.n_head else 0
    # Q and the attention output are n_head × head_k wide, which is wider than n_embd on
    # models such as Gemma 3 (4 × 256 vs 640): two of the live n_embd-wide rows are those.
    n_q = max(n_embd, n_head * (model.head_k or 0))
    if flash_attn:
        per_kv = 2
        per_tok = 4 * (3 * n_embd + 2 * n_q + 3 * n_ff)
    else:
        per_kv = 4 * (1 + n_head)
        per_tok = 4 * (2 * n_embd + 2 * n_q + n_ff)
    if model.is_moe:
        per_tok += 4 * (model.n_expert or 0)  # router logits
    has_attention = any(h > 0 for h in model.n_head_kv) or any(h > 0 for h in model.n_head)
    kv_term = n_ctx_seq * ub * per_kv if has_attention else 0
    if has_attention and n_kv_swa:
        kv_term += n_kv_swa * ub * (2 if flash_attn else 4)  # the SWA mask: f16 with FA, else f32
    return kv_term + ub * per_tok


def host_compute_bytes(model: ModelSummary, *, ubatch: int) -> int:
    """The CPU-side compute buffer beside a GPU (inputs, embeddings get_rows): small."""
    return ubatch * 4 * 2 * (model.n_embd or 0)


def output_buffer_bytes(model: ModelSummary, *, slots: int) -> int:
    """llama_context::output_reserve: logits for one output per sequence, in host RAM."""
    return (model.n_vocab or 0) * 4 * max(1, slots)


def drafter_bytes(draft: ModelSummary, *, ctx_per_slot: int, slots: int) -> int:
    """A separate draft model: all its weights plus an f16 KV for the same window.

    The server gives the drafter its own context of the slot's size, one per slot.
    """
    kv = kv_bytes(draft, ctx=ctx_per_slot * slots, slots=slots, kv_unified=False,
                  type_k="f16", type_v="f16")
    return draft.weights_bytes + kv.total


def mmproj_bytes(mmproj: ModelSummary) -> int:
    """A vision projector: its weights plus a compute allowance for one image batch."""
    return mmproj.weights_bytes + 64 * MIB
