"""What a GGUF model needs, decided from its header alone.

`stoker/library/gguf_io.py` walks the file and hands over a `GGUFHeader` (metadata values and
tensor infos, byte sizes already computed with the gguf package's tables). This module
turns that into a `ModelSummary`: the facts the memory model and the planner read.
It must not open files or import gguf; unknown facts are `None`, never 0.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from stoker.library.image_parts import image_part_of

# A metadata value as the reader keeps it. Arrays the summary needs are kept as tuples;
# long arrays nobody reads (the tokenizer's) are replaced by `SkippedArray`.
Scalar = int | float | bool | str


@dataclass(frozen=True)
class SkippedArray:
    """An array value the reader stepped over by its length instead of decoding."""

    item_type: int  # gguf.GGUFValueType value
    length: int


MetaValue = Scalar | tuple[Any, ...] | SkippedArray


@dataclass(frozen=True)
class TensorInfo:
    name: str
    ggml_type: int  # gguf.GGMLQuantizationType value
    type_name: str  # e.g. "Q4_1"
    shape: tuple[int, ...]  # as stored in the file (ne0 first)
    offset: int  # relative to the data section of its split
    nbytes: int


@dataclass(frozen=True)
class GGUFHeader:
    """One file's (or one split set's, summed) header as read, nothing decided yet."""

    path: str
    version: int
    metadata: Mapping[str, MetaValue]
    tensors: tuple[TensorInfo, ...]
    file_bytes: int  # sum over splits
    split_paths: tuple[str, ...] = ()  # all split files, first first; () when not split
    # general.file_type as a name ("Q4_K_M"), looked up by the shell in gguf.LlamaFileType
    # because core cannot import gguf; None when absent or unknown.
    file_type_name: str | None = None


@dataclass(frozen=True)
class LayerBytes:
    """Tensor bytes of one block, by what the tensor does (its placement class)."""

    attention: int = 0
    ffn_dense: int = 0
    ffn_experts: int = 0  # routed experts (`ffn_*_exps`): what --n-cpu-moe moves to CPU
    ffn_shared: int = 0  # shared experts / gating: stays with the layer
    recurrent: int = 0  # SSM / RWKV / linear attention
    other: int = 0  # norms and anything not classified above

    @property
    def total(self) -> int:
        return (self.attention + self.ffn_dense + self.ffn_experts + self.ffn_shared
                + self.recurrent + self.other)


@dataclass(frozen=True)
class SSMShape:
    d_conv: int | None
    d_inner: int | None
    d_state: int | None
    n_group: int | None
    dt_rank: int | None


@dataclass(frozen=True)
class MLAShape:
    kv_lora_rank: int | None
    key_length_mla: int | None
    value_length_mla: int | None


@dataclass(frozen=True)
class ModelSummary:
    path: str
    file_bytes: int
    architecture: str
    name: str | None
    is_vision_projector: bool  # `clip` architecture: an mmproj, not a language model
    parameter_count: int  # sum of tensor elements
    file_type: str | None  # e.g. "Q4_1" (from general.file_type, else dominant tensor type)
    n_ctx_train: int | None
    n_layer_all: int | None  # block_count (trunk + nextn)
    n_layer: int | None  # trunk: block_count - nextn layers
    n_embd: int | None
    n_head: tuple[int, ...]  # per trunk layer; () when unknown
    n_head_kv: tuple[int, ...]  # per trunk layer; defaults to n_head
    head_k: int | None
    head_v: int | None
    head_k_swa: int | None
    head_v_swa: int | None
    n_swa: int | None  # sliding window (tokens); None or 0: no SWA
    swa_layers: tuple[bool, ...]  # per trunk layer: is it a sliding-window layer
    shared_kv_layers: int
    n_expert: int | None
    n_expert_used: int | None
    nextn_layers: int
    recurrent_layers: tuple[bool, ...]  # per trunk layer: holds recurrent state, not KV
    ssm: SSMShape | None
    rwkv_head_size: int | None
    token_shift_count: int | None
    shortconv_l_cache: int | None
    mla: MLAShape | None
    n_vocab: int | None
    layer_bytes: tuple[LayerBytes, ...]  # per block (n_layer_all entries)
    embedding_bytes: int  # token_embd (kept on CPU by the engine unless tied output)
    output_bytes: int  # output + output_norm
    other_bytes: int  # tensors outside blocks not counted above
    split_count: int = 1
    quant_counts: tuple[tuple[str, int], ...] = field(default_factory=tuple)  # type -> tensors
    # FFN widths (`{arch}.feed_forward_length`, `{arch}.expert_feed_forward_length`): they
    # size the compute buffer. None when the header does not say.
    n_ff: int | None = None
    n_ff_exp: int | None = None
    # Matrix weights the CPU backend may copy into its CPU_REPACK buffer: (block index, or -1
    # outside the blocks, -2 for token_embd as a tied output; tensor type; routed experts
    # (3-D); bytes), summed over 2-D/3-D weights of a repackable type whose row count is a
    # multiple of 8 (ggml-cpu/repack.cpp), token_embd excluded (it is read by get_rows, never
    # repacked). Which types are repacked depends on the CPU; stoker/planning/memory.py decides.
    repackable: tuple[tuple[int, str, bool, int], ...] = field(default_factory=tuple)
    # `{arch}.pooling_type` (llama.cpp's enum: 0 none, 1 mean, 2 cls, 3 last, 4 rank) and
    # `general.type`: what decides whether a model embeds, reranks or chats.
    pooling_type: int | None = None
    general_type: str | None = None
    # What the file is to an image engine (core/sd_server.ImagePart value: diffusion, vae,
    # t5xxl …), from its tensor names; None for a llama.cpp model.
    image_part: str | None = None
    # What the chat template and the tokenizer say the model can do, for the gateway's
    # capability listings: the template handles `tools` (None: the file has no template),
    # and the vocabulary has fill-in-the-middle tokens (/infill, Ollama's `insert`).
    template_tools: bool | None = None
    has_fim: bool = False

    @property
    def is_moe(self) -> bool:
        return bool(self.n_expert and self.n_expert > 1)

    @property
    def weights_bytes(self) -> int:
        return (sum(lb.total for lb in self.layer_bytes) + self.embedding_bytes
                + self.output_bytes + self.other_bytes)


# Default sliding-window layer pattern per architecture when the file has no
# `sliding_window_pattern` key: (P, dense_first), from llama.cpp b11434 `load_swa_pattern`
# calls in src/models/*.cpp. They apply only when the file has a sliding window > 0.
SWA_DEFAULT_PATTERN: dict[str, tuple[int, bool]] = {
    "gemma2": (2, False), "gemma3": (6, False), "gemma-embedding": (6, False),
    "gemma3n": (5, False), "gpt-oss": (2, False), "cohere2": (4, False),
    "cohere2moe": (4, True), "exaone4": (4, False), "exaone-moe": (4, False),
    "olmo2": (4, False), "plamo3": (8, False), "llama4": (4, False), "afmoe": (4, False),
    "smallthinker": (4, True), "mellum": (4, False), "laguna": (4, True),
    "modern-bert": (3, True),
}
# Every layer holds recurrent state instead of a KV cache.
ALL_RECURRENT_ARCHS = frozenset({"mamba", "mamba2", "rwkv6", "rwkv6qwen2", "rwkv7", "arwkv7"})
# A layer is recurrent iff its head_count_kv is 0 (llama.cpp `is_recr_impl`).
RECURRENT_IF_NO_KV_ARCHS = frozenset({
    "jamba", "granitehybrid", "lfm2", "lfm2moe", "plamo2", "kimi-linear", "bailingmoe3",
    "glm5-next", "kimi-k3", "nemotron_h", "nemotron_h_moe",
})
# A layer is recurrent iff (i + 1) % full_attention_interval != 0.
RECURRENT_BY_INTERVAL_ARCHS = frozenset({"qwen3next", "qwen35", "qwen35moe", "minimax-01",
                                         "qwen4exp"})

_BLOCK = "blk."
# Every type some CPU repacks (ggml_repack_get_optimal_repack_type, b11434); the subset a
# given CPU repacks is stoker/planning/memory.py's `repacked_types`.
REPACK_CANDIDATE_TYPES = frozenset({"Q1_0", "Q4_0", "Q4_K", "Q5_K", "Q6_K", "Q2_K", "IQ4_NL",
                                    "MXFP4", "Q8_0"})


def _int(v: object) -> int | None:
    if isinstance(v, bool):
        return int(v)
    return v if isinstance(v, int) else None


def _per_layer(v: object, n: int, default: tuple[int, ...] = ()) -> tuple[int, ...]:
    """A scalar-or-array hyperparameter as one value per layer (arrays padded with their last)."""
    if n <= 0:
        return ()
    if isinstance(v, tuple) and v and all(isinstance(x, int) for x in v):
        vals = [int(x) for x in v[:n]]
        vals += [vals[-1]] * (n - len(vals))
        return tuple(vals)
    iv = _int(v)
    if iv is not None:
        return (iv,) * n
    return default


def swa_layers_from(pattern: object, n_layer: int, n_swa: int | None, arch: str) -> tuple[bool, ...]:
    """Which trunk layers use the sliding window (llama.cpp `set_swa_pattern`)."""
    if n_layer <= 0:
        return ()
    if isinstance(pattern, tuple) and pattern:
        flags = [bool(x) for x in pattern[:n_layer]]
        return tuple(flags + [False] * (n_layer - len(flags)))
    if not n_swa:
        return (False,) * n_layer
    p = _int(pattern)
    dense_first = SWA_DEFAULT_PATTERN.get(arch, (0, False))[1]
    if p is None:
        if arch not in SWA_DEFAULT_PATTERN:
            return (False,) * n_layer  # a window without a known layout: say none
        p = SWA_DEFAULT_PATTERN[arch][0]
    if p <= 0:
        return (True,) * n_layer
    if dense_first:
        return tuple(i % p != 0 for i in range(n_layer))
    return tuple(i % p < p - 1 for i in range(n_layer))


def classify_block_tensor(base: str) -> str:
    """The LayerBytes field a `blk.N.<base>` tensor counts towards."""
    stem = base.rsplit(".", 1)[0] if base.endswith((".weight", ".bias", ".scale")) else base
    if "_exps" in stem:
        return "ffn_experts"
    if "_shexp" in stem or stem.startswith(("ffn_gate_inp", "exp_probs_b", "ffn_exp_probs_b")):
        return "ffn_shared"
    if "norm" in stem:
        return "other"
    if stem.startswith(("ssm_", "time_mix", "shortconv", "conv1d", "kda_")):
        return "recurrent"
    if stem.startswith(("attn_", "nextn.eh_proj", "indexer")) or stem in ("wq", "wk", "wv", "wo"):
        return "attention"
    if stem.startswith(("ffn_", "channel_mix")):
        return "ffn_dense"
    return "other"


def _image_part(arch: str, tensors: Iterable[TensorInfo]) -> str | None:
    part = image_part_of(arch, (t.name for t in tensors))
    return part.value if part is not None else None


@dataclass(frozen=True)
class _LayerKinds:
    """Which trunk layers hold recurrent state, and what that leaves of the KV heads and windows."""

    recurrent: tuple[bool, ...]
    n_head_kv: tuple[int, ...]
    swa_layers: tuple[bool, ...]


def _layer_kinds(arch: str, nl: int, n_head_kv: tuple[int, ...], swa_layers: tuple[bool, ...],
                 n_swa: int | None, interval: int | None) -> _LayerKinds:
    """Recurrent layers by the architecture's rule (all, by `full_attention_interval`, or
    those without KV heads); such a layer has no KV cells and (lfm2) no window."""
    if arch in ALL_RECURRENT_ARCHS:
        recurrent = (True,) * nl
    elif arch in RECURRENT_BY_INTERVAL_ARCHS and interval:
        recurrent = tuple((i + 1) % interval != 0 for i in range(nl))
    elif arch in RECURRENT_IF_NO_KV_ARCHS and n_head_kv:
        recurrent = tuple(h == 0 for h in n_head_kv)
    else:
        recurrent = (False,) * nl
    if any(recurrent) and n_head_kv:
        # llama.cpp allocates no KV cells for recurrent layers, whatever head_count_kv says
        n_head_kv = tuple(0 if r else h for h, r in zip(n_head_kv, recurrent, strict=True))
    if arch == "lfm2" or arch == "lfm2moe":
        swa_layers = tuple(s and not r for s, r in zip(swa_layers, recurrent, strict=True)) if n_swa else swa_layers
    return _LayerKinds(recurrent, n_head_kv, swa_layers)


def _vocab_size(tokens: MetaValue | None, vocab_size: MetaValue | None) -> int | None:
    """The tokenizer's length (read or stepped over), else `{arch}.vocab_size`."""
    if isinstance(tokens, SkippedArray):
        return tokens.length
    if isinstance(tokens, tuple):
        return len(tokens)
    return _int(vocab_size)


@dataclass(frozen=True)
class _TensorTally:
    """What the tensor infos add up to: bytes by block and placement class, and the rest."""

    layer_bytes: tuple[LayerBytes, ...]
    embedding: int
    output: int
    other: int
    params: int
    # tensors per type, in the order the types first appear (a tie for the file type goes
    # to the first)
    type_counts: tuple[tuple[str, int], ...]
    repackable: tuple[tuple[int, str, bool, int], ...]  # sorted, as ModelSummary keeps it


def _repack_block(t: TensorInfo) -> int | None:
    """The block a tensor the CPU may repack belongs to (-1 outside the blocks); None when
    it is not repackable (see `ModelSummary.repackable`)."""
    if not (t.type_name in REPACK_CANDIDATE_TYPES and len(t.shape) in (2, 3) and t.shape[1] % 8 == 0
            and not t.name.startswith(("token_embd.", "per_layer_token_embd."))):
        return None
    if t.name.startswith(_BLOCK):
        idx_s = t.name[len(_BLOCK):].partition(".")[0]
        return int(idx_s) if idx_s.isdigit() and len(idx_s) < 7 else -1
    return -1


def _tally_tensors(tensors: tuple[TensorInfo, ...], n_blocks: int) -> _TensorTally:
    """Sum the tensors by block and placement class (`classify_block_tensor`), by type, and
    by what the CPU may repack. A block index past `block_count` (below 100,000, so a
    corrupt name cannot allocate millions) still gets its own block."""
    per_block: list[dict[str, int]] = [dict() for _ in range(n_blocks)]
    embedding = output = other = params = 0
    quant: dict[str, int] = {}
    repack: dict[tuple[int, str, bool], int] = {}
    for t in tensors:
        elems = 1
        for d in t.shape:
            elems *= d
        params += elems
        quant[t.type_name] = quant.get(t.type_name, 0) + 1
        blk = _repack_block(t)
        if blk is not None:
            rk = (blk, t.type_name, len(t.shape) == 3)
            repack[rk] = repack.get(rk, 0) + t.nbytes
        if t.name.startswith(_BLOCK):
            idx_s, _, base = t.name[len(_BLOCK):].partition(".")
            if idx_s.isdigit() and base:
                idx = int(idx_s)
                if idx >= len(per_block) and idx < 100_000:
                    per_block.extend(dict() for _ in range(idx + 1 - len(per_block)))
                if idx < len(per_block):
                    cls = classify_block_tensor(base)
                    per_block[idx][cls] = per_block[idx].get(cls, 0) + t.nbytes
                    continue
        if t.name.startswith("token_embd."):
            embedding += t.nbytes
        elif t.name.startswith(("output.", "output_norm.")):
            output += t.nbytes
        else:
            other += t.nbytes

    # A tied output (no output.weight) multiplies by token_embd: the engine gives the output
    # layer its own copy of it, which the CPU repacks like any matrix (block -2).
    if not any(t.name == "output.weight" for t in tensors):
        for t in tensors:
            if (t.name == "token_embd.weight" and t.type_name in REPACK_CANDIDATE_TYPES
                    and len(t.shape) == 2 and t.shape[1] % 8 == 0):
                repack[(-2, t.type_name, False)] = t.nbytes
    return _TensorTally(
        layer_bytes=tuple(LayerBytes(**d) for d in per_block), embedding=embedding, output=output,
        other=other, params=params, type_counts=tuple(quant.items()),
        repackable=tuple((b, ty, e, n) for (b, ty, e), n in sorted(repack.items())))


def _dominant_type(type_counts: tuple[tuple[str, int], ...]) -> str | None:
    """The file type when general.file_type does not say: the commonest tensor type, F32
    (norms, biases) left out unless it is all there is."""
    if not type_counts:
        return None
    weights = [kv for kv in type_counts if kv[0] not in ("F32",)] or list(type_counts)
    return max(weights, key=lambda kv: kv[1])[0]


def summarise(header: GGUFHeader) -> ModelSummary:
    md = header.metadata
    arch = md.get("general.architecture")
    arch = arch if isinstance(arch, str) else "unknown"

    def key(suffix: str) -> MetaValue | None:
        return md.get(f"{arch}.{suffix}")

    n_layer_all = _int(key("block_count"))
    nextn = _int(key("nextn_predict_layers")) or 0
    n_layer = max(0, n_layer_all - nextn) if n_layer_all is not None else None
    nl = n_layer or 0
    n_embd = _int(key("embedding_length"))
    n_head = _per_layer(key("attention.head_count"), nl)
    first_head = next((h for h in n_head if h > 0), None)
    derived = n_embd // first_head if n_embd and first_head else None
    head_k = _int(key("attention.key_length")) or derived
    head_v = _int(key("attention.value_length")) or derived
    n_swa = _int(key("attention.sliding_window"))
    layers = _layer_kinds(arch, nl, _per_layer(key("attention.head_count_kv"), nl, default=n_head),
                          swa_layers_from(key("attention.sliding_window_pattern"), nl, n_swa, arch),
                          n_swa, _int(key("full_attention_interval")))

    ssm_keys = ("conv_kernel", "inner_size", "state_size", "group_count", "time_step_rank")
    ssm_vals = [_int(key(f"ssm.{k}")) for k in ssm_keys]
    kv_lora = _int(key("attention.kv_lora_rank"))
    tally = _tally_tensors(header.tensors, n_layer_all or 0)
    file_type = header.file_type_name if header.file_type_name is not None else _dominant_type(tally.type_counts)
    name = md.get("general.name")
    return ModelSummary(
        path=header.path,
        file_bytes=header.file_bytes,
        architecture=arch,
        name=name if isinstance(name, str) else None,
        is_vision_projector=arch == "clip",
        parameter_count=tally.params,
        file_type=file_type,
        n_ctx_train=_int(key("context_length")),
        n_layer_all=n_layer_all,
        n_layer=n_layer,
        n_embd=n_embd,
        n_head=n_head,
        n_head_kv=layers.n_head_kv,
        head_k=head_k,
        head_v=head_v,
        head_k_swa=_int(key("attention.key_length_swa")) or head_k,
        head_v_swa=_int(key("attention.value_length_swa")) or head_v,
        n_swa=n_swa,
        swa_layers=layers.swa_layers,
        shared_kv_layers=_int(key("attention.shared_kv_layers")) or 0,
        n_expert=_int(key("expert_count")),
        n_expert_used=_int(key("expert_used_count")),
        nextn_layers=nextn,
        recurrent_layers=layers.recurrent,
        ssm=SSMShape(*ssm_vals) if any(v is not None for v in ssm_vals) else None,
        rwkv_head_size=_int(key("wkv.head_size")),
        token_shift_count=_int(key("token_shift_count")),
        shortconv_l_cache=_int(key("shortconv.l_cache")),
        mla=(MLAShape(kv_lora, _int(key("attention.key_length_mla")),
                      _int(key("attention.value_length_mla"))) if kv_lora else None),
        n_vocab=_vocab_size(md.get("tokenizer.ggml.tokens"), key("vocab_size")),
        layer_bytes=tally.layer_bytes,
        embedding_bytes=tally.embedding,
        output_bytes=tally.output,
        other_bytes=tally.other,
        split_count=max(1, len(header.split_paths)),
        quant_counts=tuple(sorted(tally.type_counts, key=lambda kv: (-kv[1], kv[0]))),
        n_ff=max(_per_layer(key("feed_forward_length"), n_layer_all or 1), default=None) or None,
        n_ff_exp=_int(key("expert_feed_forward_length")),
        repackable=tally.repackable,
        pooling_type=_int(key("pooling_type")),
        general_type=general_type if isinstance(general_type := md.get("general.type"), str) else None,
        image_part=_image_part(arch, header.tensors),
        template_tools=("tools" in template) if isinstance(template := md.get("tokenizer.chat_template"), str)
        else None,
        has_fim=any(f"tokenizer.ggml.fim_{k}_token_id" in md for k in ("pre", "suf", "mid")),
    )


def summary_to_dict(s: ModelSummary) -> dict[str, Any]:
    """A JSON-ready dict of every field (plus the derived totals), for caches and --json."""
    d = asdict(s)
    d["is_moe"] = s.is_moe
    d["weights_bytes"] = s.weights_bytes
    return d


def summary_from_dict(d: Mapping[str, Any]) -> ModelSummary:
    """The inverse of `summary_to_dict`; raises KeyError/TypeError on a foreign dict."""
    kw = {f.name: d[f.name] for f in fields(ModelSummary)}
    for k in ("n_head", "n_head_kv", "swa_layers", "recurrent_layers"):
        kw[k] = tuple(kw[k])
    kw["layer_bytes"] = tuple(LayerBytes(**lb) for lb in kw["layer_bytes"])
    kw["quant_counts"] = tuple((str(a), int(b)) for a, b in kw["quant_counts"])
    kw["repackable"] = tuple((int(b), str(t), bool(e), int(n)) for b, t, e, n in kw["repackable"])
    kw["ssm"] = SSMShape(**kw["ssm"]) if kw["ssm"] is not None else None
    kw["mla"] = MLAShape(**kw["mla"]) if kw["mla"] is not None else None
    return ModelSummary(**kw)
