"""ds4 as an engine kind: availability, context, the wired residency plan, the exact argv and
the parsers, on real ds4 output (tests/data/ds4, copied from public antirez/ds4 runs)."""

from __future__ import annotations

from pathlib import Path

import pytest

from stoker.base.overrides import ModelOverrides
from stoker.engines.ds4_launch import (
    DS4_MIN_CTX,
    Ds4Measurement,
    Ds4Model,
    Ds4Plan,
    choose_ds4_binary,
    ds4_availability,
    ds4_context,
    ds4_launch_spec,
    ds4_model_budget,
    measurement_from_line,
    parse_ds4_line,
    parse_ds4_output,
    parse_memory_line,
    plan_ds4,
    split_repaints,
)
from stoker.engines.kind import (
    DS4,
    SD_SERVER,
    Capability,
    EngineKind,
    capability_of_path,
    describe,
    failure_of_line,
    is_ready_status,
    kinds_serving,
)
from stoker.planning.ds4 import GIB, Ds4Entry, StreamingMemory
from stoker.planning.machine import Device, Machine
from stoker.planning.plan import PlanRefusal

DATA = Path(__file__).resolve().parents[1] / "data" / "ds4"


def linux_cuda(ram_gib: int, vram_gib: int = 48) -> Machine:
    return Machine(os="linux", arch="x86_64", ram_total_bytes=ram_gib * GIB, ram_available_bytes=None,
                   physical_cores=16, logical_cores=32,
                   devices=(Device("CUDA0", "NVIDIA L40S", "cuda", vram_gib * GIB, vram_gib * GIB, "discrete"),))


def mac(ram_gib: int, arch: str = "arm64") -> Machine:
    return Machine(os="darwin", arch=arch, ram_total_bytes=ram_gib * GIB, ram_available_bytes=None,
                   physical_cores=12, logical_cores=12, unified_memory=True)


MODEL = Ds4Model("/models/DeepSeek-V4-Flash-IQ2XXS.gguf", 81 * GIB, "deepseek4", 1_048_576)


def plan(model=MODEL, machine=None, overrides=None, **kw) -> Ds4Plan | PlanRefusal:
    return plan_ds4(model, machine or linux_cuda(128), overrides, kv_disk_dir="/data/engines/ds4/kv", **kw)


# --- the seam ------------------------------------------------------------------------------

def test_engine_kinds_say_what_they_serve_and_how_they_become_ready():
    assert describe(EngineKind.DS4).readiness_path == "/v1/models"
    assert describe(EngineKind.DS4).startup_deadline_s == 600
    assert describe(EngineKind.SD_SERVER).readiness_path == "/"
    assert kinds_serving(Capability.IMAGES) == (EngineKind.SD_SERVER,)
    assert EngineKind.DS4 in kinds_serving(Capability.CHAT)
    assert EngineKind.SD_SERVER not in kinds_serving(Capability.CHAT)
    assert capability_of_path("/v1/images/generations") is Capability.IMAGES
    assert capability_of_path("/sdapi/v1/img2img") is Capability.IMAGES
    assert capability_of_path("/v1/chat/completions") is Capability.CHAT
    assert capability_of_path("/v1/embeddings") is Capability.EMBEDDINGS
    assert capability_of_path("/metrics") is None
    # sd-server answers `/` only after its model loaded; llama-server says 503 while loading.
    assert is_ready_status(EngineKind.SD_SERVER, 404) and not is_ready_status(EngineKind.SD_SERVER, None)
    assert not is_ready_status(EngineKind.LLAMA_SERVER, 503) and is_ready_status(EngineKind.DS4, 200)
    assert not SD_SERVER.cancellable_in_engine and DS4.concurrency == 1


def test_failure_lines_of_ds4_name_their_kind():
    assert failure_of_line(EngineKind.DS4,
                           "ds4: CUDA q8 fp16 cache alloc failed (12.50 MiB): out of memory") == "cuda-oom"
    assert failure_of_line(EngineKind.DS4, "0712 13:00:04 ds4-server: failed to listen on 127.0.0.1:8000: "
                                           "Address already in use") == "port-in-use"
    assert failure_of_line(EngineKind.DS4, "0712 13:00:04 ds4-server: unknown option: --bogus") == "bad-argument"
    assert failure_of_line(EngineKind.DS4, "23:30:20.608  >>> CUDA end commands failed: an illegal memory "
                                           "access was encountered") == "gpu-error"
    assert failure_of_line(EngineKind.DS4, "ds4-server: listening on http://127.0.0.1:8000") is None


# --- availability ----------------------------------------------------------------------------

def test_ds4_runs_on_metal_on_apple_silicon_and_cuda_on_linux_never_the_cpu():
    assert ds4_availability(mac(128)).backend == "metal"
    assert ds4_availability(linux_cuda(128)).backend == "cuda"
    cpu_only = Machine(os="linux", arch="x86_64", ram_total_bytes=256 * GIB, ram_available_bytes=None,
                       physical_cores=32, logical_cores=64)
    a = ds4_availability(cpu_only)
    assert not a.available and "never uses ds4's CPU path" in a.reason
    assert not ds4_availability(mac(128, arch="x86_64")).available
    assert "Windows" in ds4_availability(Machine("windows", "x86_64", 128 * GIB, None, 8, 16)).reason


def test_ds4_is_hidden_below_45_gib_of_ram_with_the_reason():
    a = ds4_availability(linux_cuda(32))
    assert not a.available
    assert a.reason == ("ds4 is hidden: it needs at least 45.0 GiB of RAM even when streaming experts from "
                        "SSD, and this machine has 32.0 GiB.")
    assert ds4_availability(mac(48)).available
    refused = plan(machine=linux_cuda(32))
    assert isinstance(refused, PlanRefusal) and refused.reason == a.reason


def test_discovery_prefers_the_configured_path_then_path_then_stokers_folder():
    assert choose_ds4_binary("/opt/ds4/ds4-server", "/usr/bin/ds4-server", ["/own/ds4-server"]).source == "configured"
    assert choose_ds4_binary(None, "/usr/bin/ds4-server", ["/own/ds4-server"]).path == "/usr/bin/ds4-server"
    assert choose_ds4_binary(None, None, ["/own/ds4-server"]).source == "own"
    assert choose_ds4_binary(None, None, []) is None


# --- context -----------------------------------------------------------------------------------

def test_context_by_ram_tier_capped_by_the_catalog_and_overrides_above_the_floor():
    assert ds4_context(128 * GIB, None, None, None)[0] == 131_072
    assert ds4_context(192 * GIB, None, None, None)[0] == 262_144
    assert ds4_context(512 * GIB, 100_000, None, None)[0] == 100_000
    ctx, d = ds4_context(128 * GIB, None, 4096, None)
    assert ctx == DS4_MIN_CTX and "floor" in d.why
    assert ds4_context(128 * GIB, None, 65536, None)[0] == 65536
    assert ds4_context(128 * GIB, 8192, 4096, None)[0] == 8192  # the catalog's cap is below the floor
    assert ds4_context(512 * GIB, None, None, 65536)[0] == 65536  # never past the trained window


# --- the plan and its argv ---------------------------------------------------------------------

def test_default_plan_streams_from_ssd_and_its_argv_is_the_references():
    p = plan()
    assert isinstance(p, Ds4Plan) and p.ssd_streaming and p.backend == "cuda"
    spec = ds4_launch_spec(p, binary="/opt/ds4/ds4-server", port=18123)
    assert spec.argv == ("/opt/ds4/ds4-server", "--model", "/models/DeepSeek-V4-Flash-IQ2XXS.gguf", "--cuda",
                         "--ctx", "131072", "--host", "127.0.0.1", "--port", "18123",
                         "--kv-disk-dir", "/data/engines/ds4/kv", "--kv-disk-space-mb", "16384", "--cors",
                         "--ssd-streaming", "--ssd-streaming-cache-experts", "56GB")
    assert spec.cwd == "/opt/ds4" and spec.secret_env == ()


def test_a_ds4_override_changes_the_argv():
    base = ds4_launch_spec(plan(), binary="/opt/ds4/ds4-server", port=18123).argv
    smaller = ds4_launch_spec(plan(overrides=ModelOverrides(ds4_cache_gb=20)), binary="/opt/ds4/ds4-server",
                              port=18123).argv
    assert base[-1] == "56GB" and smaller[-1] == "20GB" and base[:-1] == smaller[:-1]
    ctx = ds4_launch_spec(plan(overrides=ModelOverrides(ctx=65536)), binary="/opt/ds4/ds4-server", port=18123).argv
    assert ctx[ctx.index("--ctx") + 1] == "65536"
    mac_full = plan(machine=mac(192), overrides=ModelOverrides(ds4_ssd_streaming=False))
    argv = ds4_launch_spec(mac_full, binary="/Applications/ds4/ds4-server", port=18123).argv
    assert "--metal" in argv and "--ssd-streaming" not in argv and "--ssd-streaming-cache-experts" not in argv


def test_seed_full_residency_only_when_it_fits_and_unmeasured_reserves_96_gib():
    asked = ModelOverrides(ds4_ssd_streaming=False)
    # 81 GiB + 32 GiB headroom does not fit 96 GiB: streaming, with the reason.
    p = plan(machine=mac(96), overrides=asked)
    assert p.ssd_streaming and "does not fit in 96.0 GiB" in p.decisions[2].why
    # An unknown size never qualifies.
    p = plan(model=Ds4Model("/m/x.gguf", None), machine=mac(192), overrides=asked,
             catalog=Ds4Entry(resident_bytes=40 * GIB))
    assert p.ssd_streaming and "unknown" in p.decisions[2].why
    # On a 192 GiB Mac it fits; nobody measured it, so the 96 GiB floor is reserved.
    p = plan(machine=mac(192), overrides=asked, catalog=Ds4Entry(resident_bytes=60 * GIB))
    assert not p.ssd_streaming and not p.measured and p.reservation_bytes == 96 * GIB


def test_seed_streaming_is_the_default_even_on_128_gib_and_the_cache_follows_the_ram_tiers():
    for ram, tier in ((128, 64), (96, 48), (64, 32)):
        p = plan(machine=mac(ram), catalog=Ds4Entry(resident_bytes=10 * GIB))
        assert p.ssd_streaming and p.cache.requested_gb == tier


def test_seed_not_safe_when_the_minimum_cache_does_not_fit():
    p = plan(machine=mac(64), catalog=Ds4Entry(resident_bytes=50 * GIB, cache_experts_bytes=8 * GIB))
    assert isinstance(p, PlanRefusal)
    assert p.reason.startswith("ds4 is not safe to launch:") and "below its 1 GiB minimum" in p.reason


def test_a_measured_streaming_line_prices_the_cache_from_the_model_budget():
    line = Ds4Measurement(ssd_streaming=True, bytes=12 * GIB, ctx_tokens=131072, bytes_per_token=8 * 1024)
    p = plan(machine=mac(128), measured=(line,))
    budget = ds4_model_budget(mac(128))
    assert p.measured and p.cache.limit == "model-budget"
    assert p.cache.cache_gb == 64  # the 64 GiB tier fits beside the measured 12 GiB
    assert p.reservation_bytes == 12 * GIB + 64 * GIB <= budget
    tight = plan(machine=mac(128), measured=(line,), overrides=ModelOverrides(ds4_cache_gb=110))
    assert tight.cache.clamped and tight.cache.cache_gb == (budget - 12 * GIB) // GIB


def test_catalog_minimum_cache_survives_a_measured_line():
    catalog = Ds4Entry(streaming_memory=StreamingMemory(10 * GIB, 65536, 4096, min_cache_bytes=20 * GIB))
    line = Ds4Measurement(True, 95 * GIB, 131072, 8192)  # 112 GiB budget leaves 17
    p = plan(machine=mac(128), catalog=catalog, measured=(line,))
    assert isinstance(p, PlanRefusal) and "20 GiB minimum" in p.reason


# --- output -----------------------------------------------------------------------------------

def test_progress_from_real_ds4_lines():
    startup = parse_ds4_output((DATA / "cuda-startup.log").read_text().splitlines())
    assert [e.phase for e in startup][:2] == ["mapping", "mapping"]
    assert startup[0].bytes == round(80.76 * GIB)
    assert startup[-1].phase == "ready"
    prefill = parse_ds4_output((DATA / "prefill.log").read_text().splitlines())
    assert [(e.phase, e.done, e.total) for e in prefill] == [
        ("prefill", 18432, 123724), ("prefill", 1024, 10341), ("prefill", 5120, 10341)]
    assert prefill[-1].tokens_per_s == 144.49 and round(prefill[-1].fraction, 3) == 0.495
    decode = parse_ds4_output((DATA / "decode.log").read_text().splitlines())
    assert [(e.phase, e.done, e.tokens_per_s) for e in decode] == [("generating", 460, 5.96), ("generating", 510, 5.95)]
    rebuild = parse_ds4_line("0514 10:00:00 ds4-server: chat ctx=0..9000:9000 TOOLS tool checkpoint rebuild "
                             "chunk 2048/9000 (22.8%) chunk=300.00 t/s avg=290.10 t/s 7.1s")
    assert rebuild.phase == "rebuild" and rebuild.done == 2048
    assert parse_ds4_line("ds4: warming mapped tensor pages: 80.76 GiB").phase == "warming"
    assert parse_ds4_line("ds4: warmed tensor pages in 12.345s (checksum=42)").phase == "warmed"


def test_carriage_return_repaints_are_separate_lines():
    raw = (DATA / "core-repaint.log").read_bytes().decode()
    lines = [ln for ln in raw.split("\n") if ln]  # what a readline() loop hands over: repaints glued
    assert len(lines) == 1
    assert len(split_repaints(lines[0])) == 5
    events = parse_ds4_output(lines)
    assert [(e.phase, e.done, e.total) for e in events] == [
        ("prefill", 1, 3), ("prefill", 1, 3), ("prefill", 3, 3), ("prefill", 43, 43), ("generating", 460, None)]


def test_the_memory_line_becomes_a_measurement():
    line = parse_memory_line((DATA / "metal-memory.log").read_text().splitlines())
    assert line.total_bytes == round(43.20 * GIB) and line.kv_bytes == round(0.61 * GIB) and line.ctx == 32768
    full = Ds4Plan("/m", "metal", 32768, False, None, None, 96 * GIB, False, "/kv", 16384, (), ())
    m = measurement_from_line(line, full)
    assert m == Ds4Measurement(False, round(43.20 * GIB), 32768, round(0.61 * GIB / 32768))
    streamed = Ds4Plan("/m", "metal", 32768, True, 20, None, 30 * GIB, False, "/kv", 16384, (), ())
    assert measurement_from_line(line, streamed).bytes == round(43.20 * GIB) - 20 * GIB


@pytest.mark.parametrize("ram", [45, 64, 96, 128, 192, 256, 512])
def test_a_plan_never_reserves_more_than_the_model_budget(ram):
    for ov in (None, ModelOverrides(ds4_ssd_streaming=False), ModelOverrides(ds4_cache_gb=500)):
        p = plan(machine=mac(ram), overrides=ov)
        if isinstance(p, Ds4Plan):
            assert p.reservation_bytes <= ds4_model_budget(mac(ram))
