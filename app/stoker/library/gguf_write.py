"""Write header-only GGUF files: real metadata and tensor table, data section a sparse hole.

Used by `stoker bench inspect` (a 150k-vocabulary file to time) and by the test builders
of real-shape models (app/stoker/library/real_shapes.py). The files are valid for
gguf.GGUFReader and llama.cpp; no tensor data is written (`truncate` makes a hole).
It must not read models or decide anything about them.
"""

from __future__ import annotations

import struct
from pathlib import Path

import gguf

T = gguf.GGUFValueType
Q = gguf.GGMLQuantizationType
ALIGNMENT = 32


def _string(s: str | bytes) -> bytes:
    b = s.encode() if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


_FMT: dict[int, str] = {T.UINT8: "B", T.INT8: "b", T.UINT16: "H", T.INT16: "h", T.UINT32: "I", T.INT32: "i",
        T.FLOAT32: "f", T.BOOL: "?", T.UINT64: "Q", T.INT64: "q", T.FLOAT64: "d"}


class Typed:
    """A metadata value with an explicit GGUF type (plain Python values get a default one)."""

    def __init__(self, vtype: T, value, item_type: T | None = None):
        self.vtype, self.value, self.item_type = vtype, value, item_type


def _guess(value) -> Typed:
    if isinstance(value, Typed):
        return value
    if isinstance(value, bool):
        return Typed(T.BOOL, value)
    if isinstance(value, int):
        return Typed(T.UINT32 if 0 <= value < 2**32 else T.INT64, value)
    if isinstance(value, float):
        return Typed(T.FLOAT32, value)
    if isinstance(value, str):
        return Typed(T.STRING, value)
    if isinstance(value, (list, tuple)):
        if all(isinstance(v, bool) for v in value) and value:
            return Typed(T.ARRAY, list(value), T.BOOL)
        if all(isinstance(v, int) for v in value):
            return Typed(T.ARRAY, list(value), T.INT32)
        if all(isinstance(v, float) for v in value):
            return Typed(T.ARRAY, list(value), T.FLOAT32)
        return Typed(T.ARRAY, list(value), T.STRING)
    raise TypeError(f"no GGUF type for {value!r}")


def encode_value(value) -> bytes:
    """Type tag + payload of one metadata value."""
    tv = _guess(value)
    return struct.pack("<I", tv.vtype) + _payload(tv)


def _payload(tv: Typed) -> bytes:
    if tv.vtype == T.STRING:
        return _string(tv.value)
    if tv.vtype == T.ARRAY:
        items = tv.value
        assert tv.item_type is not None  # _guess gives every array its item type
        head = struct.pack("<IQ", tv.item_type, len(items))
        if tv.item_type == T.STRING:
            return head + b"".join(_string(s) for s in items)
        if tv.item_type == T.ARRAY:
            return head + b"".join(_payload(_guess(v)) for v in items)
        return head + struct.pack(f"<{len(items)}{_FMT[tv.item_type]}", *items)
    return struct.pack("<" + _FMT[tv.vtype], tv.value)


def spm_vocab(n: int) -> dict:
    """A SentencePiece-style vocabulary of n entries: 3 specials, 256 byte tokens, then short ones."""
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{i:02X}>" for i in range(256)]
    tokens = tokens[:n] + [f"t{i}" for i in range(len(tokens), n)]
    types = [2, 3, 3] + [6] * 256
    types = (types + [1] * n)[:n]
    return {
        "tokenizer.ggml.model": "llama",
        "tokenizer.ggml.tokens": Typed(T.ARRAY, tokens, T.STRING),
        "tokenizer.ggml.scores": Typed(T.ARRAY, [0.0] * n, T.FLOAT32),
        "tokenizer.ggml.token_type": Typed(T.ARRAY, types, T.INT32),
        "tokenizer.ggml.bos_token_id": 1,
        "tokenizer.ggml.eos_token_id": 2,
        "tokenizer.ggml.unknown_token_id": 0,
    }


def write_header_only_gguf(path, arch: str, metadata: dict, tensors, vocab_size: int | None = None,
                           *, version: int = 3, alignment: int = ALIGNMENT) -> Path:
    """Write a valid GGUF whose data section is a sparse hole; returns the path.

    tensors: (name, shape ne0-first, ggml type) triples. metadata values are plain Python
    values (int -> u32, float -> f32, list -> array) or `Typed`.
    """
    path = Path(path)
    kv: dict[str, object] = {"general.architecture": arch}
    kv.update(metadata)
    if vocab_size:
        kv.update(spm_vocab(vocab_size))
    if alignment != ALIGNMENT:
        kv["general.alignment"] = alignment
    out = bytearray(b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kv)))
    for key, value in kv.items():
        out += _string(key) + encode_value(value)
    offset = 0
    for name, shape, qtype in tensors:
        qtype = Q(qtype)
        block, size = gguf.GGML_QUANT_SIZES[qtype]
        n = 1
        for d in shape:
            n *= d
        out += _string(name) + struct.pack(f"<I{len(shape)}QIQ", len(shape), *shape, qtype, offset)
        offset += -(-(n // block * size) // alignment) * alignment
    data_start = -(-len(out) // alignment) * alignment
    with open(path, "wb") as f:
        f.write(out)
        f.truncate(data_start + offset)  # the tensor data: a hole, no blocks on disk
    return path



def write_vocab_heavy_gguf(path, n_vocab: int = 150_000) -> Path:
    """A 4-layer llama whose header is mostly a vocabulary of n_vocab entries."""
    a, n, e, ff = "llama", 4, 256, 512
    md = {
        "general.name": f"Vocab {n_vocab}", "general.file_type": int(gguf.LlamaFileType.MOSTLY_Q4_K_M),
        f"{a}.block_count": n, f"{a}.context_length": 4096, f"{a}.embedding_length": e,
        f"{a}.feed_forward_length": ff, f"{a}.attention.head_count": 4,
        f"{a}.attention.head_count_kv": 4, f"{a}.attention.layer_norm_rms_epsilon": 1e-5,
    }
    tensors = [("token_embd.weight", (e, n_vocab), Q.Q4_K), ("output_norm.weight", (e,), Q.F32),
               ("output.weight", (e, n_vocab), Q.Q6_K)]
    for i in range(n):
        tensors += [
            (f"blk.{i}.attn_norm.weight", (e,), Q.F32),
            (f"blk.{i}.attn_q.weight", (e, e), Q.Q4_K), (f"blk.{i}.attn_k.weight", (e, e), Q.Q4_K),
            (f"blk.{i}.attn_v.weight", (e, e), Q.Q6_K), (f"blk.{i}.attn_output.weight", (e, e), Q.Q4_K),
            (f"blk.{i}.ffn_norm.weight", (e,), Q.F32),
            (f"blk.{i}.ffn_gate.weight", (e, ff), Q.Q4_K), (f"blk.{i}.ffn_up.weight", (e, ff), Q.Q4_K),
            (f"blk.{i}.ffn_down.weight", (ff, e), Q.Q6_K),
        ]
    return write_header_only_gguf(path, a, md, tensors, n_vocab)
