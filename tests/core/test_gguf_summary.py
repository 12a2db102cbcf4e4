"""ModelSummary from headers: demo model facts, per-layer forms, SWA patterns, real shapes.

Pure tests build `GGUFHeader` values directly; the real-shape fixtures are written once
per session as header-only files and read with the shell reader.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stoker.library.gguf_summary import (
    GGUFHeader,
    SkippedArray,
    TensorInfo,
    classify_block_tensor,
    summarise,
    summary_from_dict,
    summary_to_dict,
    swa_layers_from,
)


def header(arch="llama", tensors=(), **md) -> GGUFHeader:
    meta = {"general.architecture": arch}
    meta.update({k.replace("__", "."): v for k, v in md.items()})
    return GGUFHeader("/m.gguf", 3, meta, tuple(tensors), 1000)


def t(name, shape, nbytes=100, type_name="Q4_K"):
    return TensorInfo(name, 12, type_name, tuple(shape), 0, nbytes)


def test_demo_model_facts(demo_model):
    from stoker.library.gguf_io import load_summary

    s = load_summary(demo_model)
    assert s.architecture == "llama"
    assert s.n_layer == s.n_layer_all == 30
    assert s.n_head == (9,) * 30 and s.n_head_kv == (3,) * 30
    assert s.n_ctx_train == 8192 and s.file_type == "Q4_1" and s.n_vocab == 49152
    assert s.head_k == s.head_v == 576 // 9
    assert not any(s.swa_layers) and not any(s.recurrent_layers) and not s.is_moe
    assert s.weights_bytes <= s.file_bytes


def test_head_counts_scalar_and_per_layer_and_default():
    s = summarise(header(llama__block_count=4, llama__embedding_length=512,
                         llama__attention__head_count=8))
    assert s.n_head_kv == (8,) * 4 and s.head_k == 64  # KV defaults to heads, size to embd/heads
    s = summarise(header(llama__block_count=4, llama__attention__head_count=(8, 8, 4, 4),
                         llama__attention__head_count_kv=(2, 0, 1, 1)))
    assert s.n_head == (8, 8, 4, 4) and s.n_head_kv == (2, 0, 1, 1)


def test_nextn_layers_are_excluded_from_the_trunk():
    s = summarise(header("glm4moe", glm4moe__block_count=47, glm4moe__nextn_predict_layers=1,
                         glm4moe__attention__head_count=96))
    assert (s.n_layer_all, s.n_layer, s.nextn_layers, len(s.n_head)) == (47, 46, 1, 46)


@pytest.mark.parametrize("pattern,expect", [
    ((True, True, False, True), (True, True, False, True)),  # bool array
    (3, (True, True, False, True)),  # scalar P: i % P < P-1
    (0, (True, True, True, True)),  # P = 0: all layers
    (None, (True, False, True, False)),  # gpt-oss default: 2, even layers sliding
])
def test_swa_pattern_forms(pattern, expect):
    assert swa_layers_from(pattern, 4, 128, "gpt-oss") == expect


def test_swa_defaults_need_a_window_and_a_known_arch():
    assert swa_layers_from(None, 12, 1024, "gemma3") == (True,) * 5 + (False,) + (True,) * 5 + (False,)
    assert swa_layers_from(None, 4, None, "gemma3") == (False,) * 4
    assert swa_layers_from(None, 4, 512, "somethingnew") == (False,) * 4
    assert swa_layers_from(None, 8, 512, "cohere2moe") == tuple(i % 4 != 0 for i in range(8))


@given(st.integers(1, 200), st.integers(0, 16), st.sampled_from(["gemma3", "gpt-oss", "llama"]))
def test_swa_layers_always_one_flag_per_layer(n, p, arch):
    assert len(swa_layers_from(p, n, 1024, arch)) == n


@pytest.mark.parametrize("name,cls", [
    ("attn_q.weight", "attention"), ("attn_kv_a_mqa.weight", "attention"),
    ("attn_sinks.weight", "attention"), ("attn_norm.weight", "other"),
    ("attn_q_norm.weight", "other"), ("post_ffw_norm.weight", "other"),
    ("ffn_up.weight", "ffn_dense"), ("ffn_down_exps.weight", "ffn_experts"),
    ("ffn_gate_up_exps.weight", "ffn_experts"), ("ffn_gate_exps.bias", "ffn_experts"),
    ("ffn_up_shexp.weight", "ffn_shared"), ("ffn_gate_inp.weight", "ffn_shared"),
    ("exp_probs_b.bias", "ffn_shared"), ("ssm_in.weight", "recurrent"), ("ssm_a", "recurrent"),
    ("shortconv.in_proj.weight", "recurrent"), ("time_mix_key.weight", "recurrent"),
    ("channel_mix_value.weight", "ffn_dense"), ("layer_output_scale.weight", "other"),
])
def test_block_tensor_classes(name, cls):
    assert classify_block_tensor(name) == cls


def test_bytes_by_class_and_outside_blocks():
    s = summarise(header(llama__block_count=2, tensors=[
        t("token_embd.weight", (8, 100), 1000), t("output.weight", (8, 100), 900),
        t("output_norm.weight", (8,), 32, "F32"), t("rope_freqs.weight", (4,), 16, "F32"),
        t("blk.0.attn_q.weight", (8, 8), 10), t("blk.0.ffn_up.weight", (8, 8), 20),
        t("blk.1.ffn_down_exps.weight", (8, 8, 4), 40), t("blk.1.ffn_gate_inp.weight", (8, 4), 5),
    ]))
    assert (s.embedding_bytes, s.output_bytes, s.other_bytes) == (1000, 932, 16)
    assert (s.layer_bytes[0].attention, s.layer_bytes[0].ffn_dense) == (10, 20)
    assert (s.layer_bytes[1].ffn_experts, s.layer_bytes[1].ffn_shared) == (40, 5)
    assert s.weights_bytes == 1000 + 932 + 16 + 75
    assert s.parameter_count == 800 + 800 + 8 + 4 + 64 + 64 + 256 + 32
    assert s.file_type == "Q4_K"  # dominant non-F32 type when general.file_type is absent


def test_vocab_from_skipped_tokens_array_or_vocab_size():
    assert summarise(header(**{"tokenizer__ggml__tokens": SkippedArray(8, 1234)})).n_vocab == 1234
    assert summarise(header(llama__vocab_size=77)).n_vocab == 77
    assert summarise(header()).n_vocab is None


def test_unknowns_are_none_not_zero():
    s = summarise(header())
    assert s.n_layer is None and s.n_ctx_train is None and s.n_embd is None
    assert s.head_k is None and s.n_expert is None and s.mla is None and s.ssm is None


def test_summary_dict_round_trip(demo_model):
    from stoker.library.gguf_io import load_summary

    s = load_summary(demo_model)
    assert summary_from_dict(summary_to_dict(s)) == s


# ---- real-shape header-only files -------------------------------------------------------

@pytest.fixture(scope="session")
def real(tmp_path_factory):
    from stoker.library.gguf_io import read_gguf_header
    from tests.helpers.gguf_fixtures import REAL_SHAPE_BUILDERS

    d = tmp_path_factory.mktemp("real-shapes")
    return {name: summarise(read_gguf_header(build(d / f"{name}.gguf")))
            for name, build in REAL_SHAPE_BUILDERS.items()}


def test_llama_8b_and_70b(real):
    s = real["llama_8b_q4_k_m"]
    assert (s.n_layer, s.n_embd, set(s.n_head), set(s.n_head_kv), s.head_k) == (32, 4096, {32}, {8}, 128)
    assert (s.n_ctx_train, s.n_vocab, s.file_type) == (131072, 128256, "Q4_K_M")
    assert 4.8e9 < s.file_bytes < 5.0e9 and 7.9e9 < s.parameter_count < 8.1e9
    b = real["llama_70b_q4_k_m"]
    assert (b.n_layer, b.n_embd, set(b.n_head_kv)) == (80, 8192, {8})
    assert 42e9 < b.file_bytes < 43e9 and 70e9 < b.parameter_count < 71e9


def test_qwen3moe_30b_a3b(real):
    s = real["qwen3moe_30b_a3b_q4_k_m"]
    assert (s.n_layer, s.n_expert, s.n_expert_used, s.n_ff_exp) == (48, 128, 8, 768)
    assert set(s.n_head_kv) == {4} and s.head_k == 128 and s.n_vocab == 151936
    experts = sum(lb.ffn_experts for lb in s.layer_bytes)
    assert experts > 0.85 * s.weights_bytes  # what --n-cpu-moe can move
    assert all(lb.ffn_dense == 0 for lb in s.layer_bytes)
    assert 18e9 < s.file_bytes < 19e9


def test_gemma3_12b_swa(real):
    s = real["gemma3_12b_q4_k_m"]
    assert (s.n_layer, s.n_swa, sum(s.swa_layers)) == (48, 1024, 40)
    assert s.swa_layers[:6] == (True,) * 5 + (False,)
    assert s.head_k == 256 and s.n_vocab == 262144 and s.output_bytes < 1e6  # tied output


def test_gpt_oss_20b(real):
    s = real["gpt_oss_20b_mxfp4"]
    assert (s.n_layer, s.n_swa, s.n_expert, s.n_expert_used) == (24, 128, 32, 4)
    assert s.swa_layers == tuple(i % 2 == 0 for i in range(24))
    assert s.file_type == "MXFP4_MOE" and 11.5e9 < s.file_bytes < 12.5e9


def test_deepseek2_lite_mla(real):
    s = real["deepseek2_lite_q4_k_m"]
    assert s.mla is not None and s.mla.kv_lora_rank == 512
    assert (s.mla.key_length_mla, s.mla.value_length_mla) == (192, 128)
    assert set(s.n_head_kv) == {1} and (s.head_k, s.head_v) == (576, 512)
    assert s.layer_bytes[0].ffn_dense > 0 and s.layer_bytes[0].ffn_experts == 0
    assert all(lb.ffn_experts > 0 and lb.ffn_shared > 0 for lb in s.layer_bytes[1:])


def test_lfm2_hybrid(real):
    from tests.helpers.gguf_fixtures import LFM2_ATTENTION_LAYERS

    s = real["lfm2_1_2b_q4_k_m"]
    assert s.recurrent_layers == tuple(i not in LFM2_ATTENTION_LAYERS for i in range(16))
    assert s.n_head_kv == tuple(8 if i in LFM2_ATTENTION_LAYERS else 0 for i in range(16))
    assert s.shortconv_l_cache == 3
    assert all((lb.recurrent > 0) == r for lb, r in zip(s.layer_bytes, s.recurrent_layers, strict=True))


def test_mamba2(real):
    s = real["mamba2_2_7b"]
    assert s.recurrent_layers == (True,) * 64 and set(s.n_head_kv) == {0}
    assert s.ssm is not None and (s.ssm.d_inner, s.ssm.d_state, s.ssm.d_conv) == (5120, 128, 4)
    assert (s.ssm.n_group, s.ssm.dt_rank) == (1, 80)
    assert all(lb.attention == 0 and lb.recurrent > 0 for lb in s.layer_bytes)


_VALUES = st.one_of(
    st.integers(-5, 300), st.floats(allow_nan=True), st.booleans(), st.text(max_size=5),
    st.lists(st.one_of(st.integers(-2, 64), st.booleans(), st.floats()), max_size=40).map(tuple),
    st.builds(SkippedArray, st.integers(0, 12), st.integers(0, 10**6)),
)
_KEYS = ["block_count", "context_length", "embedding_length", "attention.head_count",
         "attention.head_count_kv", "attention.key_length", "attention.sliding_window",
         "attention.sliding_window_pattern", "nextn_predict_layers", "expert_count",
         "full_attention_interval", "ssm.inner_size", "attention.kv_lora_rank",
         "feed_forward_length", "shortconv.l_cache"]


@given(st.sampled_from(["llama", "gemma3", "gpt-oss", "lfm2", "qwen3next", "mamba2", "clip"]),
       st.dictionaries(st.sampled_from(_KEYS), _VALUES, max_size=len(_KEYS)))
def test_any_metadata_values_give_a_summary(arch, values):
    """Whatever types the header holds under the known keys, summarise answers (no exception)."""
    s = summarise(header(arch, **{f"{arch}__{k.replace('.', '__')}": v for k, v in values.items()}))
    assert len(s.n_head) == len(s.swa_layers) == len(s.recurrent_layers) == (s.n_layer or 0) \
        or not s.n_head
    assert summary_from_dict(summary_to_dict(s)) == s
