"""Blockers: CUDA driver vs build, ROCm gfx targets, missing runtimes, GPU unused, OOM."""

from __future__ import annotations

from stoker.diagnosis.blockers import (
    VC_REDIST_URL,
    blocker_from_incident,
    cuda_blocker,
    cuda_driver_missing,
    gpu_unused_blocker,
    missing_runtime_from_ldd,
    rocm_visibility_env,
    rocm_visible_devices,
    windows_vc_runtime_missing,
)
from stoker.diagnosis.classify import classify_exit
from stoker.diagnosis.exit_report import ExitReport
from stoker.diagnosis.views import BlockerView


def test_cuda_driver_below_the_build_runtime_blocks():
    b = cuda_blocker("12.8", "12.4")
    assert isinstance(b, BlockerView) and b.kind == "cudaBlocker"
    assert "12.8" in b.message and "12.4" in b.message and "driver" in b.advice
    assert cuda_blocker("12.4", "12.4") is None
    assert cuda_blocker("12.4", "13.0") is None
    assert cuda_blocker("12.8.1", "12.10") is None  # 12.10 > 12.8 numerically, not as text
    assert cuda_blocker(None, "12.4") is None and cuda_blocker("12.8", None) is None
    assert cuda_blocker("12.8", "CUDA Version: 11.8").kind == "cudaBlocker"


def test_rocm_hides_gpus_without_kernels():
    visible, blocker = rocm_visible_devices(["gfx1100", "gfx90a"], ["gfx1100", "gfx1031", "gfx90a:sramecc+:xnack-"])
    assert visible == (0, 2) and blocker is None
    assert rocm_visibility_env(visible, 3) == (("ROCR_VISIBLE_DEVICES", "0,2"),)
    assert rocm_visibility_env((0, 1), 2) == ()


def test_rocm_generic_targets_cover_their_family():
    visible, blocker = rocm_visible_devices(["gfx10-3-generic"], ["gfx1031"])
    assert visible == (0,) and blocker is None


def test_rocm_without_any_usable_gpu_is_a_blocker():
    visible, blocker = rocm_visible_devices(["gfx1100"], ["gfx1031", "gfx1031"])
    assert visible == () and blocker.kind == "rocmBlocker"
    assert "gfx1031" in blocker.message and "gfx1100" in blocker.message
    assert rocm_visibility_env(visible, 2) == (("ROCR_VISIBLE_DEVICES", "-1"),)
    assert rocm_visible_devices(None, ["gfx1031"]) == ((0,), None)


LDD = """\tlinux-vdso.so.1 (0x00007ffd)
\tlibcudart.so.12 => not found
\tlibcublas.so.12 => not found
\tlibcuda.so.1 => not found
\tlibggml-base.so => /e/libggml-base.so (0x00007f)
\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f)
"""


def test_ldd_not_found_is_a_missing_runtime_with_advice_per_library():
    b = missing_runtime_from_ldd(LDD)
    assert b.kind == "missingRuntime"
    assert "libcudart.so.12, libcublas.so.12, libcuda.so.1" in b.message
    assert "CUDA toolkit" in b.advice and "NVIDIA driver" in b.advice
    assert missing_runtime_from_ldd("\tlibc.so.6 => /lib/libc.so.6 (0x1)\n") is None
    assert "libvulkan1" in missing_runtime_from_ldd("\tlibvulkan.so.1 => not found").advice


def test_missing_libraries_of_the_binary_copied_alone():
    # What `ldd` prints for the binary without its libraries (the real-failure fixture).
    out = "\tlibllama-server-impl.so => not found\n\tlibllama.so.0 => not found\n"
    b = missing_runtime_from_ldd(out)
    assert "stoker setup" in b.advice


def test_windows_vc_runtime():
    b = windows_vc_runtime_missing(["VCRUNTIME140.dll", "kernel32.dll"])
    assert b.kind == "missingRuntime" and VC_REDIST_URL in b.advice
    assert "msvcp140.dll" in b.message and "vcruntime140_1.dll" in b.message
    assert windows_vc_runtime_missing(["vcruntime140.dll", "vcruntime140_1.dll", "MSVCP140.DLL"]) is None


def test_cuda_build_without_libcuda():
    assert cuda_driver_missing("cuda", False).kind == "missingRuntime"
    assert cuda_driver_missing("cuda", True) is None
    assert cuda_driver_missing("vulkan", False) is None


def test_gpu_unused_and_out_of_memory_from_incidents():
    unused = classify_exit(ExitReport(None, None, False, "ready", 5.0,
                                      ("warning: no usable GPU found, --gpu-layers option will be ignored",),
                                      "cuda", plan_wanted_gpu=True))
    b = blocker_from_incident(unused, "SmolLM2", "ready", "cuda")
    assert b.kind == "gpuUnused" and "CUDA build is running on the CPU" in b.message
    assert gpu_unused_blocker(None, "cuda") is None
    oom = classify_exit(ExitReport(None, "SIGKILL", False, "ready", 50.0, (), "cpu", oom_killed=True))
    b = blocker_from_incident(oom, "SmolLM2", "ready", "cpu")
    assert b.kind == "outOfMemory" and "SmolLM2" in b.message and "serving" in b.message
    port = classify_exit(ExitReport(1, None, False, "starting", 0.1,
                                    ("exiting due to HTTP server error",), "cpu"))
    assert blocker_from_incident(port, "m", "starting", "cpu") is None


def test_loader_incidents_become_health_blockers():
    from stoker.diagnosis.blockers import blocker_from_incident
    from stoker.diagnosis.classify import classify_exit, report_from_log

    stale = classify_exit(report_from_log(
        ["./llama-server: symbol lookup error: ./llama-server: undefined symbol: mtmd_get_cap_from_file"]))
    b = blocker_from_incident(stale, "m", "starting", "vulkan")
    assert b.kind == "libraryConflict" and "mtmd_get_cap_from_file" in b.message and "ldd" in b.advice
    old = classify_exit(report_from_log(
        ["./server: /lib/x86_64-linux-gnu/libstdc++.so.6: version `GLIBCXX_3.4.30' not found (required by ./server)"]))
    b = blocker_from_incident(old, "m", "starting", "cpu")
    assert b.kind == "missingRuntime" and "GLIBCXX_3.4.30" in b.message
