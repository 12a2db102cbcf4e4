"""The planner's choices and refusals, plus Hypothesis properties over machines and overrides."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stoker.base.overrides import ModelOverrides
from stoker.planning.machine import Device, Machine, machine_from_json
from stoker.planning.plan import LaunchPlan, PlanRefusal
from stoker.planning.planner import PlanPolicy, plan_launch, takes_cheap_kv
from tests.core.summaries import (
    GIB,
    MIB,
    deepseek2_mla,
    demo,
    gemma3_swa,
    hybrid,
    llama_8b,
    llama_70b,
    mamba2,
    qwen3moe_30b,
)

MACHINES = Path(__file__).resolve().parents[1] / "data" / "machines"


def machine(name: str) -> Machine:
    path = MACHINES / name
    return machine_from_json(path.read_text(), str(path))


def cpu(ram_gib: float, avail_gib: float | None = None) -> Machine:
    return Machine(os="linux", arch="x86_64", ram_total_bytes=int(ram_gib * GIB),
                   ram_available_bytes=int((avail_gib if avail_gib is not None else ram_gib) * GIB),
                   physical_cores=8, logical_cores=8)


def gpu(vram_gib: float, ram_gib: float = 32, n: int = 1) -> Machine:
    devs = tuple(Device(f"CUDA{i}", "NVIDIA", "cuda", int(vram_gib * GIB), int(vram_gib * GIB), "discrete")
                 for i in range(n))
    return replace(cpu(ram_gib), devices=devs)


def within_budget(p: LaunchPlan) -> bool:
    return all(d.total_bytes <= d.budget_bytes for d in p.devices)


# --- the demo and the CLI contract -----------------------------------------------------------

def test_demo_with_explicit_settings_is_planned_as_asked():
    p = plan_launch(demo(), machine("cpu-only-ram24g.json"),
                    ModelOverrides(ctx=4096, slots=2, kv_type_k="f16", kv_type_v="f16"))
    assert isinstance(p, LaunchPlan)
    assert (p.ctx, p.slots, p.kv_unified, p.kv_type_k, p.kv_type_v) == (4096, 2, False, "f16", "f16")
    assert p.gpu_layers is None
    (cpu_mem,) = p.devices
    assert cpu_mem.name == "CPU" and cpu_mem.kv_bytes == 94_371_840
    assert within_budget(p)


def test_default_context_is_clamped_to_the_trained_context():
    p = plan_launch(demo(), cpu(24, 20))
    assert p.ctx_per_slot == 8192
    assert any("trained context (8,192)" in d.why for d in p.decisions)


def test_slot_count_under_an_explicit_context_says_why_it_is_below_the_tier():
    p = plan_launch(demo(), cpu(64, 60), ModelOverrides(ctx=1024))
    (slot,) = [d for d in p.decisions if d.what == "1 slot"]
    assert slot.why == "1,024 tokens are less than one 4,096-token slot, so one slot gets them all"
    p = plan_launch(demo(), cpu(64, 60), ModelOverrides(ctx=8192))
    (slot,) = [d for d in p.decisions if d.what == "2 slots"]
    assert slot.why == "8,192 tokens make 2 slots of at least 4,096 tokens"


def test_os_reserve_is_two_gib_or_a_tenth_of_ram():
    policy = PlanPolicy()
    assert policy.os_reserve(8 * GIB) == 2 * GIB
    assert policy.os_reserve(128 * GIB) == int(12.8 * GIB)
    p = plan_launch(demo(), cpu(24, 20))
    assert p.devices[0].budget_bytes == 20 * GIB - int(2.4 * GIB)


def test_slots_follow_the_memory_tier():
    policy = PlanPolicy()
    assert [policy.tier_slots(g * GIB) for g in (8, 16, 32, 64)] == [1, 2, 3, 4]


# --- the ladder ------------------------------------------------------------------------------

def test_slots_are_given_up_before_the_window():
    # 8B on CPU with ~26 GiB: 3 slots x 64K f16 (24 GiB KV) do not fit, 1 x 64K does.
    p = plan_launch(llama_8b(), cpu(32, 32), ModelOverrides(kv_type_k="f16", kv_type_v="f16"))
    assert p.ctx_per_slot == 65536
    assert p.slots < PlanPolicy().tier_slots(p.devices[0].budget_bytes)
    assert any("slots are given up before the window" in d.why for d in p.decisions)


def test_f16_is_traded_for_q8_0_only_when_it_keeps_a_second_slot():
    # Budget for one f16 64K slot (8 GiB KV + weights) but not two; q8_0 fits two.
    m = llama_8b()
    p = plan_launch(m, cpu(20, 20))
    assert (p.slots, p.kv_type_k, p.kv_type_v, p.ctx_per_slot) == (2, "q8_0", "q8_0", 65536)
    assert any("q8_0 keeps 2 slots" in d.why for d in p.decisions)
    # Never against explicit settings.
    explicit_kv = plan_launch(m, cpu(20, 20), ModelOverrides(kv_type_k="f16", kv_type_v="f16"))
    assert (explicit_kv.slots, explicit_kv.kv_type_k) == (1, "f16")
    explicit_slots = plan_launch(m, cpu(20, 20), ModelOverrides(slots=1))
    assert explicit_slots.kv_type_k == "f16"


def test_window_shrinks_only_at_one_slot_and_says_so():
    p = plan_launch(llama_8b(), cpu(14, 14))
    assert p.slots == 1 and 4096 <= p.ctx < 65536 and p.ctx % 256 == 0
    assert any(d.what.startswith(f"context {p.ctx:,}") and "largest window" in d.why for d in p.decisions)
    assert within_budget(p)


@pytest.mark.parametrize("avail_gib", [9.3, 10.0, 14.0])
def test_shrunk_window_is_the_largest_multiple_of_256_that_fits(avail_gib):
    # The engine pads -c to 256 cells, so the planner's step is 256: one step more must not fit.
    p = plan_launch(llama_8b(), cpu(avail_gib, avail_gib))
    assert isinstance(p, LaunchPlan) and p.ctx % 256 == 0 and p.ctx < 65536
    one_more = plan_launch(llama_8b(), cpu(avail_gib, avail_gib), ModelOverrides(ctx=p.ctx + 256, slots=1))
    assert isinstance(one_more, PlanRefusal)


def test_explicit_context_is_never_shrunk_and_refusal_names_it():
    r = plan_launch(llama_8b(), cpu(10, 10), ModelOverrides(ctx=131072))
    assert isinstance(r, PlanRefusal)
    assert "context 131,072 as set" in r.reason
    assert any("context would fit" in s for s in r.suggestions)


# --- GPUs ----------------------------------------------------------------------------------

def test_moe_on_a_12_gib_gpu_offloads_experts_and_says_so():
    p = plan_launch(qwen3moe_30b(), machine("rtx4070-12g-ram32g.json"))
    assert isinstance(p, LaunchPlan)
    assert p.gpu_layers == "all" and p.n_cpu_moe and 0 < p.n_cpu_moe < 48 and not p.cpu_moe
    assert any(d.what.startswith("expert offload: --n-cpu-moe") for d in p.decisions)
    assert within_budget(p)
    # One block fewer in RAM would not fit on the card: the split is as tight as it can be.
    tighter = plan_launch(qwen3moe_30b(), machine("rtx4070-12g-ram32g.json"),
                          ModelOverrides(ctx=p.ctx, slots=p.slots, n_cpu_moe=p.n_cpu_moe - 1, gpu_layers="all"))
    assert isinstance(tighter, PlanRefusal)


def test_dense_model_gets_the_largest_gpu_layer_count_that_fits():
    m = llama_8b()
    p = plan_launch(m, gpu(6), ModelOverrides(ctx=8192, slots=1))
    assert isinstance(p.gpu_layers, int) and 0 < p.gpu_layers < 33
    assert within_budget(p)
    more = plan_launch(m, gpu(6), ModelOverrides(ctx=8192, slots=1, gpu_layers=p.gpu_layers + 1))
    assert isinstance(more, PlanRefusal)
    assert any("most that do" in d.why for d in p.decisions)


def test_dense_model_that_fits_goes_wholly_on_the_gpu():
    p = plan_launch(llama_8b(), gpu(24), ModelOverrides(ctx=16384, slots=1))
    assert p.gpu_layers == "all" and p.n_cpu_moe is None
    cuda = [d for d in p.devices if d.name == "CUDA0"][0]
    assert cuda.kv_bytes == 2 * GIB


def test_two_gpus_share_the_layers():
    p = plan_launch(llama_70b(), machine("two-rtx3090-ram64g.json"), ModelOverrides(ctx=8192, slots=1))
    assert isinstance(p, LaunchPlan) and p.gpu_layers == "all"
    gpus = [d for d in p.devices if d.name.startswith("CUDA")]
    assert len(gpus) == 2 and all(d.weights_bytes > 15 * GIB for d in gpus)
    assert within_budget(p)


def test_70b_on_a_16_gib_unified_laptop_refuses_and_says_what_would_fit():
    r = plan_launch(llama_70b(), machine("macbook-m2-16g-unified.json"))
    assert isinstance(r, PlanRefusal)
    assert r.reason.startswith("needs ") and "is free" in r.reason
    assert r.needed_bytes > r.available_bytes
    assert any("smaller quantisation" in s for s in r.suggestions)


def test_refusal_suggestions_are_real_replans():
    # 8B with an explicit 64K f16 context does not fit in 12 GiB of RAM; q4_0 KV (2.25 GiB) does.
    r = plan_launch(llama_8b(), cpu(14, 14), ModelOverrides(ctx=65536, kv_type_k="f16", kv_type_v="f16"))
    assert isinstance(r, PlanRefusal)
    assert any(s.startswith("a q4_0 KV cache would fit") for s in r.suggestions)
    assert "a q4_0 KV cache" in r.reason
    ok = plan_launch(llama_8b(), cpu(14, 14), ModelOverrides(ctx=65536, kv_type_k="q4_0", kv_type_v="q4_0"))
    assert isinstance(ok, LaunchPlan)


@pytest.mark.parametrize("model", [gemma3_swa, deepseek2_mla, mamba2, hybrid, qwen3moe_30b],
                         ids=lambda f: f.__name__)
def test_every_shape_plans_within_budget_on_a_big_machine(model):
    p = plan_launch(model(), gpu(48, 128))
    assert isinstance(p, LaunchPlan) and within_budget(p)


def test_swa_full_is_honoured_and_costs_more():
    m = gemma3_swa()
    a = plan_launch(m, cpu(128), ModelOverrides(ctx=32768, slots=1))
    b = plan_launch(m, cpu(128), ModelOverrides(ctx=32768, slots=1, swa_full=True))
    assert b.swa_full and not a.swa_full
    assert b.devices[0].kv_bytes > 3 * a.devices[0].kv_bytes


def test_swa_full_on_a_model_without_swa_is_left_off_with_a_reason():
    p = plan_launch(demo(), cpu(24), ModelOverrides(swa_full=True))
    assert not p.swa_full
    assert any("no sliding-window layers" in d.why for d in p.decisions)


def test_mla_refuses_different_k_and_v_types():
    r = plan_launch(deepseek2_mla(), cpu(64), ModelOverrides(kv_type_k="q8_0", kv_type_v="f16"))
    assert isinstance(r, PlanRefusal) and "K and V cache types must be equal" in r.reason


def test_vision_projector_is_not_a_model():
    r = plan_launch(replace(demo(), is_vision_projector=True), cpu(24))
    assert isinstance(r, PlanRefusal) and "vision projector" in r.reason


# --- drafters -------------------------------------------------------------------------------

def test_a_catalog_drafter_that_costs_the_window_is_left_out():
    draft = replace(llama_8b(), path="/models/draft.gguf")
    p = plan_launch(llama_8b(), cpu(24, 24), ModelOverrides(slots=1), draft=draft)
    assert p.drafter.status == "left-out"
    assert p.drafter.reason.startswith("leaving the speculative drafter out; beside it")
    assert p.ctx_per_slot == 65536


def test_a_catalog_drafter_that_pushes_the_model_off_the_gpu_is_left_out():
    draft = replace(demo(), path="/models/draft.gguf", layer_bytes=tuple(
        replace(lb, ffn_dense=100 * MIB) for lb in demo().layer_bytes))
    m = llama_8b()
    base = plan_launch(m, gpu(9.5), ModelOverrides(ctx=8192, slots=1))
    assert base.gpu_layers == "all"
    p = plan_launch(m, gpu(9.5), ModelOverrides(ctx=8192, slots=1), draft=draft)
    assert p.drafter.status == "left-out"
    assert "of graphics memory and" in p.drafter.reason and p.gpu_layers == "all"


def test_a_small_drafter_that_fits_is_in_and_priced():
    draft = replace(demo(), path="/models/draft.gguf")
    p = plan_launch(llama_8b(), gpu(24), ModelOverrides(ctx=16384, slots=1), draft=draft)
    assert p.drafter.status == "in" and p.drafter.spec_type == "draft-simple"
    assert p.drafter.resident_bytes and p.drafter.resident_bytes > draft.weights_bytes
    assert sum(d.other_bytes for d in p.devices) == p.drafter.resident_bytes


def test_a_forced_drafter_stays_even_when_it_costs_context():
    draft = replace(llama_8b(), path="/models/draft.gguf")
    p = plan_launch(llama_8b(), cpu(24, 24), ModelOverrides(slots=1, draft_model="/models/draft.gguf",
                                                            spec_type="draft-simple"), draft=draft)
    assert p.drafter.status == "forced"
    assert p.ctx_per_slot < 65536


def test_broken_drafter_pairs_are_left_out():
    draft = replace(demo(), path="/models/draft.gguf")
    p = plan_launch(llama_8b(), gpu(24), draft=draft, broken_drafters=frozenset({"/models/draft.gguf"}))
    assert p.drafter.status == "broken"
    assert sum(d.other_bytes for d in p.devices) == 0


def test_a_model_with_its_own_mtp_head_drafts_for_itself():
    m = replace(llama_8b(), nextn_layers=1)
    p = plan_launch(m, gpu(24), ModelOverrides(ctx=8192), draft=replace(demo(), path="/models/d.gguf"))
    assert (p.drafter.status, p.drafter.spec_type, p.drafter.draft_path) == ("in", "draft-mtp", None)
    assert "not used beside it" in p.drafter.reason


def test_draft_mtp_without_a_head_is_refused_by_name():
    r = plan_launch(llama_8b(), gpu(24), ModelOverrides(spec_type="draft-mtp"))
    assert isinstance(r, PlanRefusal) and "draft-mtp" in r.reason


def test_draft_simple_without_a_draft_model_is_refused_by_name():
    r = plan_launch(llama_8b(), gpu(24), ModelOverrides(spec_type="draft-simple"))
    assert isinstance(r, PlanRefusal) and "needs a draft model" in r.reason


def test_mmproj_is_priced():
    proj = replace(demo(), path="/models/mmproj.gguf", is_vision_projector=True)
    p = plan_launch(demo(), cpu(24), mmproj=proj)
    assert p.mmproj_path == "/models/mmproj.gguf" and p.devices[0].other_bytes > proj.weights_bytes


# --- measured seam ---------------------------------------------------------------------------

class _Measured:
    def __init__(self, line):
        self.line = line

    def lookup(self, device, type_k, type_v, flash_attn, slots, kv_unified=False, ubatch=512):
        return self.line if device == "CPU" else None


def test_a_measured_line_calibrates_the_estimate():
    """The plan's own analytic components, off by what two launches measured, come back as the
    engine's bytes; the plan keeps the analytic figures for the launch to record."""
    from stoker.planning.measured import MeasuredPoint, fit_line

    ov = ModelOverrides(ctx=4096, slots=1)
    est = plan_launch(demo(), cpu(24), ov)
    (a,) = est.analytic_devices
    assert a.name == "CPU" and (a.weights_bytes, a.kv_bytes) == (est.devices[0].weights_bytes,
                                                                  est.devices[0].kv_bytes)
    pts = []
    for ctx in (2048, 8192):
        p = plan_launch(demo(), cpu(24), ModelOverrides(ctx=ctx, slots=1)).analytic_devices[0]
        pts.append(MeasuredPoint(ctx, ctx, p.weights_bytes + MIB, p.kv_bytes, p.compute_bytes - 2 * MIB,
                                 p.weights_bytes, p.kv_bytes, p.compute_bytes))
    p = plan_launch(demo(), cpu(24), ov, measured=_Measured(fit_line(pts)))
    assert p.estimate_source == "measured"
    assert any(d.what == "measured memory" for d in p.decisions)
    d = p.devices[0]
    assert (d.weights_bytes, d.kv_bytes, d.compute_bytes) == (a.weights_bytes + MIB, a.kv_bytes,
                                                              a.compute_bytes - 2 * MIB)
    assert p.analytic_devices == est.analytic_devices  # never the calibrated figures


def test_a_sliding_window_model_is_calibrated_across_its_knee():
    """Gemma-3-like with 4 slots: measured below the knee (where the SWA cache still grows),
    planned above it. The estimate's knee is kept; a line in cells would have kept growing."""
    from stoker.planning.measured import MeasuredPoint, fit_line

    def analytic(ctx):
        return plan_launch(gemma3_swa(), cpu(256), ModelOverrides(ctx=ctx, slots=4)).analytic_devices[0]

    pts = [MeasuredPoint(ctx, ctx, a.weights_bytes, a.kv_bytes + 3 * MIB, a.compute_bytes,
                         a.weights_bytes, a.kv_bytes, a.compute_bytes)
           for ctx, a in ((1024, analytic(1024)), (2048, analytic(2048)))]
    far = analytic(32768)
    p = plan_launch(gemma3_swa(), cpu(256), ModelOverrides(ctx=32768, slots=4), measured=_Measured(fit_line(pts)))
    assert p.devices[0].kv_bytes == far.kv_bytes + 3 * MIB
    per_cell = (pts[1].kv_bytes - pts[0].kv_bytes) / 1024
    assert pts[1].kv_bytes + per_cell * (32768 - 2048) > far.kv_bytes + 100 * MIB  # the knee is real


# --- Hypothesis properties -------------------------------------------------------------------

MODELS = [demo(), llama_8b(), llama_70b(), qwen3moe_30b(), gemma3_swa(), deepseek2_mla(), mamba2(), hybrid()]
model_st = st.sampled_from(MODELS)
kv_st = st.sampled_from(["f16", "q8_0", "q4_0"])


@st.composite
def machines(draw):
    ram = draw(st.integers(4, 256)) * GIB
    avail = int(ram * draw(st.floats(0.3, 1.0)))
    kind = draw(st.sampled_from(["cpu", "discrete", "unified"]))
    if kind == "cpu":
        return Machine("linux", "x86_64", ram, avail, 8, 8)
    vram = draw(st.integers(2, 96)) * GIB
    free = int(vram * draw(st.floats(0.5, 1.0)))
    n = draw(st.integers(1, 2)) if kind == "discrete" else 1
    devs = tuple(Device(f"CUDA{i}" if kind == "discrete" else "MTL0", "gpu", "cuda" if kind == "discrete" else "metal",
                        vram, free, kind if kind == "discrete" else "integrated") for i in range(n))
    return Machine("linux" if kind == "discrete" else "darwin", "x86_64", ram, avail, 8, 8, devs,
                   unified_memory=kind == "unified")


@st.composite
def override_sets(draw):
    raw = {}
    if draw(st.booleans()):
        raw["ctx"] = draw(st.sampled_from([2048, 4096, 16384, 65536]))
    if draw(st.booleans()):
        raw["slots"] = draw(st.integers(1, 4))
    if draw(st.booleans()):
        t = draw(kv_st)
        raw["kv_type_k"] = raw["kv_type_v"] = t
    if draw(st.booleans()):
        raw["gpu_layers"] = draw(st.integers(0, 40) | st.just("all"))
    if draw(st.booleans()):
        raw["n_cpu_moe"] = draw(st.integers(0, 48))
    if draw(st.booleans()):
        raw["swa_full"] = True
    if draw(st.booleans()):
        raw["flash_attn"] = "on"
    return ModelOverrides(**raw)


PROPS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPS
@given(model_st, machines(), override_sets())
def test_no_plan_exceeds_any_device_budget(model, m, ov):
    p = plan_launch(model, m, ov)
    if isinstance(p, LaunchPlan):
        assert within_budget(p)
        assert p.ctx >= 256 and p.slots >= 1
    else:
        assert p.reason and p.suggestions


@PROPS
@given(model_st, machines(), st.floats(1.0, 4.0))
def test_more_memory_never_gives_a_smaller_context(model, m, factor):
    """Scale RAM and every GPU up together: the window per slot never gets smaller at the same
    residency, and a plan wholly on the GPU stays wholly on the GPU.

    Changed with the speed-first policy: a bigger card may now hold every layer at a shorter
    window where the smaller one ran a long window with layers in RAM; that trade is the point
    (see test_no_layer_leaves_the_gpu_when_the_floor_plan_would_hold_them_all)."""
    bigger = replace(m, ram_total_bytes=int(m.ram_total_bytes * factor),
                     ram_available_bytes=int(m.ram_available_bytes * factor),
                     devices=tuple(replace(d, total_bytes=int(d.total_bytes * factor),
                                           free_bytes=int(d.free_bytes * factor)) for d in m.devices))
    ov = ModelOverrides(slots=1, kv_type_k="f16", kv_type_v="f16")
    small, big = plan_launch(model, m, ov), plan_launch(model, bigger, ov)
    if isinstance(small, LaunchPlan):
        assert isinstance(big, LaunchPlan)
        if _all_on_gpu(small):
            assert _all_on_gpu(big)
        if _all_on_gpu(small) == _all_on_gpu(big):
            assert big.ctx >= small.ctx


def _all_on_gpu(p: LaunchPlan) -> bool:
    return p.gpu_layers == "all" and not p.n_cpu_moe and not p.cpu_moe


def _gpu_layer_count(p: LaunchPlan, model) -> int:
    n = (model.n_layer_all or 0) + 1
    if p.gpu_layers is None:
        return 0
    return n if p.gpu_layers == "all" else int(p.gpu_layers)


@PROPS
@given(st.sampled_from([llama_8b(), llama_70b(), gemma3_swa(), qwen3moe_30b()]), st.integers(2, 40),
       st.integers(1, 40), st.sampled_from([4096, 16384, 32768]))
def test_more_graphics_memory_never_gives_fewer_gpu_layers(model, vram, extra, ctx):
    ov = ModelOverrides(ctx=ctx, slots=1, kv_type_k="f16", kv_type_v="f16")
    small = plan_launch(model, gpu(vram, 192), ov)
    big = plan_launch(model, gpu(vram + extra, 192), ov)
    if isinstance(small, LaunchPlan):
        assert isinstance(big, LaunchPlan)
        assert _gpu_layer_count(big, model) >= _gpu_layer_count(small, model)
        if model.is_moe and small.gpu_layers == "all" and big.gpu_layers == "all":
            assert (big.n_cpu_moe or 0) <= (small.n_cpu_moe or 0)


@PROPS
@given(model_st, machines(), override_sets())
def test_every_explicit_override_is_honoured_or_named_in_the_refusal(model, m, ov):
    p = plan_launch(model, m, ov)
    if isinstance(p, PlanRefusal):
        text = p.reason
        if ov.ctx:
            assert f"context {ov.ctx:,}" in text or "MLA" in text
        if ov.slots:
            assert f"{ov.slots} slots" in text or "MLA" in text
        if ov.kv_type_k:
            assert f"KV {ov.kv_type_k}" in text or "MLA" in text
        return
    if ov.ctx:
        assert p.ctx == ov.ctx
    if ov.slots:
        assert p.slots == ov.slots
    if ov.kv_type_k:
        assert (p.kv_type_k, p.kv_type_v) == (ov.kv_type_k, ov.kv_type_v)
    if ov.flash_attn:
        assert p.flash_attn == ov.flash_attn
    has_swa = bool(model.n_swa) and any(model.swa_layers)
    if ov.swa_full:
        assert p.swa_full == has_swa
    if (m.gpus and not m.unified_memory and ov.gpu_layers is not None
            and (ov.n_cpu_moe is not None or not model.is_moe or ov.gpu_layers != "all")):
        assert p.gpu_layers == ov.gpu_layers
    if m.gpus and ov.n_cpu_moe and not m.unified_memory and (ov.gpu_layers is not None or model.is_moe):
        assert p.n_cpu_moe == ov.n_cpu_moe


# ---- prompt cache (--cache-ram): sized from what the plan leaves, never the engine's blind 8 GiB

def test_prompt_cache_is_half_the_leftover_and_capped_at_the_engine_default():
    roomy = plan_launch(demo(), cpu(64))
    assert roomy.cache_ram_mib == 8192
    small = plan_launch(demo(), cpu(4))  # 4 GiB - 2 GiB reserve, demo uses well under 1 GiB
    cpu_dev = next(d for d in small.devices if d.name == "CPU")
    assert small.cache_ram_mib == (cpu_dev.budget_bytes - cpu_dev.total_bytes) // MIB // 2
    assert any(d.what.startswith("prompt cache") for d in small.decisions)


def test_prompt_cache_is_off_when_the_plan_fills_the_budget():
    tight = plan_launch(llama_8b(), cpu(8))  # 6 GiB budget: context grows until little is left
    assert isinstance(tight, LaunchPlan)
    cpu_dev = next(d for d in tight.devices if d.name == "CPU")
    left_mib = (cpu_dev.budget_bytes - cpu_dev.total_bytes) // MIB
    assert tight.cache_ram_mib == (left_mib // 2 if left_mib // 2 >= 64 else 0)
    assert tight.cache_ram_mib < 1024


# ---- speed first: every layer stays on the GPU when the weights fit there with a working window

def _real_shape(tmp_path, name):
    from stoker.library.gguf_io import load_summary
    from tests.helpers.gguf_fixtures import REAL_SHAPE_BUILDERS

    path = tmp_path / f"{name}.gguf"
    REAL_SHAPE_BUILDERS[name](path)
    return load_summary(path)


def test_llama_8b_on_an_rtx_4070_keeps_every_layer_and_trades_the_kv_type(tmp_path):
    p = plan_launch(_real_shape(tmp_path, "llama_8b_q4_k_m"), machine("rtx4070-12g-ram32g.json"))
    assert isinstance(p, LaunchPlan) and within_budget(p)
    assert p.gpu_layers == "all" and p.n_cpu_moe is None
    assert (p.ctx, p.kv_type_k, p.kv_type_v) == (65536, "q8_0", "q8_0")
    (traded,) = [d for d in p.decisions if d.what.startswith("every layer kept on the GPU")]
    assert "a q8_0 cache instead of f16" in traded.what
    assert "only 27 of 33 layers on the GPU" in traded.why
    assert p.decode_speed is not None and p.decode_speed.tokens_per_s > 90
    assert {r.name for r in p.decode_speed.reads} == {"CUDA0"}


def test_gemma_3_12b_on_an_rtx_4070_keeps_every_layer_and_f16_and_shortens_the_window(tmp_path):
    p = plan_launch(_real_shape(tmp_path, "gemma3_12b_q4_k_m"), machine("rtx4070-12g-ram32g.json"))
    assert isinstance(p, LaunchPlan) and within_budget(p)
    assert p.gpu_layers == "all"
    assert p.kv_type_k == "f16"  # Gemma is kept at f16 (gezel-behaviours §1)
    assert PlanPolicy().min_ctx <= p.ctx < 65536 and p.ctx % 256 == 0
    (traded,) = [d for d in p.decisions if d.what.startswith("every layer kept on the GPU")]
    assert f"a {p.ctx:,}-token window instead of 65,536" in traded.what
    assert "only 44 of 49 layers on the GPU" in traded.why
    # One step more would push a layer off the card.
    more = plan_launch(_real_shape(tmp_path, "gemma3_12b_q4_k_m"), machine("rtx4070-12g-ram32g.json"),
                       ModelOverrides(ctx=p.ctx + 256, slots=1, gpu_layers="all", n_cpu_moe=0))
    assert isinstance(more, PlanRefusal)


def test_weights_that_do_not_fit_still_go_partly_to_ram_and_say_why():
    roomy = replace(machine("rtx4070-12g-ram32g.json"), ram_total_bytes=64 * GIB, ram_available_bytes=60 * GIB)
    p = plan_launch(llama_70b(), roomy)
    assert isinstance(p, LaunchPlan) and isinstance(p.gpu_layers, int)
    assert any(d.what == "layers in RAM" and "do not fit in graphics memory even with a 4,096-token"
               in d.why for d in p.decisions)


def test_a_user_who_places_the_layers_keeps_the_old_ladder():
    p = plan_launch(llama_8b(), machine("rtx4070-12g-ram32g.json"), ModelOverrides(gpu_layers=20))
    assert p.gpu_layers == 20 and p.kv_type_k == "f16" and p.ctx == 65536


@st.composite
def discrete_machines(draw):
    vram = draw(st.integers(2, 48)) * GIB
    free = int(vram * draw(st.floats(0.5, 1.0)))
    n = draw(st.integers(1, 2))
    ram = draw(st.integers(8, 256)) * GIB
    devs = tuple(Device(f"CUDA{i}", "NVIDIA GeForce RTX 4070", "cuda", vram, free, "discrete") for i in range(n))
    return Machine("linux", "x86_64", ram, int(ram * draw(st.floats(0.5, 1.0))), 8, 8, devs)


@st.composite
def unplaced_overrides(draw):
    """Overrides that do not place layers (no -ngl, no --n-cpu-moe): the default policy decides."""
    raw = {}
    if draw(st.booleans()):
        raw["ctx"] = draw(st.sampled_from([4096, 16384, 65536]))
    if draw(st.booleans()):
        raw["slots"] = draw(st.integers(1, 3))
    if draw(st.booleans()):
        raw["kv_type_k"] = raw["kv_type_v"] = draw(kv_st)
    if draw(st.booleans()):
        raw["swa_full"] = True
    return ModelOverrides(**raw)


@PROPS
@given(model_st, discrete_machines(), unplaced_overrides())
def test_no_layer_leaves_the_gpu_when_the_floor_plan_would_hold_them_all(model, m, ov):
    p = plan_launch(model, m, ov)
    if not isinstance(p, LaunchPlan) or _all_on_gpu(p):
        return
    policy = PlanPolicy()
    n_train = model.n_ctx_train or policy.default_ctx
    floor = ov.ctx or min(policy.min_ctx, policy.default_ctx, n_train)
    kv = ov.kv_type_k or (policy.trade_kv_type if takes_cheap_kv(model, policy) else policy.default_kv_type)
    at_floor = plan_launch(model, m, replace(ov, ctx=floor, slots=ov.slots or (p.slots if ov.ctx else 1),
                                             kv_type_k=kv, kv_type_v=ov.kv_type_v or kv,
                                             gpu_layers="all", n_cpu_moe=0))
    assert isinstance(at_floor, PlanRefusal), (
        f"layers left the GPU ({p.gpu_layers}, n_cpu_moe {p.n_cpu_moe}) though ctx {at_floor.ctx} "
        f"KV {at_floor.kv_type_k} holds them all")


def test_two_set_slots_share_the_resident_floor_window_rather_than_leave_layers_in_ram():
    """Found by the property above: two slots set by the user, a hybrid model on a 2 GiB card.
    4,096 tokens per slot do not fit beside every layer even with a q8_0 cache, but a
    4,096-token window shared by the two slots does, so the plan keeps every layer on the GPU
    (it used to move 36 of 41 layers to RAM for a 131,072-token window)."""
    m = Machine("linux", "x86_64", 8 * GIB, 8 * GIB, 8, 8,
                (Device("CUDA0", "NVIDIA GeForce RTX 4070", "cuda", 2 * GIB, 1_711_276_032, "discrete"),))
    p = plan_launch(hybrid(), m, ModelOverrides(slots=2))
    assert isinstance(p, LaunchPlan) and _all_on_gpu(p)
    assert p.slots == 2 and p.kv_type_k == p.kv_type_v == "q8_0"
    assert 4096 <= p.ctx < 2 * 4096
    assert within_budget(p)
