"""Predicted decode speed: bandwidth table, bytes read per token, and how plans show it."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from stoker.planning import memory as mem
from stoker.planning import speed
from stoker.planning.machine import Device, Machine, machine_from_json
from stoker.planning.plan import LaunchPlan, plan_summary_line
from stoker.planning.planner import plan_launch
from tests.core.summaries import GIB, demo, llama_8b, qwen3moe_30b

MACHINES = Path(__file__).resolve().parents[1] / "data" / "machines"
GB = 1_000_000_000


def machine(name: str) -> Machine:
    path = MACHINES / name
    return machine_from_json(path.read_text(), str(path))


@pytest.mark.parametrize("description, gb_s", [
    ("NVIDIA GeForce RTX 4070", 504), ("NVIDIA GeForce RTX 4070 Ti SUPER", 672),
    ("NVIDIA GeForce RTX 4070 Ti", 504), ("NVIDIA GeForce RTX 3090", 936),
    ("AMD Radeon RX 7900 XTX", 960), ("Apple M2", 100), ("Apple M2 Pro", 200), ("Apple M3 Max", 400),
    ("NVIDIA H100 PCIe", 2000), ("Intel(R) Arc(TM) A770 Graphics", 560),
])
def test_the_table_reads_the_most_specific_name(description, gb_s):
    assert speed.gpu_bandwidth_bytes_per_s(description) == gb_s * GB


@pytest.mark.parametrize("description", ["", None, "llvmpipe (LLVM 15.0.7, 256 bits)", "NVIDIA GeForce RTX 40700"])
def test_an_unknown_device_has_no_bandwidth(description):
    assert speed.gpu_bandwidth_bytes_per_s(description) is None


def test_unknown_cpu_bandwidth_makes_the_prediction_unknown_never_zero():
    m = demo()
    p = speed.predict_decode(m, mem.place_layers(m, None), None, {"CPU": None})
    assert p.tokens_per_s is None
    assert "no memory bandwidth known for CPU" in speed.speed_text(p)


def test_a_cpu_decode_reads_every_block_and_the_tied_output_once():
    m = demo()
    reads = speed.bytes_read_per_token(m, mem.place_layers(m, None), None)
    blocks = sum(lb.total for lb in m.layer_bytes[:m.n_layer])
    tied = m.embedding_bytes if mem.output_is_tied(m) else 0
    assert reads == {"CPU": blocks + m.output_bytes + tied}
    p = speed.predict_decode(m, mem.place_layers(m, None), None, {"CPU": 10 * GB})
    assert p.tokens_per_s == pytest.approx(10 * GB / reads["CPU"])


def test_layers_in_ram_add_their_read_time_to_the_card_s():
    m = llama_8b()
    gpus = (("CUDA0", 1.0),)
    bw = {"CUDA0": 500 * GB, "CPU": 50 * GB}
    full = speed.predict_decode(m, mem.place_layers(m, "all", gpus=gpus), None, bw)
    part = speed.predict_decode(m, mem.place_layers(m, 27, gpus=gpus), None, bw)
    assert {r.name for r in full.reads} == {"CUDA0"}
    assert {r.name for r in part.reads} == {"CPU", "CUDA0"}
    assert part.tokens_per_s < full.tokens_per_s / 2  # the arithmetic: well under half
    assert part.limited_by == "CPU"


def test_a_moe_token_reads_only_its_share_of_the_experts():
    m = qwen3moe_30b()
    reads = speed.bytes_read_per_token(m, mem.place_layers(m, None), None)
    experts = sum(lb.ffn_experts for lb in m.layer_bytes[:m.n_layer])
    assert reads["CPU"] < m.weights_bytes - experts * (1 - m.n_expert_used / m.n_expert) + 1
    assert reads["CPU"] > m.weights_bytes * m.n_expert_used / m.n_expert


def test_the_kv_cache_read_grows_with_the_context():
    m = llama_8b()
    kv = mem.kv_bytes(m, ctx=8192, slots=1, kv_unified=False)
    place = mem.place_layers(m, None)
    empty = sum(speed.bytes_read_per_token(m, place, kv, 0).values())
    half = sum(speed.bytes_read_per_token(m, place, kv, 4096).values())
    assert half - empty == pytest.approx(kv.total / 2, rel=0.001)


def test_unified_memory_reads_at_the_chip_s_figure():
    m = machine("macbook-m2-16g-unified.json")
    bw = speed.device_bandwidths(m)
    assert bw["MTL0"] == bw["CPU"] == 100 * GB


def test_a_machine_file_may_give_bandwidths_and_rejects_nonsense():
    m = machine("rtx4070-12g-ram32g.json")
    assert m.ram_bandwidth_bytes_per_s == 50 * GB
    custom = machine_from_json('{"ram_total_gib": 8, "devices": [{"name": "CUDA0", "description": "x", '
                               '"bandwidth_gb_s": 123}]}', "t.json")
    assert speed.device_bandwidths(custom)["CUDA0"] == 123 * GB
    with pytest.raises(ValueError, match="ram_bandwidth_gb_s must be a positive number"):
        machine_from_json('{"ram_total_gib": 8, "ram_bandwidth_gb_s": 0}', "t.json")


def test_every_plan_carries_its_predicted_speed_and_the_tray_line_shows_it():
    p = plan_launch(llama_8b(), machine("rtx4070-12g-ram32g.json"))
    assert isinstance(p, LaunchPlan) and p.decode_speed is not None
    assert p.decode_speed.tokens_per_s == pytest.approx(504 * GB / p.decode_speed.reads[0].bytes_per_token)
    line = plan_summary_line(p, "cuda")
    assert line.startswith("context 65,536, 1 slot, KV q8_0/q8_0, all layers on the GPU, ~")
    assert line.endswith("tok/s decode, cuda")
    assert any(d.what.startswith("predicted decode: ~") for d in p.decisions)


def test_a_cpu_plan_without_a_measured_figure_says_its_speed_is_unknown():
    cpu = Machine("linux", "x86_64", 32 * GIB, 30 * GIB, 8, 8)
    p = plan_launch(demo(), cpu)
    assert p.decode_speed.tokens_per_s is None
    assert "decode speed unknown" in plan_summary_line(p)
    measured = plan_launch(demo(), replace(cpu, ram_bandwidth_bytes_per_s=4 * GB))
    assert measured.decode_speed.tokens_per_s > 0


def test_a_gpu_without_a_table_entry_is_unknown_too():
    dev = Device("Vulkan0", "Some Future GPU", "vulkan", 16 * GIB, 16 * GIB, "discrete")
    m = Machine("linux", "x86_64", 32 * GIB, 30 * GIB, 8, 8, (dev,), ram_bandwidth_bytes_per_s=50 * GB)
    p = plan_launch(llama_8b(), m)
    assert p.decode_speed.tokens_per_s is None
