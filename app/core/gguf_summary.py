"""What a GGUF model needs, decided from its header alone.

`shell/gguf_io.py` walks the file and hands over a `GGUFHeader` (metadata values and
tensor infos, byte sizes already computed with the gguf package's tables). This module
turns that into a `ModelSummary`: the facts the memory model and the planner read.
It must not open files or import gguf; unknown facts are `None`, never 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Union

# A metadata value as the reader keeps it. Arrays the summary needs are kept as tuples;
# long arrays nobody reads (the tokenizer's) are replaced by `SkippedArray`.
Scalar = Union[int, float, bool, str]


@dataclass(frozen=True)
class SkippedArray:
    """An array value the reader stepped over by its length instead of decoding."""

    item_type: int  # gguf.GGUFValueType value
    length: int


MetaValue = Union[Scalar, tuple, SkippedArray]


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

    @property
    def is_moe(self) -> bool:
        return bool(self.n_expert and self.n_expert > 1)

    @property
    def weights_bytes(self) -> int:
        return (sum(lb.total for lb in self.layer_bytes) + self.embedding_bytes
                + self.output_bytes + self.other_bytes)


def summarise(header: GGUFHeader) -> ModelSummary:
    raise NotImplementedError  # filled in by the GGUF summary work (issue 2)
