"""The memory model against llama.cpp b11434's own numbers (reference §5, and lv4 logs of the
real engine with the demo model)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from stoker.library.gguf_summary import LayerBytes
from stoker.planning import memory as mem
from tests.core.summaries import (
    GIB,
    MIB,
    deepseek2_mla,
    demo,
    gemma3_swa,
    hybrid,
    llama_8b,
    mamba2,
    qwen3moe_30b,
    summary,
)

KIB = 1024


@pytest.mark.parametrize("t, block_bytes", [("f32", 128), ("f16", 64), ("bf16", 64), ("q8_0", 34),
                                            ("q4_0", 18), ("q4_1", 20), ("iq4_nl", 18), ("q5_0", 22),
                                            ("q5_1", 24)])
def test_every_cache_type_the_engine_accepts_has_its_exact_bytes_per_32_values(t, block_bytes):
    assert mem.row_bytes(t, 32) == block_bytes
    assert mem.row_bytes(t, 1024) == block_bytes * 32


def test_unknown_cache_type_is_a_sentence():
    with pytest.raises(ValueError, match="unknown KV cache type 'q3_k'"):
        mem.row_bytes("q3_k", 32)


# --- the demo model, checked against the real engine's `llama_kv_cache: size` lines --------

@pytest.mark.parametrize("ctx, slots, unified, tk, tv, mib", [
    (4096, 2, False, "f16", "f16", 90.00),     # 2048 cells x 2 streams
    (4096, 1, False, "f16", "f16", 90.00),
    (16384, 1, False, "f16", "f16", 360.00),
    (4096, 4, True, "f16", "f16", 90.00),      # one unified stream
    (8192, 4, False, "f16", "f16", 180.00),
    (4096, 1, False, "q8_0", "q8_0", 47.8125),  # logged as 47.81 MiB
    (32768, 1, False, "f16", "f16", 720.00),
])
def test_demo_kv_matches_the_engine(ctx, slots, unified, tk, tv, mib):
    kv = mem.kv_bytes(demo(), ctx=ctx, slots=slots, kv_unified=unified, type_k=tk, type_v=tv)
    assert kv.total == int(mib * MIB)


def test_demo_kv_for_the_cli_example_is_94_371_840_bytes():
    kv = mem.kv_bytes(demo(), ctx=4096, slots=2, kv_unified=False, type_k="f16", type_v="f16")
    assert kv.total == 30 * (64 * 3 + 64 * 3) * 2 * 4096 == 94_371_840
    assert (kv.n_ctx_seq, kv.streams) == (2048, 2)


def test_context_and_per_slot_share_are_padded_to_256():
    kv = mem.kv_bytes(demo(), ctx=4000, slots=3, kv_unified=False)
    assert kv.n_ctx == 4096
    assert kv.n_ctx_seq == 1536  # pad256(4096 // 3 = 1365): more than asked
    assert kv.total == 30 * 384 * 2 * 1536 * 3


# --- reference §5.4 worked example (Llama-3.1-8B) ------------------------------------------

@pytest.mark.parametrize("t, per_token", [("f16", 128 * KIB), ("q8_0", 68 * KIB), ("q5_1", 48 * KIB),
                                          ("q4_0", 36 * KIB), ("iq4_nl", 36 * KIB)])
def test_llama_8b_bytes_per_token(t, per_token):
    kv = mem.kv_bytes(llama_8b(), ctx=256, slots=1, kv_unified=True, type_k=t, type_v=t)
    assert kv.total == per_token * 256


def test_llama_8b_mixed_types_add_up_the_two_rows():
    kv = mem.kv_bytes(llama_8b(), ctx=256, slots=1, kv_unified=True, type_k="q8_0", type_v="q4_0")
    assert kv.total == 52 * KIB * 256
    assert kv.k_bytes == 34 * KIB * 256 and kv.v_bytes == 18 * KIB * 256


def test_llama_8b_reference_launches():
    m = llama_8b()
    assert mem.kv_bytes(m, ctx=8192, slots=1, kv_unified=False).total == 1024 * MIB
    assert mem.kv_bytes(m, ctx=8192, slots=1, kv_unified=False, type_k="q8_0", type_v="q8_0").total == 544 * MIB
    assert mem.kv_bytes(m, ctx=131072, slots=4, kv_unified=True).total == 16384 * MIB
    kv = mem.kv_bytes(m, ctx=32768, slots=4, kv_unified=False)
    assert (kv.n_ctx_seq, kv.streams, kv.total) == (8192, 4, 4096 * MIB)


# --- sliding window, MLA, shared KV, recurrent, hybrid -----------------------------------------

def _reference_swa_model():
    n = 48
    return summary(arch="gemma3", n_layer=n, n_embd=4096, n_head=16, n_head_kv=8, head=256, n_swa=1024,
                   swa_layers=tuple(i % 6 < 5 for i in range(n)))


def test_swa_layers_are_sized_by_the_window_as_in_the_reference():
    m = _reference_swa_model()
    kv = mem.kv_bytes(m, ctx=32768, slots=1, kv_unified=False, ubatch=512)
    assert kv.cells_swa == 1536
    assert (kv.kv_layers, kv.swa_layers) == (48, 40)
    assert kv.total == 2528 * MIB
    full = mem.kv_bytes(m, ctx=32768, slots=1, kv_unified=False, swa_full=True)
    assert full.total == 12288 * MIB


def test_unified_swa_window_grows_with_slots():
    m = _reference_swa_model()
    kv = mem.kv_bytes(m, ctx=32768, slots=4, kv_unified=True, ubatch=512)
    assert kv.cells_swa == 4608
    assert kv.total == 2048 * MIB + 1440 * MIB


def test_swa_window_never_exceeds_the_stream():
    kv = mem.kv_bytes(_reference_swa_model(), ctx=1024, slots=1, kv_unified=False)
    assert kv.cells_swa == kv.n_ctx_seq == 1024


def test_mla_caches_k_only():
    m = deepseek2_mla()
    kv = mem.kv_bytes(m, ctx=4096, slots=1, kv_unified=False)
    assert kv.v_bytes == 0
    assert kv.total == 27 * 576 * 2 * 4096


def test_shared_kv_layers_cost_nothing():
    m = summary(n_layer=30)
    shared = replace(m, shared_kv_layers=10)
    full = mem.kv_bytes(m, ctx=4096, slots=1, kv_unified=False).total
    assert mem.kv_bytes(shared, ctx=4096, slots=1, kv_unified=False).total == full * 20 // 30


def test_mamba2_state_follows_the_engine_formula_and_not_the_context():
    m = mamba2()
    d_conv, d_inner, d_state, n_group = 4, 5120, 128, 1
    row = (d_conv - 1) * (d_inner + 2 * n_group * d_state) + d_state * d_inner
    for ctx in (4096, 65536):
        kv = mem.kv_bytes(m, ctx=ctx, slots=2, kv_unified=False)
        assert kv.kv_bytes == 0
        assert kv.state_bytes == 64 * 4 * 2 * row
    mtp = mem.kv_bytes(m, ctx=4096, slots=2, kv_unified=False, n_rs_seq=8)
    assert mtp.state_bytes == 64 * 4 * 2 * 9 * row


def test_hybrid_caches_attention_layers_and_keeps_state_for_the_rest():
    m = hybrid()
    kv = mem.kv_bytes(m, ctx=8192, slots=1, kv_unified=False)
    assert kv.kv_layers == 10
    assert kv.kv_bytes == 10 * (4 * 128 * 2) * 2 * 8192
    assert kv.state_bytes == 30 * 4 * mem.recurrent_state_row(m)


def test_without_flash_attention_v_is_padded_to_the_widest_layer():
    m = replace(summary(n_layer=2), n_head_kv=(3, 6))
    fa = mem.kv_bytes(m, ctx=256, slots=1, kv_unified=True, flash_attn=True)
    no_fa = mem.kv_bytes(m, ctx=256, slots=1, kv_unified=True, flash_attn=False)
    assert fa.v_bytes == (3 + 6) * 64 * 2 * 256
    assert no_fa.v_bytes == (6 + 6) * 64 * 2 * 256
    assert no_fa.k_bytes == fa.k_bytes


def test_kv_grows_with_context_and_shrinks_with_quantisation():
    m = gemma3_swa()
    sizes = [mem.kv_bytes(m, ctx=c, slots=1, kv_unified=False).total for c in (4096, 16384, 65536)]
    assert sizes == sorted(sizes) and sizes[0] < sizes[-1]
    assert (mem.kv_bytes(m, ctx=65536, slots=1, kv_unified=False, type_k="q4_0", type_v="q4_0").total
            < mem.kv_bytes(m, ctx=65536, slots=1, kv_unified=False, type_k="q8_0", type_v="q8_0").total
            < sizes[-1])


# --- placement ----------------------------------------------------------------------------

def test_ngl_counts_the_output_layer_like_the_engine():
    m = llama_8b()
    gpus = (("CUDA0", 1.0),)
    one = mem.place_layers(m, 1, gpus=gpus)
    assert one.output_device == "CUDA0" and set(one.layer_devices) == {"CPU"}
    allp = mem.place_layers(m, "all", gpus=gpus)
    assert set(allp.layer_devices) == {"CUDA0"}
    n = mem.place_layers(m, 32, gpus=gpus)
    assert n.layer_devices[0] == "CPU" and set(n.layer_devices[1:]) == {"CUDA0"}
    assert mem.place_layers(m, 10, gpus=()).output_device == "CPU"


def test_token_embd_stays_on_the_cpu_and_weights_add_up():
    m = llama_8b()
    w = mem.weights_by_device(m, mem.place_layers(m, "all", gpus=(("CUDA0", 1.0),)))
    assert w["CPU"] == m.embedding_bytes
    assert w["CPU"] + w["CUDA0"] == m.weights_bytes


def test_tied_output_is_duplicated_onto_the_gpu():
    m = demo()
    w = mem.weights_by_device(m, mem.place_layers(m, "all", gpus=(("CUDA0", 1.0),)))
    assert w["CUDA0"] >= m.embedding_bytes


def test_n_cpu_moe_keeps_the_first_blocks_experts_in_ram():
    m = qwen3moe_30b()
    p = mem.place_layers(m, "all", n_cpu_moe=10, gpus=(("CUDA0", 1.0),))
    w = mem.weights_by_device(m, p)
    experts = m.layer_bytes[0].ffn_experts
    assert w["CPU"] == m.embedding_bytes + 10 * experts
    assert w["CPU"] + w["CUDA0"] == m.weights_bytes
    allcpu = mem.weights_by_device(m, mem.place_layers(m, "all", cpu_moe=True, gpus=(("CUDA0", 1.0),)))
    assert allcpu["CPU"] == m.embedding_bytes + 48 * experts


def test_layers_split_across_two_gpus_by_proportion():
    m = llama_8b()
    p = mem.place_layers(m, "all", gpus=(("CUDA0", 1.0), ("CUDA1", 1.0)))
    # 33 offloadable "layers" (32 blocks + output), upper_bound over (0.5, 1.0): 17 | 16.
    assert p.layer_devices.count("CUDA0") == 17
    assert p.layer_devices.count("CUDA1") == 15 and p.output_device == "CUDA1"


def test_kv_sits_with_its_layer():
    m = llama_8b()
    kv = mem.kv_bytes(m, ctx=8192, slots=1, kv_unified=False)
    by = mem.kv_by_device(kv, mem.place_layers(m, 17, gpus=(("CUDA0", 1.0),)))
    assert by["CUDA0"] == kv.total // 2 and by["CPU"] == kv.total // 2


# --- compute buffers: calibrated on the real engine (CPU build b11434, demo model) ----------

@pytest.mark.parametrize("n_ctx_seq, ubatch, fa, logged_mib", [
    (4096, 512, True, 18.64), (2048, 512, True, 16.64), (16384, 512, True, 30.64),
    (32768, 512, True, 46.64), (4096, 128, True, 4.66), (4096, 2048, True, 74.57),
    (4096, 512, False, 87.51), (16384, 512, False, 327.51), (65536, 512, False, 1287.51),
    (4096, 256, False, 43.76),
])
def test_compute_estimate_is_within_a_tenth_of_a_mib_of_the_engine(n_ctx_seq, ubatch, fa, logged_mib):
    est = mem.compute_bytes(demo(), n_ctx_seq=n_ctx_seq, ubatch=ubatch, slots=1, flash_attn=fa)
    assert abs(est / MIB - logged_mib) < 0.1


def test_output_buffer_is_one_row_of_logits_per_slot():
    assert mem.output_buffer_bytes(demo(), slots=2) == 49152 * 4 * 2  # logged 0.38 MiB


def test_drafter_bytes_include_its_weights_and_cache():
    d = demo()
    b = mem.drafter_bytes(d, ctx_per_slot=4096, slots=1)
    assert b == d.weights_bytes + 90 * MIB


def test_layer_bytes_total_counts_every_class():
    lb = LayerBytes(attention=1, ffn_dense=2, ffn_experts=4, ffn_shared=8, recurrent=16, other=32)
    assert lb.total == 63
    assert GIB == 1024 * MIB


# ---- CPU_REPACK (ggml-cpu/repack.cpp b11434; Gemma 3 270M Q4_K_M measured: CPU_Mapped
# 235.16 MiB + CPU_REPACK 12.66 MiB = the 27 Q4_K attn_output/ffn_down tensors) ----------

def _with_repackable(model):
    # block 0: 8 MiB Q4_K matrices + 2 MiB Q6_K; block 1: 4 MiB Q4_K routed experts; output Q4_0
    return replace(model, repackable=((-1, "Q4_0", False, 3 * MIB), (0, "Q4_K", False, 8 * MIB),
                                      (0, "Q6_K", False, 2 * MIB), (1, "Q4_K", True, 4 * MIB)))


def test_x86_repacks_the_avx2_types_and_arm_the_dotprod_types():
    assert mem.repacked_types("x86_64") == {"Q4_0", "Q4_K", "IQ4_NL", "MXFP4"}
    assert "Q2_K" in mem.repacked_types("x86_64", frozenset({"avx2", "avx512f"}))
    assert mem.repacked_types("x86_64", frozenset({"sse3"})) == frozenset()
    assert {"Q8_0", "Q6_K", "Q4_K"} <= mem.repacked_types("arm64")
    assert mem.repacked_types("riscv64") == frozenset()


def test_repack_copy_is_added_to_the_cpu_beside_the_mapped_file():
    m = _with_repackable(demo())
    cpu = mem.place_layers(m, None)
    plain = mem.weights_by_device(m, cpu)["CPU"]
    x86 = mem.repacked_types("x86_64")
    assert mem.weights_by_device(m, cpu, repack_types=x86)["CPU"] == plain + 15 * MIB
    assert mem.weights_by_device(m, cpu, repack_types=x86, count_mapped_original=False)["CPU"] == plain
    arm = mem.repacked_types("arm64")
    assert mem.repack_bytes(m, cpu, arm) == 17 * MIB


def test_only_tensors_left_on_the_cpu_are_repacked():
    m = _with_repackable(demo())
    gpu = (("CUDA0", 1.0),)
    all_gpu = mem.place_layers(m, "all", gpus=gpu)
    x86 = mem.repacked_types("x86_64")
    assert mem.repack_bytes(m, all_gpu, x86) == 0
    experts_home = mem.place_layers(m, "all", n_cpu_moe=2, gpus=gpu)
    assert mem.repack_bytes(m, experts_home, x86) == 4 * MIB  # block 1's experts only


def test_gemma_query_width_counts_in_the_compute_estimate():
    g = gemma3_swa()
    wide = replace(g, head_k=2 * (g.n_embd // max(g.n_head)))
    args = dict(n_ctx_seq=4096, ubatch=512, slots=1, flash_attn=True, n_ctx=4096)
    assert mem.compute_bytes(wide, **args) > mem.compute_bytes(g, **args)
    assert mem.compute_bytes(demo(), **args) == mem.compute_bytes(replace(demo(), head_k=64), **args)


def test_a_tied_output_gets_its_own_repacked_copy_in_both_views():
    # Gemma 3 12B / LFM2 / Mamba2 header-only dry runs: the engine's projection holds a Q4_K
    # copy of token_embd for the tied output beside token_embd itself.
    m = replace(demo(), repackable=((-2, "Q4_K", False, 5 * MIB), (0, "Q4_K", False, 8 * MIB)))
    cpu = mem.place_layers(m, None)
    x86 = mem.repacked_types("x86_64")
    plain = mem.weights_by_device(m, cpu)["CPU"]
    assert mem.weights_by_device(m, cpu, repack_types=x86)["CPU"] == plain + 13 * MIB
    assert mem.weights_by_device(m, cpu, repack_types=x86, count_mapped_original=False)["CPU"] == plain + 5 * MIB


@pytest.mark.parametrize("ctx, logged_mib", [(4096, 26.28), (8192, 34.28), (16384, 50.28)])
def test_swa_full_widens_the_sliding_window_mask_as_the_engine_does(ctx, logged_mib):
    # Gemma 3 270M Q4_K_M, CPU build b11434, -c ctx --swa-full -ctk/-ctv f16, 1 slot: the engine
    # logged these CPU compute buffers; without --swa-full 23.28 / 27.28 / 35.28 MiB. The SWA
    # mask is one stream of the SWA cache wide: (ctx - 1024) cells x 512 tokens x 2 bytes more.
    g = replace(gemma3_swa(), n_swa=512)  # Gemma 3 270M's window: 512 + ubatch -> 1024 cells
    full = mem.kv_bytes(g, ctx=ctx, slots=1, kv_unified=False, swa_full=True)
    windowed = mem.kv_bytes(g, ctx=ctx, slots=1, kv_unified=False)
    args = dict(ubatch=512, slots=1, flash_attn=True, n_ctx=ctx)
    grown = (mem.compute_bytes(g, n_ctx_seq=full.n_ctx_seq, n_kv_swa=full.cells_swa, **args)
             - mem.compute_bytes(g, n_ctx_seq=windowed.n_ctx_seq, n_kv_swa=windowed.cells_swa, **args))
    assert (full.cells_swa, windowed.cells_swa) == (ctx, 1024)
    assert abs(grown / MIB - (logged_mib - {4096: 23.28, 8192: 27.28, 16384: 35.28}[ctx])) < 0.005
