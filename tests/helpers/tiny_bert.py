"""A tiny, real BERT embedding model: what `bert` in llama.cpp b11434 loads, with random weights.

No small embedding GGUF ships in a package this project can reach, so the gateway's
embeddings path is tested on this one: the architecture's own tensor names and shapes
(src/models/bert.cpp), its metadata (mean pooling, non-causal attention) and a WordPiece
vocabulary, with seeded random weights. The real engine loads it with `--embeddings` and
returns real (if meaningless) vectors.
"""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np

N_EMBD, N_LAYER, N_HEAD, N_FF, N_CTX = 64, 2, 4, 128, 128
WORDS = [
    "the", "of", "and", "to", "in", "is", "was", "for", "on", "that", "with", "as", "by", "at", "from", "his",
    "her", "it", "an", "be", "are", "this", "which", "hello", "world", "other", "text", "model", "stoker",
    "engine", "fast", "slow", "red", "green", "blue", "one", "two", "three", "cat", "dog", "sky", "sea", "tree",
    "book", "code", "memory", "plan"
]


def write_tiny_bert(path: Path, seed: int = 7) -> Path:
    rng = np.random.default_rng(seed)
    tokens = ["[PAD]"] + [f"[unused{i}]" for i in range(99)] + ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    # llama.cpp's WordPiece vocabulary is written SentencePiece-style (as its converter
    # does): a word-initial piece starts with U+2581, a continuation ("##x") is bare.
    tokens += ["\u2581" + chr(c) for c in range(ord("a"), ord("z") + 1)]
    tokens += [chr(c) for c in range(ord("a"), ord("z") + 1)]
    tokens += ["\u2581" + w for w in WORDS]
    n_vocab = len(tokens)
    w = gguf.GGUFWriter(str(path), "bert")
    w.add_name("tiny-bert-test")
    w.add_context_length(N_CTX)
    w.add_embedding_length(N_EMBD)
    w.add_feed_forward_length(N_FF)
    w.add_block_count(N_LAYER)
    w.add_head_count(N_HEAD)
    w.add_layer_norm_eps(1e-12)
    w.add_causal_attention(False)
    w.add_pooling_type(gguf.PoolingType.MEAN)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_tokenizer_model("bert")
    w.add_token_list(tokens)
    w.add_token_types([gguf.TokenType.CONTROL if t.startswith("[") else gguf.TokenType.NORMAL for t in tokens])
    w.add_token_type_count(2)
    w.add_bos_token_id(101)
    w.add_sep_token_id(102)
    w.add_unk_token_id(100)
    w.add_pad_token_id(0)
    w.add_mask_token_id(103)

    def t(name: str, *shape: int, scale: float = 0.05, value: float | None = None) -> None:
        # numpy shapes are the reverse of ggml's ne order
        arr = (np.full(shape[::-1], value, dtype=np.float32) if value is not None
               else (rng.standard_normal(shape[::-1]) * scale).astype(np.float32))
        w.add_tensor(name, arr)

    t("token_embd.weight", N_EMBD, n_vocab)
    t("token_types.weight", N_EMBD, 2)
    t("position_embd.weight", N_EMBD, N_CTX)
    t("token_embd_norm.weight", N_EMBD, value=1.0)
    t("token_embd_norm.bias", N_EMBD, value=0.0)
    for i in range(N_LAYER):
        for part in ("attn_q", "attn_k", "attn_v", "attn_output"):
            t(f"blk.{i}.{part}.weight", N_EMBD, N_EMBD)
            t(f"blk.{i}.{part}.bias", N_EMBD, scale=0.01)
        t(f"blk.{i}.attn_output_norm.weight", N_EMBD, value=1.0)
        t(f"blk.{i}.attn_output_norm.bias", N_EMBD, value=0.0)
        t(f"blk.{i}.ffn_up.weight", N_EMBD, N_FF)
        t(f"blk.{i}.ffn_up.bias", N_FF, scale=0.01)
        t(f"blk.{i}.ffn_down.weight", N_FF, N_EMBD)
        t(f"blk.{i}.ffn_down.bias", N_EMBD, scale=0.01)
        t(f"blk.{i}.layer_output_norm.weight", N_EMBD, value=1.0)
        t(f"blk.{i}.layer_output_norm.bias", N_EMBD, value=0.0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path
