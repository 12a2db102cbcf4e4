"""classify_exit against real engine logs (tests/data/logs) and a table covering every kind."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stoker.diagnosis.classify import (
    KINDS,
    ExitReport,
    Incident,
    classify_exit,
    report_from_engine_exit,
)
from stoker.diagnosis.exit_codes import describe_exit_code, ntstatus_of
from stoker.diagnosis.log_lines import strip_log_prefix
from stoker.diagnosis.silent_fallbacks import gpu_unused_from_log
from stoker.engines.engine_exit import EngineExit

LOGS = Path(__file__).resolve().parents[1] / "data" / "logs"
CASES = json.loads((LOGS / "cases.json").read_text())


def report_for(name: str) -> ExitReport:
    c = CASES[name]
    return ExitReport(
        exit_code=c["exit_code"], signal=c["signal"], signalled_by_us=False, phase=c["phase"],
        uptime_s=None, log_tail=tuple((LOGS / f"{name}.log").read_text().splitlines()),
        backend=c["backend"], plan_wanted_gpu=c.get("plan_wanted_gpu", False),
        has_drafter=c.get("has_drafter", False), os=c.get("os", "linux"),
        oom_killed=c.get("oom_killed"),
    )


@pytest.mark.parametrize("name", sorted(CASES))
def test_fixture_logs_are_classified_as_their_kind(name):
    inc = classify_exit(report_for(name))
    assert inc.kind == CASES[name]["kind"], inc
    assert inc.title.endswith(".") and inc.advice
    assert inc.evidence


def test_evidence_is_the_line_that_shows_the_cause():
    assert classify_exit(report_for("port-in-use")).evidence.startswith(
        "srv         start: couldn't bind HTTP server socket, hostname: 127.0.0.1")
    assert classify_exit(report_for("unknown-flag")).evidence == "error: invalid argument: --no-mmap"
    assert "insufficient memory" in classify_exit(report_for("host-oom-rlimit")).evidence
    assert "cudaMalloc failed: out of memory" in classify_exit(report_for("cuda-oom-load")).evidence
    assert "not within the file bounds" in classify_exit(report_for("truncated-gguf")).evidence \
        or "failed to read key-value pairs" in classify_exit(report_for("truncated-gguf")).evidence
    assert "failed to load draft model" in classify_exit(report_for("drafter-truncated")).evidence
    assert "libllama" in classify_exit(report_for("missing-library")).evidence


def test_the_float_rounded_windows_exit_code_is_a_fast_fail():
    inc = classify_exit(report_for("windows-fast-fail"))
    assert "0xC0000409" in inc.exit_description
    assert "fast-fail" in inc.exit_description


# Every kind, from the smallest report that shows it.
def R(lines=(), code=None, sig=None, phase="starting", by_us=False, **kw) -> ExitReport:
    return ExitReport(exit_code=code, signal=sig, signalled_by_us=by_us, phase=phase,
                      uptime_s=1.0, log_tail=tuple(lines), backend=kw.pop("backend", "cpu"), **kw)


TABLE = [
    ("host-oom", R(["E ggml_backend_cpu_buffer_type_alloc_buffer: failed to allocate buffer of size 1"], 1)),
    ("host-oom", R(["terminate called after throwing an instance of 'std::bad_alloc'"], sig="SIGABRT")),
    ("host-oom", R(["I llama_kv_cache: CPU KV buffer size = 1440.00 MiB"], sig="SIGKILL")),
    ("host-oom", R([], sig="SIGKILL", phase="ready", oom_killed=True)),
    ("host-oom", R([], code=0xC0000017, os="windows")),
    ("cuda-oom", R(["CUDA error: out of memory"], sig="SIGABRT", phase="ready", backend="cuda")),
    ("cuda-oom", R(["E llama_init_from_model: failed to initialize the context: "
                    "failed to allocate buffer for kv cache"], 1, backend="cuda")),
    ("rocm-oom", R(["ROCm error: out of memory"], sig="SIGABRT", backend="rocm")),
    ("rocm-oom", R(["allocating 1.00 MiB on device 0: cudaMalloc failed: out of memory"], 1, backend="rocm")),
    ("vulkan-oom", R(["ggml_vulkan: vk::Device::allocateMemory: ErrorOutOfDeviceMemory"], 1, backend="vulkan")),
    ("metal-oom", R(["ggml_backend_metal_buffer_type_alloc_buffer: failed to allocate Metal buffer of 5 bytes "
                     "(out of memory)"], 1, backend="metal", os="darwin")),
    ("cuda-driver-too-old", R(["CUDA error: CUDA driver version is insufficient for CUDA runtime version"],
                              sig="SIGABRT", backend="cuda")),
    ("no-kernel-image", R(["ERROR: CUDA kernel mul_mat has no device code compatible with CUDA arch 520. "
                           "ggml-cuda.cu was compiled for: 890"], sig="SIGTRAP", backend="cuda")),
    ("missing-library", R(["./llama-server: error while loading shared libraries: libcudart.so.12: cannot open "
                           "shared object file: No such file or directory"], 127)),
    ("missing-library", R([], code=-1073741515, os="windows")),
    ("stale-library", R(["./llama-server: symbol lookup error: ./llama-server: "
                         "undefined symbol: llama_vocab_eos"], 127)),
    ("stale-library", R([], code=0xC0000139, os="windows")),
    ("system-too-old", R(["./llama-server: /lib/x86_64-linux-gnu/libc.so.6: version `GLIBC_2.38' not found "
                          "(required by ./llama-server)"], 1)),
    ("illegal-instruction", R([], sig="SIGILL")),
    ("illegal-instruction", R([], code=-4)),
    ("illegal-instruction", R([], code=0xC000001D, os="windows")),
    ("bad-model", R(["E llama_model_load: error loading model: unknown model architecture: 'qwen9'"], 1)),
    ("bad-model", R(["E gguf_init_from_file: failed to open GGUF file '/m.gguf' (No such file or directory)"], 1)),
    ("port-in-use", R(["E srv  llama_server: exiting due to HTTP server error"], 1)),
    ("bad-argument", R(["error while handling argument \"-ctk\": Unsupported cache type: q3"], 1)),
    ("bad-argument", R(["E llama_init_from_model: quantized V cache requires flash_attn to be enabled"], 1)),
    ("drafter-failure", R(["E srv    load_model: failed to load draft model, '/d.gguf'"], 1, has_drafter=True)),
    ("drafter-failure", R([], sig="SIGSEGV", has_drafter=True)),
    ("gpu-unused", R(["warning: no usable GPU found, --gpu-layers option will be ignored"], backend="cuda",
                     phase="ready")),
    ("gpu-unused", R(["I load_tensors: offloaded 0/31 layers to GPU"], code=0, phase="stopping", by_us=True,
                     backend="vulkan", plan_wanted_gpu=True)),
    ("startup-timeout", R(["I load_tensors: loading model tensors"], sig="SIGKILL", by_us=True, timed_out=True)),
    ("assertion-failed", R(["ggml/src/ggml.c:1752: GGML_ASSERT(x) failed"], sig="SIGABRT")),
    # The real engine's lines: a worker killed while serving, and one gone before the start.
    ("rpc-worker-lost", R(["/src/llama.cpp/ggml/src/ggml-rpc/ggml-rpc.cpp:569: Remote RPC server crashed or "
                           "returned malformed response"], sig="SIGABRT", phase="ready")),
    ("rpc-worker-lost", R(["/src/llama.cpp/ggml/src/ggml-rpc/ggml-rpc.cpp:547: Failed to connect to "
                           "127.0.0.1:50052"], sig="SIGABRT")),
    ("gpu-error", R(["CUDA error: an illegal memory access was encountered"], sig="SIGILL", backend="cuda")),
    ("gpu-error", R(["ggml_vulkan: device lost on Vulkan0"], sig="SIGABRT", phase="ready", backend="vulkan")),
    ("stopped", R(["I srv  llama_server: listening on http://127.0.0.1:1"], code=0, phase="stopping", by_us=True)),
    ("stopped", R([], sig="SIGTERM", by_us=True)),
    ("unknown", R(["I srv    load_model: loading model '/m.gguf'"], sig="SIGSEGV")),
    ("unknown", R([], code=0xC0000409, os="windows")),
]


@pytest.mark.parametrize("kind,report", TABLE, ids=[f"{k}-{i}" for i, (k, _) in enumerate(TABLE)])
def test_table(kind, report):
    inc = classify_exit(report)
    assert inc.kind == kind, inc
    assert isinstance(inc, Incident) and inc.title and inc.advice and inc.exit_description


def test_the_table_covers_every_kind():
    assert {k for k, _ in TABLE} == set(KINDS)
    assert {c["kind"] for c in CASES.values()} >= {
        "host-oom", "cuda-oom", "vulkan-oom", "metal-oom", "rocm-oom", "cuda-driver-too-old",
        "no-kernel-image", "missing-library", "illegal-instruction", "bad-model", "port-in-use",
        "bad-argument", "drafter-failure", "gpu-unused"}


def test_port_model_and_argument_failures_never_count_against_the_build():
    for name in ("port-in-use", "truncated-gguf", "unknown-flag"):
        assert not classify_exit(report_for(name)).counts_as_strike, name
    for name in ("missing-library", "silent-sigill", "no-kernel-image-cuda", "cuda-driver-too-old"):
        inc = classify_exit(report_for(name))
        assert inc.counts_as_strike and inc.recoverable_by == "next-build", name


def test_out_of_memory_is_recovered_with_a_smaller_plan_not_a_strike():
    for name in ("host-oom-rlimit", "host-oom-cgroup", "cuda-oom-load", "vulkan-oom-load"):
        inc = classify_exit(report_for(name))
        assert inc.recoverable_by == "smaller-plan" and not inc.counts_as_strike, name


def test_a_catalog_drafter_is_blamed_before_the_build_and_a_forced_one_is_not_dropped():
    crash = R([], sig="SIGSEGV", has_drafter=True)
    inc = classify_exit(crash)
    assert inc.kind == "drafter-failure" and inc.recoverable_by == "drop-drafter"
    assert not inc.counts_as_strike
    forced = classify_exit(R(["failed to load draft model, '/d.gguf'"], 1, has_drafter=True,
                             drafter_forced=True))
    assert forced.kind == "drafter-failure" and forced.recoverable_by is None
    # The same crash without a drafter is a start-up crash of the build.
    assert classify_exit(R([], sig="SIGSEGV")).counts_as_strike


def test_a_crash_while_serving_is_not_a_strike():
    assert not classify_exit(R([], sig="SIGSEGV", phase="ready")).counts_as_strike


def test_sigkill_known_not_to_be_the_oom_killer_is_not_called_oom():
    assert classify_exit(R([], sig="SIGKILL", oom_killed=False)).kind == "unknown"


def test_gpu_unused_needs_a_gpu_build_or_a_gpu_plan():
    line = "ggml_vulkan: No devices found."
    assert gpu_unused_from_log([line], "cpu", False) is None  # a CPU build's discovery: normal
    assert gpu_unused_from_log([line], "vulkan", True) == line
    # layers asked of a build that cannot offload: the GPU unused whatever the build
    ignored = "warning: no usable GPU found, --gpu-layers option will be ignored"
    assert gpu_unused_from_log([ignored], "cpu", False) == ignored
    assert gpu_unused_from_log(["I load_tensors: offloaded 0/33 layers to GPU"], None, True)
    assert gpu_unused_from_log(["I load_tensors: offloaded 33/33 layers to GPU"], "cuda", True) is None


@pytest.mark.parametrize("code", [3221226505, -1073740791, 18446744072635810825,
                                  18446744072635812000, 18446744072635812873])
def test_every_form_of_0xC0000409_decodes(code):
    assert ntstatus_of(code) == 0xC0000409
    assert describe_exit_code(code, "windows").startswith("exit code 0xC0000409 (STATUS_STACK_BUFFER_OVERRUN")


def test_posix_exit_descriptions():
    assert describe_exit_code(-9, "linux").startswith("ended by SIGKILL")
    assert describe_exit_code(-4, "linux").startswith("ended by SIGILL")
    assert "SIGKILL" in describe_exit_code(137, "linux")
    assert "shared libraries" in describe_exit_code(127, "linux")
    assert describe_exit_code(1, "linux") == "exit code 1"
    assert describe_exit_code(None) == "the exit status is unknown"
    assert ntstatus_of(1) is None and ntstatus_of(-9) is None
    assert describe_exit_code(0xC0000135, "windows").startswith("exit code 0xC0000135 (STATUS_DLL_NOT_FOUND")


def test_log_prefix_is_stripped():
    assert strip_log_prefix("0.00.204.629 E ggml_aligned_malloc: x") == "ggml_aligned_malloc: x"


def test_report_from_the_supervisors_engine_exit():
    ex = EngineExit(pid=1, exit_code=None, signal=9, signalled_by_us=False, phase="ready",
                    uptime_s=30.0, ready_for_s=20.0, log_tail=("I srv  llama_server: model loaded",))
    rep = report_from_engine_exit(ex, backend="cpu")
    assert rep.signal == "SIGKILL" and rep.exit_code is None
    inc = classify_exit(rep)
    assert inc.kind == "host-oom" and "while serving" in inc.title
