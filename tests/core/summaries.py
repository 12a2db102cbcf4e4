"""ModelSummary values built by hand for core tests (no files: core tests stay pure).

Shapes follow real models' GGUF headers; byte counts are plausible for the quant named.
"""

from __future__ import annotations

from dataclasses import replace

from stoker.library.gguf_summary import LayerBytes, MLAShape, ModelSummary, SSMShape

MIB = 1024 * 1024
GIB = 1024 * MIB


def summary(*, arch="llama", n_layer=30, n_embd=576, n_head=9, n_head_kv=3, head=64,
            n_ctx_train=8192, n_vocab=49152, layer_bytes=None, embedding_bytes=0,
            output_bytes=0, n_expert=None, n_expert_used=None, path="/models/m.gguf",
            **extra) -> ModelSummary:
    lb = layer_bytes if layer_bytes is not None else tuple(LayerBytes(attention=MIB) for _ in range(n_layer))
    base = ModelSummary(
        path=path, file_bytes=sum(x.total for x in lb) + embedding_bytes + output_bytes,
        architecture=arch, name=arch, is_vision_projector=False, parameter_count=0,
        file_type="Q4_K_M", n_ctx_train=n_ctx_train, n_layer_all=n_layer, n_layer=n_layer,
        n_embd=n_embd, n_head=(n_head,) * n_layer, n_head_kv=(n_head_kv,) * n_layer,
        head_k=head, head_v=head, head_k_swa=None, head_v_swa=None, n_swa=None,
        swa_layers=(False,) * n_layer, shared_kv_layers=0, n_expert=n_expert,
        n_expert_used=n_expert_used, nextn_layers=0, recurrent_layers=(False,) * n_layer,
        ssm=None, rwkv_head_size=None, token_shift_count=None, shortconv_l_cache=None,
        mla=None, n_vocab=n_vocab, layer_bytes=tuple(lb), embedding_bytes=embedding_bytes,
        output_bytes=output_bytes, other_bytes=0)
    return replace(base, **extra) if extra else base


def demo() -> ModelSummary:
    """SmolLM2-135M-Instruct Q4_1: 30 layers, 9 heads, 3 KV heads, n_embd 576, tied output."""
    return summary(path="/models/SmolLM2-135M-Instruct.Q4_1.gguf",
                   layer_bytes=tuple(LayerBytes(attention=650_000, ffn_dense=1_990_000, other=4608)
                                     for _ in range(30)),
                   embedding_bytes=49152 * 576 * 20 // 32, output_bytes=2304, n_ff=1536)


def llama_8b() -> ModelSummary:
    """Llama-3.1-8B Q4_K_M: 32 layers, 32 heads, 8 KV heads, head 128."""
    return summary(n_layer=32, n_embd=4096, n_head=32, n_head_kv=8, head=128,
                   n_ctx_train=131072, n_vocab=128256,
                   layer_bytes=tuple(LayerBytes(attention=30 * MIB, ffn_dense=112 * MIB, other=32768)
                                     for _ in range(32)),
                   embedding_bytes=281 * MIB, output_bytes=411 * MIB, n_ff=14336, path="/models/llama-8b.gguf")


def llama_70b() -> ModelSummary:
    """Llama-3.3-70B Q4_K_M: 80 layers, 64 heads, 8 KV heads; about 39.6 GiB on disk."""
    return summary(n_layer=80, n_embd=8192, n_head=64, n_head_kv=8, head=128,
                   n_ctx_train=131072, n_vocab=128256,
                   layer_bytes=tuple(LayerBytes(attention=100 * MIB, ffn_dense=390 * MIB, other=65536)
                                     for _ in range(80)),
                   embedding_bytes=564 * MIB, output_bytes=822 * MIB, path="/models/llama-70b.gguf")


def qwen3moe_30b() -> ModelSummary:
    """Qwen3-30B-A3B Q4_K_M: 48 layers, 128 experts (8 used), 32 heads, 4 KV heads, head 128."""
    return summary(arch="qwen3moe", n_layer=48, n_embd=2048, n_head=32, n_head_kv=4, head=128,
                   n_ctx_train=40960, n_vocab=151936, n_expert=128, n_expert_used=8, n_ff_exp=768,
                   layer_bytes=tuple(LayerBytes(attention=20 * MIB, ffn_experts=355 * MIB,
                                                ffn_shared=MIB // 2, other=16384)
                                     for _ in range(48)),
                   embedding_bytes=170 * MIB, output_bytes=249 * MIB, path="/models/qwen3-30b-a3b.gguf")


def gemma3_swa() -> ModelSummary:
    """Gemma-3-27B-like: 62 layers, pattern 6 (5 SWA : 1 global), window 1024, 16 KV heads, head 128."""
    n = 62
    return summary(arch="gemma3", n_layer=n, n_embd=5376, n_head=32, n_head_kv=16, head=128,
                   n_ctx_train=131072, n_vocab=262144, n_swa=1024,
                   swa_layers=tuple(i % 6 < 5 for i in range(n)),
                   layer_bytes=tuple(LayerBytes(attention=60 * MIB, ffn_dense=200 * MIB) for _ in range(n)),
                   embedding_bytes=1100 * MIB, output_bytes=0, path="/models/gemma3.gguf")


def deepseek2_mla() -> ModelSummary:
    """DeepSeek-V2-Lite-like MLA: 27 layers, K only, 576 wide (kv_lora_rank 512 + rope 64)."""
    return summary(arch="deepseek2", n_layer=27, n_embd=2048, n_head=16, n_head_kv=1, head=576,
                   n_ctx_train=163840, n_vocab=102400, n_expert=64, n_expert_used=6,
                   mla=MLAShape(kv_lora_rank=512, key_length_mla=192, value_length_mla=128),
                   head_v=512,
                   layer_bytes=tuple(LayerBytes(attention=15 * MIB, ffn_experts=300 * MIB) for _ in range(27)),
                   path="/models/dsv2-lite.gguf")


def mamba2() -> ModelSummary:
    """Mamba-2 2.7B-like: 64 recurrent layers, no attention."""
    n = 64
    return summary(arch="mamba2", n_layer=n, n_embd=2560, n_head=0, n_head_kv=0, head=0,
                   n_ctx_train=1048576, n_vocab=50288, recurrent_layers=(True,) * n,
                   ssm=SSMShape(d_conv=4, d_inner=5120, d_state=128, n_group=1, dt_rank=80),
                   layer_bytes=tuple(LayerBytes(recurrent=25 * MIB) for _ in range(n)),
                   path="/models/mamba2.gguf")


def hybrid() -> ModelSummary:
    """Granite-4-H-like hybrid: every 4th of 40 layers is attention, the rest Mamba-2."""
    n = 40
    return summary(arch="granitehybrid", n_layer=n, n_embd=1536, n_head=12, n_head_kv=4, head=128,
                   n_ctx_train=131072, n_vocab=100352,
                   recurrent_layers=tuple(i % 4 != 3 for i in range(n)),
                   ssm=SSMShape(d_conv=4, d_inner=3072, d_state=128, n_group=1, dt_rank=48),
                   layer_bytes=tuple(LayerBytes(recurrent=10 * MIB) for _ in range(n)),
                   path="/models/hybrid.gguf")
