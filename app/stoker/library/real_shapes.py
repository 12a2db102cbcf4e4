"""Header-only GGUF files with the real shapes of real models.

A header-only file has the real metadata, the real tokenizer array lengths (short token
strings) and the real tensor table, but its data section is a sparse hole made with
`truncate`: a 70B model costs a few MiB of disk. gguf.GGUFReader and llama.cpp b11434
accept the files; tensor names and shapes follow src/models/*.cpp of that build, and the
per-tensor types follow what `llama-quantize` writes for Q4_K_M (attn_v / ffn_down Q6_K on
the "more bits" layers, the rest Q4_K, norms F32, Q5_0/Q8_0 where a row is not a multiple
of 256). The planner's tests plan them and `stoker bench memory` has the engine measure
them with metadata-only loads, so they live in the app, not only in the tests.
"""

from __future__ import annotations

from pathlib import Path

import gguf

from stoker.library.gguf_write import Typed, write_header_only_gguf, write_vocab_heavy_gguf

T = gguf.GGUFValueType
Q = gguf.GGMLQuantizationType

# Fallbacks llama-quantize uses when a row is not a multiple of the 256-value K block.
_K_FALLBACK = {Q.Q4_K: Q.Q5_0, Q.Q5_K: Q.Q5_1, Q.Q6_K: Q.Q8_0, Q.Q2_K: Q.Q4_0, Q.Q3_K: Q.Q4_0}


def _fit(qtype: Q, ne0: int) -> Q:
    block = gguf.GGML_QUANT_SIZES[qtype][0]
    if ne0 % block == 0:
        return qtype
    fb = _K_FALLBACK.get(qtype, Q.F16)
    return fb if ne0 % gguf.GGML_QUANT_SIZES[fb][0] == 0 else Q.F16


# ---- real-shape models ----------------------------------------------------------------

def _more_bits(i: int, n: int) -> bool:
    """llama-quantize's `use_more_bits`: Q4_K_M spends Q6_K on these layers."""
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def _q4km(kind: str, i: int, n: int, ne0: int) -> Q:
    if kind in ("attn_v", "ffn_down") and _more_bits(i, n):
        return _fit(Q.Q6_K, ne0)
    return _fit(Q.Q4_K, ne0)


class _Tensors(list):
    def add(self, name: str, shape, qtype):
        self.append((name, tuple(int(d) for d in shape), Q(qtype)))


def _attention(t: _Tensors, i, n, n_embd, n_head, n_kv, hk, hv=None, qk_norm=False, bias=False):
    hv = hv or hk
    t.add(f"blk.{i}.attn_norm.weight", [n_embd], Q.F32)
    t.add(f"blk.{i}.attn_q.weight", [n_embd, n_head * hk], _q4km("attn_q", i, n, n_embd))
    t.add(f"blk.{i}.attn_k.weight", [n_embd, n_kv * hk], _q4km("attn_k", i, n, n_embd))
    t.add(f"blk.{i}.attn_v.weight", [n_embd, n_kv * hv], _q4km("attn_v", i, n, n_embd))
    t.add(f"blk.{i}.attn_output.weight", [n_head * hv, n_embd], _q4km("attn_output", i, n, n_head * hv))
    if bias:
        t.add(f"blk.{i}.attn_q.bias", [n_head * hk], Q.F32)
        t.add(f"blk.{i}.attn_k.bias", [n_kv * hk], Q.F32)
        t.add(f"blk.{i}.attn_v.bias", [n_kv * hv], Q.F32)
    if qk_norm:
        t.add(f"blk.{i}.attn_q_norm.weight", [hk], Q.F32)
        t.add(f"blk.{i}.attn_k_norm.weight", [hk], Q.F32)


def _dense_ffn(t: _Tensors, i, n, n_embd, n_ff, norm=True):
    if norm:
        t.add(f"blk.{i}.ffn_norm.weight", [n_embd], Q.F32)
    t.add(f"blk.{i}.ffn_gate.weight", [n_embd, n_ff], _q4km("ffn_gate", i, n, n_embd))
    t.add(f"blk.{i}.ffn_up.weight", [n_embd, n_ff], _q4km("ffn_up", i, n, n_embd))
    t.add(f"blk.{i}.ffn_down.weight", [n_ff, n_embd], _q4km("ffn_down", i, n, n_ff))


def _embeddings(t: _Tensors, n_embd, n_vocab, tied: bool, out_norm="output_norm.weight"):
    t.add("token_embd.weight", [n_embd, n_vocab], _fit(Q.Q4_K, n_embd))
    t.add(out_norm, [n_embd], Q.F32)
    if not tied:
        t.add("output.weight", [n_embd, n_vocab], _fit(Q.Q6_K, n_embd))


def _general(name: str, file_type: int = gguf.LlamaFileType.MOSTLY_Q4_K_M) -> dict:
    return {"general.name": name, "general.file_type": int(file_type),
            "general.quantization_version": 2}


def _llama(path, name, n_layer, n_embd, n_head, n_kv, n_ff, n_vocab=128256, ctx=131072):
    a = "llama"
    md = _general(name) | {
        f"{a}.block_count": n_layer, f"{a}.context_length": ctx, f"{a}.embedding_length": n_embd,
        f"{a}.feed_forward_length": n_ff, f"{a}.attention.head_count": n_head,
        f"{a}.attention.head_count_kv": n_kv, f"{a}.rope.freq_base": 500000.0,
        f"{a}.attention.layer_norm_rms_epsilon": 1e-5, f"{a}.rope.dimension_count": n_embd // n_head,
        f"{a}.vocab_size": n_vocab,
    }
    t = _Tensors()
    _embeddings(t, n_embd, n_vocab, tied=False)
    t.add("rope_freqs.weight", [n_embd // n_head // 2], Q.F32)
    for i in range(n_layer):
        _attention(t, i, n_layer, n_embd, n_head, n_kv, n_embd // n_head)
        _dense_ffn(t, i, n_layer, n_embd, n_ff)
    return write_header_only_gguf(path, a, md, t, n_vocab)


def llama_8b_q4_k_m(path) -> Path:
    """Llama-3.1-8B-Instruct: 32 layers, 4096 wide, 32 heads / 8 KV heads, 128K context."""
    return _llama(path, "Meta Llama 3.1 8B Instruct", 32, 4096, 32, 8, 14336)


def llama_70b_q4_k_m(path) -> Path:
    """Llama-3.3-70B-Instruct: 80 layers, 8192 wide, 64 heads / 8 KV heads (about 42.5 GB)."""
    return _llama(path, "Llama 3.3 70B Instruct", 80, 8192, 64, 8, 28672)


def qwen3moe_30b_a3b_q4_k_m(path) -> Path:
    """Qwen3-30B-A3B: 48 layers, 128 experts (8 used, 768 wide), 32 heads / 4 KV heads of 128."""
    a, n, e, v = "qwen3moe", 48, 2048, 151936
    md = _general("Qwen3 30B A3B") | {
        f"{a}.block_count": n, f"{a}.context_length": 40960, f"{a}.embedding_length": e,
        f"{a}.feed_forward_length": 6144, f"{a}.attention.head_count": 32,
        f"{a}.attention.head_count_kv": 4, f"{a}.attention.key_length": 128,
        f"{a}.attention.value_length": 128, f"{a}.rope.freq_base": 1000000.0,
        f"{a}.attention.layer_norm_rms_epsilon": 1e-6, f"{a}.expert_count": 128,
        f"{a}.expert_used_count": 8, f"{a}.expert_feed_forward_length": 768,
    }
    t = _Tensors()
    _embeddings(t, e, v, tied=False)
    for i in range(n):
        _attention(t, i, n, e, 32, 4, 128, qk_norm=True)
        t.add(f"blk.{i}.ffn_norm.weight", [e], Q.F32)
        t.add(f"blk.{i}.ffn_gate_inp.weight", [e, 128], Q.F32)
        t.add(f"blk.{i}.ffn_gate_exps.weight", [e, 768, 128], Q.Q4_K)
        t.add(f"blk.{i}.ffn_up_exps.weight", [e, 768, 128], Q.Q4_K)
        t.add(f"blk.{i}.ffn_down_exps.weight", [768, e, 128], _q4km("ffn_down", i, n, 768))
    return write_header_only_gguf(path, a, md, t, v)


def gemma3_12b_q4_k_m(path) -> Path:
    """Gemma-3-12B-it: 48 layers (5 of every 6 sliding, window 1024), 16 heads / 8 KV of 256."""
    a, n, e, v = "gemma3", 48, 3840, 262144
    md = _general("Gemma 3 12b It") | {
        f"{a}.block_count": n, f"{a}.context_length": 131072, f"{a}.embedding_length": e,
        f"{a}.feed_forward_length": 15360, f"{a}.attention.head_count": 16,
        f"{a}.attention.head_count_kv": 8, f"{a}.attention.key_length": 256,
        f"{a}.attention.value_length": 256, f"{a}.attention.sliding_window": 1024,
        f"{a}.rope.freq_base": 1000000.0, f"{a}.attention.layer_norm_rms_epsilon": 1e-6,
        f"{a}.rope.scaling.type": "linear", f"{a}.rope.scaling.factor": 8.0,
    }
    t = _Tensors()
    _embeddings(t, e, v, tied=True)
    for i in range(n):
        _attention(t, i, n, e, 16, 8, 256, qk_norm=True)
        t.add(f"blk.{i}.post_attention_norm.weight", [e], Q.F32)
        _dense_ffn(t, i, n, e, 15360)
        t.add(f"blk.{i}.post_ffw_norm.weight", [e], Q.F32)
    return write_header_only_gguf(path, a, md, t, v)


def gpt_oss_20b_mxfp4(path) -> Path:
    """gpt-oss-20b: 24 layers alternating sliding (128) / full, 32 experts (4 used) in MXFP4."""
    a, n, e, v, ne = "gpt-oss", 24, 2880, 201088, 32
    md = _general("Gpt Oss 20b", gguf.LlamaFileType.MOSTLY_MXFP4_MOE) | {
        f"{a}.block_count": n, f"{a}.context_length": 131072, f"{a}.embedding_length": e,
        f"{a}.feed_forward_length": 2880, f"{a}.attention.head_count": 64,
        f"{a}.attention.head_count_kv": 8, f"{a}.attention.key_length": 64,
        f"{a}.attention.value_length": 64, f"{a}.rope.dimension_count": 64,
        f"{a}.attention.sliding_window": 128, f"{a}.expert_count": ne,
        f"{a}.expert_used_count": 4, f"{a}.expert_feed_forward_length": 2880,
        f"{a}.rope.freq_base": 150000.0, f"{a}.attention.layer_norm_rms_epsilon": 1e-5,
        f"{a}.rope.scaling.type": "yarn", f"{a}.rope.scaling.factor": 32.0,
        f"{a}.rope.scaling.original_context_length": 4096,
    }
    t = _Tensors()
    t.add("token_embd.weight", [e, v], Q.Q8_0)
    t.add("output_norm.weight", [e], Q.F32)
    t.add("output.weight", [e, v], Q.Q8_0)
    for i in range(n):
        t.add(f"blk.{i}.attn_norm.weight", [e], Q.F32)
        t.add(f"blk.{i}.post_attention_norm.weight", [e], Q.F32)
        for nm, rows in (("attn_q", 4096), ("attn_k", 512), ("attn_v", 512)):
            t.add(f"blk.{i}.{nm}.weight", [e, rows], Q.Q8_0)
            t.add(f"blk.{i}.{nm}.bias", [rows], Q.F32)
        t.add(f"blk.{i}.attn_output.weight", [4096, e], Q.Q8_0)
        t.add(f"blk.{i}.attn_output.bias", [e], Q.F32)
        t.add(f"blk.{i}.attn_sinks.weight", [64], Q.F32)
        t.add(f"blk.{i}.ffn_gate_inp.weight", [e, ne], Q.F32)
        t.add(f"blk.{i}.ffn_gate_inp.bias", [ne], Q.F32)
        for nm, shape in (("gate", [e, 2880, ne]), ("up", [e, 2880, ne]), ("down", [2880, e, ne])):
            t.add(f"blk.{i}.ffn_{nm}_exps.weight", shape, Q.MXFP4)
            t.add(f"blk.{i}.ffn_{nm}_exps.bias", [shape[1], ne], Q.F32)
    return write_header_only_gguf(path, a, md, t, v)


def deepseek2_lite_q4_k_m(path) -> Path:
    """DeepSeek-V2-Lite-Chat: MLA (kv_lora_rank 512, rope 64), 1 dense + 26 MoE layers, 64 experts."""
    a, n, e, v, nh = "deepseek2", 27, 2048, 102400, 16
    md = _general("DeepSeek V2 Lite Chat") | {
        f"{a}.block_count": n, f"{a}.context_length": 163840, f"{a}.embedding_length": e,
        f"{a}.feed_forward_length": 10944, f"{a}.attention.head_count": nh,
        f"{a}.attention.head_count_kv": 1, f"{a}.attention.key_length": 576,
        f"{a}.attention.value_length": 512, f"{a}.attention.key_length_mla": 192,
        f"{a}.attention.value_length_mla": 128, f"{a}.attention.kv_lora_rank": 512,
        f"{a}.rope.dimension_count": 64, f"{a}.rope.freq_base": 10000.0,
        f"{a}.attention.layer_norm_rms_epsilon": 1e-6, f"{a}.leading_dense_block_count": 1,
        f"{a}.expert_count": 64, f"{a}.expert_used_count": 6, f"{a}.expert_shared_count": 2,
        f"{a}.expert_feed_forward_length": 1408, f"{a}.expert_weights_scale": 1.0,
        f"{a}.expert_gating_func": 1, f"{a}.rope.scaling.type": "yarn",
        f"{a}.rope.scaling.factor": 40.0, f"{a}.rope.scaling.original_context_length": 4096,
        f"{a}.rope.scaling.yarn_log_multiplier": 0.0707,
    }
    t = _Tensors()
    _embeddings(t, e, v, tied=False)
    for i in range(n):
        t.add(f"blk.{i}.attn_norm.weight", [e], Q.F32)
        t.add(f"blk.{i}.attn_q.weight", [e, nh * 192], Q.Q4_K)
        t.add(f"blk.{i}.attn_kv_a_mqa.weight", [e, 512 + 64], Q.Q4_K)
        t.add(f"blk.{i}.attn_kv_a_norm.weight", [512], Q.F32)
        t.add(f"blk.{i}.attn_k_b.weight", [128, 512, nh], _fit(Q.Q4_K, 128))
        t.add(f"blk.{i}.attn_v_b.weight", [512, 128, nh], _q4km("attn_v", i, n, 512))
        t.add(f"blk.{i}.attn_output.weight", [nh * 128, e], Q.Q4_K)
        if i < 1:
            _dense_ffn(t, i, n, e, 10944)
            continue
        t.add(f"blk.{i}.ffn_norm.weight", [e], Q.F32)
        t.add(f"blk.{i}.ffn_gate_inp.weight", [e, 64], Q.F32)
        t.add(f"blk.{i}.ffn_gate_exps.weight", [e, 1408, 64], Q.Q4_K)
        t.add(f"blk.{i}.ffn_up_exps.weight", [e, 1408, 64], Q.Q4_K)
        t.add(f"blk.{i}.ffn_down_exps.weight", [1408, e, 64], _q4km("ffn_down", i, n, 1408))
        t.add(f"blk.{i}.ffn_gate_shexp.weight", [e, 2816], Q.Q4_K)
        t.add(f"blk.{i}.ffn_up_shexp.weight", [e, 2816], Q.Q4_K)
        t.add(f"blk.{i}.ffn_down_shexp.weight", [2816, e], _q4km("ffn_down", i, n, 2816))
    return write_header_only_gguf(path, a, md, t, v)


LFM2_ATTENTION_LAYERS = (2, 5, 8, 10, 12, 14)


def lfm2_1_2b_q4_k_m(path) -> Path:
    """LFM2-1.2B (hybrid): 16 layers, 10 short-convolution (recurrent) + 6 attention layers."""
    a, n, e, v = "lfm2", 16, 2048, 65536
    kv_heads = [8 if i in LFM2_ATTENTION_LAYERS else 0 for i in range(n)]
    md = _general("LFM2 1.2B") | {
        f"{a}.block_count": n, f"{a}.context_length": 128000, f"{a}.embedding_length": e,
        f"{a}.feed_forward_length": 8192, f"{a}.attention.head_count": 32,
        f"{a}.attention.head_count_kv": Typed(T.ARRAY, kv_heads, T.INT32),
        f"{a}.rope.freq_base": 1000000.0, f"{a}.attention.layer_norm_rms_epsilon": 1e-5,
        f"{a}.shortconv.l_cache": 3, f"{a}.vocab_size": v,
    }
    t = _Tensors()
    t.add("token_embd.weight", [e, v], Q.Q4_K)
    t.add("token_embd_norm.weight", [e], Q.F32)
    for i in range(n):
        if kv_heads[i]:
            t.add(f"blk.{i}.attn_norm.weight", [e], Q.F32)
            t.add(f"blk.{i}.attn_q_norm.weight", [64], Q.F32)
            t.add(f"blk.{i}.attn_k_norm.weight", [64], Q.F32)
            t.add(f"blk.{i}.attn_q.weight", [e, e], Q.Q4_K)
            t.add(f"blk.{i}.attn_k.weight", [e, 512], Q.Q4_K)
            t.add(f"blk.{i}.attn_v.weight", [e, 512], _q4km("attn_v", i, n, e))
            t.add(f"blk.{i}.attn_output.weight", [e, e], Q.Q4_K)
        else:
            t.add(f"blk.{i}.attn_norm.weight", [e], Q.F32)
            t.add(f"blk.{i}.shortconv.conv.weight", [3, e], Q.F32)
            t.add(f"blk.{i}.shortconv.in_proj.weight", [e, 3 * e], Q.Q4_K)
            t.add(f"blk.{i}.shortconv.out_proj.weight", [e, e], Q.Q4_K)
        _dense_ffn(t, i, n, e, 8192)
    return write_header_only_gguf(path, a, md, t, v)


def mamba2_2_7b(path) -> Path:
    """Mamba2-2.7B: 64 SSM layers (d_inner 5120, d_state 128, 80 heads, 1 group), no attention."""
    a, n, e, v = "mamba2", 64, 2560, 50288
    d_inner, d_state, n_group, heads, d_conv = 5120, 128, 1, 80, 4
    md = _general("Mamba2 2.7b") | {
        f"{a}.block_count": n, f"{a}.context_length": 1048576, f"{a}.embedding_length": e,
        f"{a}.feed_forward_length": 0, f"{a}.attention.head_count": 0,
        f"{a}.ssm.conv_kernel": d_conv, f"{a}.ssm.inner_size": d_inner,
        f"{a}.ssm.state_size": d_state, f"{a}.ssm.time_step_rank": heads,
        f"{a}.ssm.group_count": n_group, f"{a}.attention.layer_norm_rms_epsilon": 1e-5,
    }
    t = _Tensors()
    _embeddings(t, e, v, tied=True)
    conv_dim = d_inner + 2 * n_group * d_state
    for i in range(n):
        t.add(f"blk.{i}.attn_norm.weight", [e], Q.F32)
        t.add(f"blk.{i}.ssm_in.weight", [e, 2 * d_inner + 2 * n_group * d_state + heads], Q.Q4_K)
        t.add(f"blk.{i}.ssm_conv1d.weight", [d_conv, conv_dim], Q.F32)
        t.add(f"blk.{i}.ssm_conv1d.bias", [conv_dim], Q.F32)
        t.add(f"blk.{i}.ssm_dt.bias", [heads], Q.F32)
        t.add(f"blk.{i}.ssm_a", [1, heads], Q.F32)
        t.add(f"blk.{i}.ssm_d", [1, heads], Q.F32)
        t.add(f"blk.{i}.ssm_norm.weight", [d_inner // n_group, n_group], Q.F32)
        t.add(f"blk.{i}.ssm_out.weight", [d_inner, e], _q4km("ffn_down", i, n, d_inner))
    return write_header_only_gguf(path, a, md, t, v)


def header_only_150k_vocab(path, n_vocab: int = 150_000) -> Path:
    """A small llama with a 150k-entry vocabulary: the tokenizer dominates its header."""
    return write_vocab_heavy_gguf(path, n_vocab)


REAL_SHAPE_BUILDERS = {
    "llama_8b_q4_k_m": llama_8b_q4_k_m,
    "llama_70b_q4_k_m": llama_70b_q4_k_m,
    "qwen3moe_30b_a3b_q4_k_m": qwen3moe_30b_a3b_q4_k_m,
    "gemma3_12b_q4_k_m": gemma3_12b_q4_k_m,
    "gpt_oss_20b_mxfp4": gpt_oss_20b_mxfp4,
    "deepseek2_lite_q4_k_m": deepseek2_lite_q4_k_m,
    "lfm2_1_2b_q4_k_m": lfm2_1_2b_q4_k_m,
    "mamba2_2_7b": mamba2_2_7b,
}
