"""parse_memory_report against real llama-server b11434 logs (tests/data/engine_logs)."""

from __future__ import annotations

from pathlib import Path

import pytest

from stoker.engines.engine_log import BUFFER_ROUNDING_BYTES, MIB, device_of_buffer, parse_memory_report

LOGS = Path(__file__).resolve().parents[1] / "data" / "engine_logs"


def report(name):
    return parse_memory_report((LOGS / name).read_text().splitlines())


def test_demo_model_buffers_per_device_in_bytes():
    r = report("smollm2-f16-np1-c2048.log")
    assert [d.device for d in r.devices] == ["CPU"]
    cpu = r.device("CPU")
    assert cpu.model_bytes == round(92.10 * MIB)
    assert cpu.kv_bytes == 45 * MIB
    assert cpu.compute_bytes == round(16.64 * MIB)
    assert cpu.output_bytes == round(0.19 * MIB)
    assert r.total_bytes == cpu.total_bytes
    assert r.rounding_bytes == 4 * BUFFER_ROUNDING_BYTES
    assert r.complete and r.tensors_loaded and r.load_error is None


def test_context_lines_and_kv_cache_line():
    r = report("smollm2-f16-np1-c2048.log")
    assert (r.n_ctx, r.n_ctx_seq, r.n_seq_max, r.n_batch, r.n_ubatch) == (2048, 2048, 1, 2048, 512)
    assert r.flash_attn == "auto" and r.flash_attn_resolved is True and r.kv_unified is False
    (kv,) = r.kv_caches
    assert (kv.cells, kv.layers, kv.seqs, kv.streams, kv.type_k, kv.type_v) == (2048, 30, 1, 1, "f16", "f16")
    assert kv.k_bytes + kv.v_bytes == kv.total_bytes == 45 * MIB
    # 30 layers x 192 values x 2 bytes x (K + V) per cell, as the reference's formula says
    assert kv.total_bytes == 2048 * 30 * 192 * 2 * 2
    assert r.n_ctx_train == 8192 and r.file_bytes == round(92.10 * MIB)


def test_fit_breakdown_projected_then_loaded():
    r = report("smollm2-f16-np1-c2048.log")
    assert [b.phase for b in r.breakdowns] == ["projected", "loaded"]
    (host,) = r.projected.rows
    assert (host.kind, host.name) == ("host", "Host")
    assert (host.self_bytes, host.model_bytes, host.context_bytes, host.compute_bytes) == (
        153 * MIB, 92 * MIB, 45 * MIB, 16 * MIB)
    # whole MiB, floored: never above the buffer lines
    assert host.model_bytes <= r.device("CPU").model_bytes < host.model_bytes + MIB
    kinds = [e.kind for e in r.fit_events]
    assert kinds == ["projected", "no-change", "fitted"]
    assert r.fit_events[0].projected_bytes == 153 * MIB


def test_jsonl_log_uses_the_json_event_once_per_table():
    r = report("smollm2-q8_0-np4-c4096.jsonl")
    assert [b.phase for b in r.breakdowns] == ["projected", "loaded"]
    assert r.projected.rows[0].context_bytes == 47 * MIB
    (kv,) = r.kv_caches
    assert (kv.cells, kv.seqs, kv.streams, kv.type_k, kv.type_v) == (1024, 4, 4, "q8_0", "q8_0")
    assert r.flash_attn == "enabled" and r.n_ctx == 4096 and r.n_ctx_seq == 1024
    assert r.device("CPU").kv_bytes == round(47.81 * MIB)


def test_swa_model_two_caches_and_repack_buffer_on_host():
    r = report("gemma3-swa-np2-c4096.log")
    caches = {c.cache: c for c in r.kv_caches}
    assert set(caches) == {"non-swa", "swa"}
    assert (caches["non-swa"].cells, caches["non-swa"].layers) == (2048, 3)
    assert (caches["swa"].cells, caches["swa"].layers) == (1024, 15)
    models = [b for b in r.buffers if b.kind == "model"]
    assert [b.buffer for b in models] == ["CPU_Mapped", "CPU_REPACK"]
    assert {b.device for b in models} == {"CPU"}
    assert r.device("CPU").kv_bytes == 42 * MIB
    # The dry run does not see the repacked copy in Host: the projection undercounts.
    assert r.projected.rows[0].model_bytes < r.loaded.rows[0].model_bytes


def test_fit_shrinking_context_is_reported():
    r = report("smollm2-fit-shrink-np16.log")
    reduced = [e for e in r.fit_events if e.kind == "ctx-reduced"]
    assert [(e.ctx_from, e.ctx_to) for e in reduced] == [(131072, 65536)]
    assert any(e.kind == "failed" for e in r.fit_events)
    assert r.n_ctx == 65536 and r.kv_caches[0].seqs == 16
    assert len([b for b in r.breakdowns if b.phase == "projected"]) == 3


def test_failed_load_has_no_buffers_and_names_the_error():
    r = report("smollm2-header-only-refused.log")
    assert r.buffers == () and r.total_bytes is None and not r.complete
    assert "not within the file bounds" in r.load_error
    assert [e.kind for e in r.fit_events] == ["error"]


def test_gpu_table_row_and_recurrent_line():
    table = "0.00.1 I common_memory_breakdown_print: "
    lines = [
        table + "| memory breakdown [MiB] | total   free     self   model   context   compute    unaccounted |",
        table + "|   - CUDA0 (RTX 4090)   | 24077 =  945 + (19187 = 17904 +     384 +     898) +        3945 |",
        table + "|   - Host               |                 58271 = 58259 +       0 +      12                |",
        "0.00.2 I load_tensors:        CUDA0 model buffer size =  4403.49 MiB",
        "0.00.2 I load_tensors:   CPU_Mapped model buffer size =   281.81 MiB",
        "0.00.3 I llama_memory_recurrent:      CUDA0 RS buffer size =    16.50 MiB",
        "0.00.3 I sched_reserve:  CUDA_Host compute buffer size =    12.01 MiB",
    ]
    r = parse_memory_report(lines)
    gpu = r.projected.rows[0]
    assert (gpu.kind, gpu.name, gpu.total_bytes, gpu.free_bytes) == ("device", "CUDA0", 24077 * MIB, 945 * MIB)
    assert (gpu.self_bytes, gpu.model_bytes, gpu.context_bytes, gpu.compute_bytes) == (
        19187 * MIB, 17904 * MIB, 384 * MIB, 898 * MIB)
    assert r.device("CUDA0").kv_bytes == round(16.5 * MIB)
    assert r.device("CPU").compute_bytes == round(12.01 * MIB)
    assert [d.device for d in r.devices] == ["CPU", "CUDA0"]


@pytest.mark.parametrize("name,device", [("CPU", "CPU"), ("CPU_Mapped", "CPU"), ("CPU_REPACK", "CPU"),
                                         ("CUDA_Host", "CPU"), ("CUDA0", "CUDA0"), ("ROCm1", "ROCm1"),
                                         ("Vulkan0", "Vulkan0"), ("MTL0_Mapped", "MTL0"), ("AMX", "CPU")])
def test_device_of_buffer(name, device):
    assert device_of_buffer(name) == device


def test_unrelated_and_garbage_lines_are_skipped():
    r = parse_memory_report(["hello", "", "{not json", '{"type":"log","level":"info","msg":"x\\n"}'])
    assert r.buffers == () and r.breakdowns == () and r.n_ctx is None
