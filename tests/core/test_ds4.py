"""ds4 residency: the seed's cases (gezel-inference 1.0.9 residency.js) and their invariants."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from stoker.planning.ds4 import (
    EXPERT_CACHE_HEADROOM_BYTES,
    FULL_RESIDENCY_RESERVATION_BYTES,
    GIB,
    Ds4Entry,
    ExpertCachePlan,
    FullResidencyMemory,
    MeasuredLine,
    StreamingMemory,
    can_use_full_residency,
    measured_bytes_at,
    plan_expert_cache,
    plan_measured_launch,
    plan_reservation,
    resident_bytes_for_mode,
    should_use_ssd_streaming,
)

KIB = 1024


# --- the seed's regression: a measured 45 GiB launch on a 96 GiB Mac with an 80 GiB budget ---

QWEN38_FULL = Ds4Entry(
    resident_bytes=45 * GIB,
    full_residency_memory=FullResidencyMemory(working_set_bytes=45 * GIB, ctx_tokens=65536, bytes_per_token=16 * KIB),
)


def test_measured_full_residency_reserves_its_working_set_not_the_96_gib_floor():
    budget = 80 * GIB
    assert can_use_full_residency(45 * GIB, 96 * GIB, "darwin", "arm64")
    r = plan_reservation(QWEN38_FULL, ssd_streaming=False, num_ctx=65536, total_ram_bytes=96 * GIB,
                         budget_bytes=budget)
    assert r.measured and r.bytes == 45 * GIB
    assert r.bytes <= budget
    assert "measured full-residency working set" in r.why


def test_the_96_gib_floor_applies_only_when_nobody_measured():
    unmeasured = Ds4Entry(resident_bytes=45 * GIB)
    r = plan_reservation(unmeasured, ssd_streaming=False, num_ctx=65536, total_ram_bytes=96 * GIB,
                         budget_bytes=80 * GIB)
    assert not r.measured and r.bytes == FULL_RESIDENCY_RESERVATION_BYTES == 96 * GIB
    assert r.bytes > 80 * GIB  # the bug the measurement fixes
    assert "floor" in r.why
    assert resident_bytes_for_mode(45 * GIB, ssd_streaming=True) == 45 * GIB
    assert resident_bytes_for_mode(120 * GIB, ssd_streaming=False) == 120 * GIB


def test_measured_full_residency_moves_with_the_window_and_adds_sidecars():
    m = plan_measured_launch(QWEN38_FULL, ssd_streaming=False, num_ctx=131072, total_ram_bytes=96 * GIB,
                             sidecar_bytes=2 * GIB)
    assert m.context_free_bytes == 44 * GIB + 2 * GIB
    assert m.working_set_bytes == 46 * GIB + 2 * GIB
    assert m.cache is None


# --- the seed's second case: Qwen3.8 streamed on a 32 GiB Mac --------------------------------

QWEN38_STREAM = Ds4Entry(
    resident_bytes=20 * GIB,
    cache_experts_bytes=8 * GIB,
    streaming_memory=StreamingMemory(fixed_bytes=10 * GIB, ctx_tokens=32768, bytes_per_token=16 * KIB),
)
MAC32_BUDGET = int(32 * GIB * 0.7)  # the unified-memory model budget on a 32 GiB Mac (22.4 GiB)


def test_fixed_24_gib_headroom_refuses_qwen38_on_a_32_gib_mac_when_unmeasured():
    plan = plan_expert_cache(32 * GIB, catalog_cache_bytes=8 * GIB, catalog_resident_bytes=20 * GIB)
    # 32 - (20 - 8) - 24 = -4 GiB of room.
    assert plan == ExpertCachePlan(1, 8, True, False, "headroom", plan.why)
    assert "not safe" in plan.why


def test_measured_streaming_sizes_the_cache_from_the_model_budget_on_a_32_gib_mac():
    m = plan_measured_launch(QWEN38_STREAM, ssd_streaming=True, num_ctx=32768, total_ram_bytes=32 * GIB,
                             budget_bytes=MAC32_BUDGET)
    assert m.cache.safe and m.cache.limit == "model-budget"
    assert (m.cache.cache_gb, m.cache.requested_gb, m.cache.clamped) == (8, 8, False)
    assert m.working_set_bytes == 10 * GIB + 8 * GIB
    assert m.context_free_bytes == (10 * GIB - 16 * KIB * 32768) + 8 * GIB
    assert m.working_set_bytes <= MAC32_BUDGET


def test_streamed_launch_without_a_budget_or_measurement_falls_back_to_the_catalog():
    assert plan_measured_launch(QWEN38_STREAM, ssd_streaming=True, num_ctx=32768, total_ram_bytes=32 * GIB) is None
    assert plan_measured_launch(QWEN38_FULL, ssd_streaming=True, num_ctx=32768, total_ram_bytes=96 * GIB,
                                budget_bytes=80 * GIB) is None
    assert plan_measured_launch(QWEN38_STREAM, ssd_streaming=False, num_ctx=32768, total_ram_bytes=96 * GIB) is None
    r = plan_reservation(QWEN38_STREAM, ssd_streaming=True, num_ctx=32768, total_ram_bytes=32 * GIB)
    assert not r.measured and r.bytes == 20 * GIB
    assert plan_reservation(Ds4Entry(), ssd_streaming=True, num_ctx=1, total_ram_bytes=GIB) is None


# --- measured vs unmeasured, clamps, minimums, RAM tiers ----------------------------------------


def test_measured_and_unmeasured_paths_on_the_same_machine():
    common = dict(configured_gb=40, catalog_cache_bytes=32 * GIB, catalog_resident_bytes=60 * GIB)
    unmeasured = plan_expert_cache(96 * GIB, **common)
    measured = plan_expert_cache(96 * GIB, measured_fixed_bytes=30 * GIB, budget_bytes=76 * GIB, **common)
    # headroom: 96 - (60 - 32) - 24 = 44 GiB of room -> 40 fits.
    assert (unmeasured.cache_gb, unmeasured.clamped, unmeasured.limit) == (40, False, "headroom")
    # model budget: 76 - 30 = 46 GiB -> 40 fits too; a smaller budget clamps.
    assert (measured.cache_gb, measured.limit) == (40, "model-budget")
    tight = plan_expert_cache(96 * GIB, measured_fixed_bytes=50 * GIB, budget_bytes=76 * GIB, **common)
    assert (tight.cache_gb, tight.requested_gb, tight.clamped, tight.safe) == (26, 40, True, True)
    assert "instead of 40 GiB" in tight.why


def _head(plan):
    return plan.cache_gb, plan.requested_gb, plan.clamped, plan.safe


def test_catalog_guidance_and_clamping_of_a_manual_value():
    assert _head(plan_expert_cache(128 * GIB, catalog_cache_bytes=32 * GIB, catalog_resident_bytes=36 * GIB)) == (
        32, 32, False, True)
    # 128 - (80 - 64) - 24 = 88 GiB safe, so a manual 96 is clamped to 88.
    assert _head(plan_expert_cache(128 * GIB, configured_gb=96, catalog_cache_bytes=64 * GIB,
                                   catalog_resident_bytes=80 * GIB)) == (88, 96, True, True)


def test_clamp_up_to_the_entry_minimum_cache():
    plan = plan_expert_cache(128 * GIB, configured_gb=2, measured_fixed_bytes=10 * GIB, budget_bytes=60 * GIB,
                             min_cache_bytes=6 * GIB)
    assert (plan.cache_gb, plan.requested_gb, plan.clamped, plan.safe) == (6, 2, True, True)
    assert "at least 6 GiB" in plan.why
    # A fractional minimum rounds up to whole GiB.
    assert plan_expert_cache(128 * GIB, configured_gb=1, measured_fixed_bytes=0, budget_bytes=60 * GIB,
                             min_cache_bytes=int(2.5 * GIB)).cache_gb == 3


def test_unsafe_when_the_room_is_below_the_minimum():
    plan = plan_expert_cache(64 * GIB, measured_fixed_bytes=56 * GIB, budget_bytes=60 * GIB,
                             min_cache_bytes=6 * GIB)
    assert (plan.cache_gb, plan.clamped, plan.safe, plan.limit) == (6, True, False, "model-budget")
    # Without a minimum the floor is 1 GiB.
    plan = plan_expert_cache(64 * GIB, catalog_resident_bytes=40 * GIB + EXPERT_CACHE_HEADROOM_BYTES)
    assert (plan.cache_gb, plan.safe) == (1, False)


def test_ram_tiers_when_nobody_names_a_size():
    assert plan_expert_cache(128 * GIB).requested_gb == 64
    assert plan_expert_cache(120 * GIB).requested_gb == 64
    assert plan_expert_cache(96 * GIB).requested_gb == 48
    assert plan_expert_cache(88 * GIB).requested_gb == 48
    assert plan_expert_cache(88 * GIB - 1).requested_gb == 32
    assert plan_expert_cache(64 * GIB).requested_gb == 32
    # ...and the tier itself is still clamped to the room: 64 - 0 - 24 = 40 > 32.
    assert plan_expert_cache(64 * GIB).cache_gb == 32


# --- the line model -----------------------------------------------------------------------------


def test_measured_line_rebases_to_another_window():
    # DeepSeek V4 Flash IQ2_XXS: 36 GiB at 131072 tokens, 8 KiB/token of compressed KV.
    line = MeasuredLine(36 * GIB, 131072, 8192)
    assert measured_bytes_at(line, 131072) == 36 * GIB
    assert measured_bytes_at(line, 262144) == 37 * GIB
    assert measured_bytes_at(line, 65536) == int(35.5 * GIB)
    assert measured_bytes_at(line, -5) == 35 * GIB


def test_measured_line_clamps_a_slope_that_swallows_the_footprint():
    line = MeasuredLine(1 * GIB, 131072, 89 * KIB)
    assert measured_bytes_at(line, 0) == 0
    assert measured_bytes_at(line, 1000) == 89 * KIB * 1000


# --- full residency vs streaming -----------------------------------------------------------------


def test_streaming_is_the_default_even_on_a_128_gib_mac():
    c = should_use_ssd_streaming(None, 81 * GIB, 128 * GIB, "darwin", "arm64")
    assert c.ssd_streaming and "default" in c.why
    assert should_use_ssd_streaming(True, 81 * GIB, 128 * GIB, "darwin", "arm64").ssd_streaming


def test_full_residency_when_asked_and_the_model_plus_headroom_fits():
    c = should_use_ssd_streaming(False, 81 * GIB, 128 * GIB, "darwin", "arm64")
    assert not c.ssd_streaming and "whole model" in c.why
    too_big = should_use_ssd_streaming(False, 153 * GIB, 128 * GIB, "darwin", "arm64")
    assert too_big.ssd_streaming and "does not fit" in too_big.why
    x86 = should_use_ssd_streaming(False, 81 * GIB, 256 * GIB, "linux", "x86_64")
    assert x86.ssd_streaming and "unified-memory arm64" in x86.why
    unknown = should_use_ssd_streaming(False, None, 256 * GIB, "darwin", "arm64")
    assert unknown.ssd_streaming and "size is unknown" in unknown.why


def test_companion_bytes_count_toward_full_residency():
    model, companion = int(80.76 * GIB), int(5.58 * GIB)
    assert can_use_full_residency(model, 118 * GIB, "linux", "aarch64")
    assert not can_use_full_residency(model, 118 * GIB, "linux", "aarch64", companion_bytes=companion)


# --- invariants ----------------------------------------------------------------------------------


@given(
    ram_gib=st.integers(8, 512),
    configured=st.one_of(st.none(), st.integers(1, 256)),
    fixed_gib=st.integers(0, 300),
    budget_gib=st.one_of(st.none(), st.integers(1, 400)),
    min_gib=st.integers(0, 32),
)
def test_cache_plan_invariants(ram_gib, configured, fixed_gib, budget_gib, min_gib):
    plan = plan_expert_cache(
        ram_gib * GIB, configured_gb=configured, catalog_resident_bytes=fixed_gib * GIB,
        measured_fixed_bytes=fixed_gib * GIB if budget_gib else None,
        budget_bytes=budget_gib * GIB if budget_gib else None, min_cache_bytes=min_gib * GIB,
    )
    assert plan.cache_gb >= max(1, min_gib)
    # The seed marks an unsafe plan clamped whatever the sizes; a safe one only when they differ.
    assert plan.clamped == (plan.cache_gb != plan.requested_gb) or not plan.safe
    if plan.safe and budget_gib:
        # A safe measured plan never overruns the budget it was sized against.
        assert fixed_gib + plan.cache_gb <= budget_gib
    if plan.safe and not budget_gib:
        assert fixed_gib + plan.cache_gb + EXPERT_CACHE_HEADROOM_BYTES / GIB <= ram_gib
    assert plan.why
