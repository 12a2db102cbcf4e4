"""Parsing `--list-devices`, nvidia-smi and KFD text, and deciding memory kind and unified memory."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stoker.planning.devices import (
    GIB,
    MIB,
    AmdGpu,
    NvidiaGpu,
    backend_from_device_name,
    classify_device_kind,
    decide_unified_memory,
    devices_from_amd_sysfs,
    devices_from_nvidia_smi,
    gfx_target_from_version,
    list_devices_notes,
    merge_amd_facts,
    merge_nvidia_facts,
    parse_kfd_properties,
    parse_list_devices,
    parse_nvidia_smi,
    parse_nvidia_smi_cuda_version,
    parse_rocminfo,
)
from stoker.planning.machine import Device

MIXED = """\
ggml_cuda_init: found 1 CUDA devices:
  Device 0: NVIDIA GeForce RTX 4090, compute capability 8.9, VMM: yes
load_backend: loaded CUDA backend from /opt/llama/libggml-cuda.so
Available devices:
  CUDA0: NVIDIA GeForce RTX 4090 (24080 MiB, 23517 MiB free)
  Vulkan0: AMD Radeon RX 6800 XT (RADV NAVI21) (16368 MiB, 16000 MiB free)
  BLAS: OpenBLAS (0 MiB, 0 MiB free)
  SYCL0: Intel(R) Arc(TM) A770 Graphics (16225 MiB, 15000 MiB free)
"""


def test_parses_each_gpu_line_with_total_first():
    devices = parse_list_devices(MIXED)
    assert [d.name for d in devices] == ["CUDA0", "Vulkan0", "SYCL0"]
    cuda = devices[0]
    assert cuda.description == "NVIDIA GeForce RTX 4090"
    assert cuda.backend == "cuda"
    assert cuda.total_bytes == 24080 * MIB and cuda.free_bytes == 23517 * MIB
    assert cuda.kind == "discrete"


def test_description_with_parentheses_uses_the_last_group():
    (vk,) = parse_list_devices("Available devices:\n"
                               "  Vulkan0: AMD Radeon RX 6800 XT (RADV NAVI21) (16368 MiB, 16000 MiB free)\n")
    assert vk.description == "AMD Radeon RX 6800 XT (RADV NAVI21)"
    assert vk.total_bytes == 16368 * MIB and vk.free_bytes == 16000 * MIB
    assert vk.backend == "vulkan"


def test_none_and_noise_give_no_devices():
    assert parse_list_devices("Available devices:\n  (none)\n") == ()
    assert parse_list_devices("") == ()
    assert parse_list_devices("warning: something (12 MiB)\nerror: (1 MiB, 2 MiB)\n") == ()


def test_blas_and_zero_memory_devices_are_not_gpus_and_are_explained():
    out = "Available devices:\n  BLAS: OpenBLAS (0 MiB, 0 MiB free)\n  CUDA0: NVIDIA GB10 (0 MiB, 0 MiB free)\n"
    assert parse_list_devices(out) == ()
    notes = list_devices_notes(out)
    assert len(notes) == 2
    assert "CPU math library" in notes[0]
    assert "CUDA0" in notes[1] and "did not report its memory" in notes[1]


def test_metal_and_rpc_devices():
    out = ("Available devices:\n  MTL0: Apple M2 Max (49152 MiB, 49100 MiB free)\n"
           "  RPC0: 192.168.1.5:50052 (8000 MiB, 7000 MiB free)\n")
    mtl, rpc = parse_list_devices(out)
    assert mtl.backend == "metal" and mtl.kind == "integrated"
    assert rpc.backend == "rpc"


@pytest.mark.parametrize(
    "name,backend",
    [("CUDA1", "cuda"), ("ROCm0", "rocm"), ("Vulkan2", "vulkan"), ("MTL0", "metal"), ("SYCL0", "sycl"),
     ("GPUOpenCL", "opencl"), ("MUSA0", "other"), ("CANN0", "other"), ("RPC0", "rpc"), ("BLAS", "blas"),
     ("Mystery0", "other")],
)
def test_backend_from_name_prefix(name, backend):
    assert backend_from_device_name(name) == backend


@pytest.mark.parametrize(
    "description,kind",
    [
        ("NVIDIA GeForce RTX 4090", "discrete"),
        ("Quadro RTX 5000", "discrete"),
        ("NVIDIA GB10", "integrated"),
        ("NVIDIA Jetson AGX Orin", "integrated"),
        ("AMD Radeon RX 7900 XTX", "discrete"),
        ("AMD Radeon RX 6800 XT (RADV NAVI21)", "discrete"),
        ("AMD Radeon VII", "discrete"),
        ("AMD Radeon PRO W7900", "discrete"),
        ("AMD Radeon AI PRO R9700", "discrete"),
        ("AMD Instinct MI300X", "discrete"),
        ("AMD FirePro W9100", "discrete"),
        ("AMD Radeon Graphics (RADV GFX1103_R1)", "integrated"),
        ("AMD Radeon(TM) Graphics", "integrated"),
        ("AMD Radeon Vega 8 Graphics", "integrated"),
        ("AMD Radeon 780M", "integrated"),
        ("Intel(R) Arc(TM) A770 Graphics", "discrete"),
        ("Intel(R) Arc(TM) B580 Graphics", "discrete"),
        ("Intel(R) Arc(TM) Pro A60 Graphics", "discrete"),
        ("Intel(R) Arc(TM) Graphics", "integrated"),
        ("Intel(R) UHD Graphics 770", "integrated"),
        ("Qualcomm(R) Adreno(TM) X1-85 GPU", "integrated"),
        ("Apple M3 Pro", "integrated"),
        ("llvmpipe (LLVM 15.0.6, 256 bits)", "unknown"),
    ],
)
def test_memory_kind_from_name(description, kind):
    assert classify_device_kind("Vulkan0", description) == kind


def test_intel_is_never_labelled_amd():
    # "Intel ... Graphics" must not hit the AMD "Radeon Graphics"-style rule.
    assert classify_device_kind("SYCL0", "Intel(R) Iris(R) Xe Graphics") == "integrated"


NVSMI = """\
0, NVIDIA GeForce RTX 4090, 24564, 23000, 8.9, 550.54.14
1, NVIDIA RTX A4000, 16376 MiB, 16000 MiB, 8.6, 550.54.14
"""


def test_parse_nvidia_smi_rows_and_units():
    a, b = parse_nvidia_smi(NVSMI)
    assert a == NvidiaGpu(0, "NVIDIA GeForce RTX 4090", 24564 * MIB, 23000 * MIB, "8.9", "550.54.14")
    assert b.total_bytes == 16376 * MIB and b.compute_cap == "8.6"


def test_parse_nvidia_smi_gb10_reports_memory_as_unknown_not_zero():
    (g,) = parse_nvidia_smi("0, NVIDIA GB10, [N/A], [N/A], 12.1, 580.95.05\n")
    assert g.total_bytes is None and g.free_bytes is None
    assert g.compute_cap == "12.1"


def test_parse_nvidia_smi_skips_header_and_garbage():
    text = "index, name, memory.total [MiB], memory.free [MiB], compute_cap, driver_version\nNVIDIA-SMI has failed\n"
    assert parse_nvidia_smi(text) == ()


def test_cuda_version_from_header():
    header = "| NVIDIA-SMI 550.54.14    Driver Version: 550.54.14    CUDA Version: 12.4     |"
    assert parse_nvidia_smi_cuda_version(header) == "12.4"
    assert parse_nvidia_smi_cuda_version("no driver") is None


@pytest.mark.parametrize(
    "version,gfx", [(110000, "gfx1100"), (90010, "gfx90a"), (90402, "gfx942"), (100300, "gfx1030"),
                    (110501, "gfx1151"), (0, None)]
)
def test_gfx_target_from_version(version, gfx):
    assert gfx_target_from_version(version) == gfx


def test_parse_kfd_properties():
    text = "cpu_cores_count 0\nsimd_count 192\ngfx_target_version 110000\nvendor_id 4098\n"
    assert parse_kfd_properties(text) == "gfx1100"
    assert parse_kfd_properties("cpu_cores_count 16\ngfx_target_version 0\n") is None
    assert parse_kfd_properties("") is None


def test_parse_rocminfo():
    text = ("Agent 1\n  Name:                    AMD Ryzen 9\n"
            "Agent 2\n  Name:                    gfx1100\n  Marketing Name: AMD Radeon RX 7900 XTX\n")
    assert parse_rocminfo(text) == ("gfx1100",)


def test_merge_nvidia_facts_by_index_and_name():
    devices = parse_list_devices(MIXED)
    gpus = parse_nvidia_smi(NVSMI)
    merged = merge_nvidia_facts(devices, gpus, "12.4")
    cuda = merged[0]
    assert cuda.compute_cap == "8.9" and cuda.driver_cuda_version == "12.4"
    assert cuda.free_bytes == 23000 * MIB  # live from nvidia-smi
    assert cuda.total_bytes == 24080 * MIB  # the engine's total stands
    assert merged[1].compute_cap is None  # the AMD Vulkan device is left alone


def test_merge_nvidia_vulkan_device_by_name():
    (vk,) = parse_list_devices("  Vulkan0: NVIDIA RTX A4000 (16376 MiB, 16000 MiB free)\n")
    (merged,) = merge_nvidia_facts((vk,), parse_nvidia_smi(NVSMI), None)
    assert merged.compute_cap == "8.6" and merged.driver_cuda_version is None


def test_merge_nvidia_keeps_engine_free_when_smi_does_not_know():
    (cuda,) = parse_list_devices("  CUDA0: NVIDIA GB10 (120000 MiB, 100000 MiB free)\n")
    (merged,) = merge_nvidia_facts((cuda,), parse_nvidia_smi("0, NVIDIA GB10, [N/A], [N/A], 12.1, 580\n"), "13.0")
    assert merged.free_bytes == 100000 * MIB and merged.compute_cap == "12.1"


def test_merge_amd_facts():
    out = ("  ROCm0: AMD Radeon RX 7900 XTX (24560 MiB, 24430 MiB free)\n"
           "  ROCm1: AMD Radeon RX 6800 (16368 MiB, 16000 MiB free)\n")
    a, b = merge_amd_facts(parse_list_devices(out), ("gfx1100", "gfx1030"))
    assert (a.gfx_target, b.gfx_target) == ("gfx1100", "gfx1030")
    (vk,) = merge_amd_facts(parse_list_devices(MIXED)[1:2], ("gfx1030",))
    assert vk.gfx_target == "gfx1030"
    assert merge_amd_facts(parse_list_devices(MIXED), ()) == parse_list_devices(MIXED)


def test_devices_from_vendor_tools():
    (d,) = devices_from_nvidia_smi(parse_nvidia_smi(NVSMI)[:1], "12.4")
    assert d.name == "nvidia0" and d.backend == "cuda" and d.kind == "discrete"
    assert d.driver_cuda_version == "12.4"
    (a,) = devices_from_amd_sysfs((AmdGpu("gfx1100", 24 * GIB, 1 * GIB),))
    assert a.gfx_target == "gfx1100" and a.free_bytes == 23 * GIB
    (u,) = devices_from_amd_sysfs((AmdGpu(None, None, None),))
    assert u.total_bytes is None and u.free_bytes is None


def _gpu(desc, total_gib, kind=None, backend="vulkan"):
    kind = kind or classify_device_kind("", desc)
    return Device("Vulkan0", desc, backend, total_gib * GIB, total_gib * GIB, kind)


def test_unified_memory_decisions():
    assert decide_unified_memory("darwin", "arm64", (), 64 * GIB)
    assert not decide_unified_memory("darwin", "x86_64", (), 64 * GIB)
    assert decide_unified_memory("linux", "arm64", (_gpu("NVIDIA GB10", 100, backend="cuda"),), 128 * GIB)
    assert decide_unified_memory("linux", "x86_64", (_gpu("AMD Radeon 780M", 8),), 64 * GIB)
    # An iGPU beside a card: the engine uses the card, so memory is not unified.
    assert not decide_unified_memory(
        "linux", "x86_64", (_gpu("AMD Radeon 780M", 8), _gpu("NVIDIA GeForce RTX 4090", 24)), 64 * GIB
    )
    # A GPU reporting most of RAM is a shared pool whatever its name.
    assert decide_unified_memory("linux", "x86_64", (_gpu("Mystery GPU", 48),), 64 * GIB)
    assert not decide_unified_memory("linux", "x86_64", (_gpu("NVIDIA GeForce RTX 4090", 24),), 64 * GIB)
    # A named card stays discrete even when it is as large as RAM.
    assert not decide_unified_memory("linux", "x86_64", (_gpu("NVIDIA GeForce RTX 4090", 24),), 24 * GIB)
    assert not decide_unified_memory("linux", "x86_64", (), 64 * GIB)


@given(st.text(max_size=300))
def test_parser_never_raises_on_any_text(text):
    for d in parse_list_devices(text):
        assert d.total_bytes is not None and d.total_bytes >= 0
