"""Header-only GGUF files with real models' tensor shapes, read by the real header walker and
planned on machines described in tests/data/machines/*.json."""

from __future__ import annotations

from pathlib import Path

import pytest

from stoker.base.overrides import ModelOverrides
from stoker.library.gguf_io import load_summary
from stoker.planning import memory as mem
from stoker.planning.machine import machine_from_json
from stoker.planning.plan import LaunchPlan, PlanRefusal
from stoker.planning.planner import plan_launch
from tests.helpers import gguf_fixtures as F

MACHINES = Path(__file__).resolve().parents[1] / "data" / "machines"
MIB = 1 << 20


@pytest.fixture(scope="module")
def shapes(tmp_path_factory):
    d = tmp_path_factory.mktemp("shapes")
    built = {}
    for fn in (F.llama_8b_q4_k_m, F.llama_70b_q4_k_m, F.qwen3moe_30b_a3b_q4_k_m, F.gemma3_12b_q4_k_m,
               F.gpt_oss_20b_mxfp4, F.deepseek2_lite_q4_k_m, F.lfm2_1_2b_q4_k_m, F.mamba2_2_7b):
        built[fn.__name__] = load_summary(fn(d / f"{fn.__name__}.gguf"), use_disk_cache=False)
    return built


def machine(name):
    path = MACHINES / name
    return machine_from_json(path.read_text(), str(path))


def kv32k(s):
    return mem.kv_bytes(s, ctx=32768, slots=1, kv_unified=False)


def test_llama_8b_kv_is_128_kib_per_token(shapes):
    assert mem.kv_bytes(shapes["llama_8b_q4_k_m"], ctx=8192, slots=1, kv_unified=False).total == 1024 * MIB


def test_gemma3_sliding_layers_hold_only_the_window(shapes):
    kv = kv32k(shapes["gemma3_12b_q4_k_m"])
    assert (kv.kv_layers, kv.swa_layers, kv.cells_swa) == (48, 40, 1536)
    assert kv.k_bytes == kv.v_bytes == 8 * 32768 * 4096 + 40 * 1536 * 4096


def test_gpt_oss_alternating_window_of_128(shapes):
    kv = kv32k(shapes["gpt_oss_20b_mxfp4"])
    assert kv.cells_swa == 768  # pad256(128 + 512)
    assert kv.k_bytes == 12 * 32768 * 1024 + 12 * 768 * 1024


def test_deepseek2_mla_caches_576_wide_k_only(shapes):
    kv = kv32k(shapes["deepseek2_lite_q4_k_m"])
    assert kv.v_bytes == 0 and kv.k_bytes == 27 * 32768 * 576 * 2


def test_lfm2_hybrid_has_kv_for_6_layers_and_state_for_10(shapes):
    kv = kv32k(shapes["lfm2_1_2b_q4_k_m"])
    assert kv.kv_layers == 6 and kv.kv_bytes == 2 * 6 * 32768 * 1024
    assert kv.state_bytes == 10 * 4 * 2048 * (3 - 1)


def test_mamba2_has_state_and_no_kv(shapes):
    kv = kv32k(shapes["mamba2_2_7b"])
    assert kv.kv_bytes == 0
    assert kv.state_bytes == 64 * 4 * (3 * (5120 + 2 * 128) + 128 * 5120)


def test_30b_a3b_on_a_12_gib_gpu_chooses_expert_offload(shapes):
    p = plan_launch(shapes["qwen3moe_30b_a3b_q4_k_m"], machine("rtx4070-12g-ram32g.json"))
    assert isinstance(p, LaunchPlan)
    assert p.gpu_layers == "all" and p.n_cpu_moe and not p.cpu_moe
    offload = [d for d in p.decisions if d.what.startswith("expert offload")]
    assert offload and "stay in RAM" in offload[0].why
    assert all(d.total_bytes <= d.budget_bytes for d in p.devices)


def test_70b_dense_on_a_16_gib_unified_laptop_refuses_with_what_would_fit(shapes):
    r = plan_launch(shapes["llama_70b_q4_k_m"], machine("macbook-m2-16g-unified.json"))
    assert isinstance(r, PlanRefusal)
    assert r.reason.startswith("needs ") and "free" in r.reason
    assert any("smaller quantisation" in s for s in r.suggestions)


def test_70b_fits_across_two_24_gib_cards(shapes):
    p = plan_launch(shapes["llama_70b_q4_k_m"], machine("two-rtx3090-ram64g.json"),
                    ModelOverrides(ctx=8192, slots=1))
    assert isinstance(p, LaunchPlan) and p.gpu_layers == "all"


@pytest.mark.parametrize("name", ["llama_8b_q4_k_m", "gemma3_12b_q4_k_m", "gpt_oss_20b_mxfp4",
                                  "deepseek2_lite_q4_k_m", "lfm2_1_2b_q4_k_m", "mamba2_2_7b"])
@pytest.mark.parametrize("machine_file", ["rtx4070-12g-ram32g.json", "cpu-only-ram24g.json"])
def test_each_shape_plans_within_budget(shapes, name, machine_file):
    p = plan_launch(shapes[name], machine(machine_file))
    assert isinstance(p, LaunchPlan)
    assert all(d.total_bytes <= d.budget_bytes for d in p.devices)
    assert p.decisions
