"""The root-cause order (stoker/diagnosis/evidence.py ORDER) and the catalogue behind it.

Each order rule has a log where it decides; the same log read with that one rule reversed
must give another answer, so a wrong order fails these tests. The issue-23 misreadings
(drafter as bad-model, Metal OOM as an assertion, an old CUDA driver as a GPU error or an
OOM, a RADV OOM before a device loss as a bad model, a library-version error as an old
glibc, ROCm without kernels for the gfx as a GPU error) and its unknowns (OOM-killer lines,
NTSTATUS in decimal, wrapper port conflicts, HipVMM, Metal buffer validation) each have a case.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from stoker.diagnosis import (
    catalogue,
    classify,
    crash_reports,
    evidence,
    exit_codes,
    open_readings,
    silent_fallbacks,
)
from stoker.diagnosis.classify import KINDS, classify_exit, report_from_log
from stoker.diagnosis.evidence import ORDER, LoadPlace, decide, draft_scoped, gather, rule_between
from stoker.diagnosis.log_lines import backend_from_log, strip_log_prefix
from stoker.diagnosis.wordings import runtime_tables


def verdict(lines, order=ORDER):
    return decide(draft_scoped(lines, gather(lines, strip_log_prefix)), order)


def flipped(name):
    """ORDER with one rule reversed: its echoes become the causes."""
    assert any(r.name == name for r in ORDER), name
    return tuple(replace(r, causes=r.echoes, echoes=r.causes) if r.name == name else r for r in ORDER)


def without(name):
    return tuple(r for r in ORDER if r.name != name)


CUDA_OOM = ("ggml_backend_cuda_buffer_type_alloc_buffer: allocating 9000.00 MiB on device 0: "
            "cudaMalloc failed: out of memory")

# rule name -> (log lines, the kind the rule makes win)
RULE_CASES = {
    "build-fault-first": (
        ("CUDA error: CUDA driver version is insufficient for CUDA runtime version", CUDA_OOM),
        "cuda-driver-too-old"),
    "lost-worker-first": (
        ("Remote RPC server crashed or returned malformed response",
         "CUDA error: an illegal memory access was encountered"), "rpc-worker-lost"),
    "drafter-before-its-echoes": (
        ("srv    load_model: failed to load draft model, '/m/draft.gguf'", "GGML_ASSERT(ctx) failed"),
        "drafter-failure"),
    "device-lost-is-the-allocation": (
        ("radv/amdgpu: Not enough memory for command submission.",
         "ggml_vulkan: vk::Queue::submit: ErrorDeviceLost"), "vulkan-oom"),
    "allocation-before-abort": (
        ("error: Insufficient Memory (00000008:kIOGPUCommandBufferCallbackErrorOutOfMemory)",
         "/ggml/src/ggml-metal/ggml-metal-context.m:612: GGML_ASSERT(false) failed"), "metal-oom"),
    "allocation-inside-load-error": (
        ("ggml_backend_cpu_buffer_type_alloc_buffer: failed to allocate buffer of size 34359738368",
         "Error: llama runner process has terminated: error loading model: failed to load model"), "host-oom"),
    "memory-over-optional-backend": (
        ("load_backend: failed to load libggml-cuda.so: libcuda.so.1: cannot open shared object file",
         "ggml_aligned_malloc: insufficient memory (attempted to allocate 9000.00 MB)"), "host-oom"),
    "versioned-symbol-over-cannot-open": (
        ("./llama-server: /lib/x86_64-linux-gnu/libc.so.6: version `GLIBC_2.38' not found "
         "(required by ./libggml-base.so)",
         "./llama-server: error while loading shared libraries: libggml.so: cannot open shared object file"),
        "system-too-old"),
    "symbol-over-cannot-open": (
        ("load_backend: failed to load libggml-vulkan.so: libvulkan.so.1: cannot open shared object file",
         "./llama-server: symbol lookup error: ./llama-server: undefined symbol: llama_model_n_swa"),
        "stale-library"),
    "loader-before-load": (
        ("The specified module could not be found.", "GGML_ASSERT(backend) failed"), "missing-library"),
    "port-before-its-exit": (
        ("couldn't bind HTTP server socket, hostname: 127.0.0.1, port: 8080",
         "terminate called without an active exception"), "port-in-use"),
    "argument-before-load": (
        ("error: invalid argument: --n-cpu-moe", "gguf_init_from_file_impl: failed to open GGUF file"),
        "bad-argument"),
    "load-error-before-abort": (
        ("gguf_init_from_file_impl: invalid magic characters: 'lmgg', expected 'GGUF'",
         "GGML_ASSERT(model) failed"), "bad-model"),
    "timeout-over-stop": (
        ("[WARN] <qwen> health check timed out after 120s", "[INFO] <qwen> Unloading model, TTL of 300s reached"),
        "startup-timeout"),
    "gpu-error-before-its-abort": (
        ("CUDA error: an illegal memory access was encountered", "GGML_ASSERT(ne % 2 == 0) failed"),
        "gpu-error"),
    "named-device-over-unnamed": (
        ("Error: 500 Internal Server Error: failed to commit memory for model", CUDA_OOM), "gpu-oom"),
}


def test_every_order_rule_has_a_case():
    assert set(RULE_CASES) | {"allocation-named-by-its-first-line"} == {r.name for r in ORDER}


@pytest.mark.parametrize("name", sorted(RULE_CASES))
def test_the_rule_decides_its_case(name):
    lines, kind = RULE_CASES[name]
    v = verdict(lines)
    assert (v.kind, v.rule) == (kind, name)


@pytest.mark.parametrize("name", sorted(RULE_CASES))
def test_the_rule_reversed_gives_another_answer(name):
    lines, kind = RULE_CASES[name]
    assert verdict(lines, flipped(name)).kind != kind


@pytest.mark.parametrize("name", sorted(RULE_CASES))
def test_the_cause_wins_whichever_line_comes_first(name):
    lines, kind = RULE_CASES[name]
    assert verdict(tuple(reversed(lines))).kind == kind


def test_the_first_failing_allocation_is_the_root_cause():
    lines = ("ggml_aligned_malloc: insufficient memory (attempted to allocate 512.00 MB)", CUDA_OOM)
    v = verdict(lines)
    assert (v.kind, v.rule) == ("host-oom", "allocation-named-by-its-first-line")
    assert verdict(tuple(reversed(lines))).kind == "gpu-oom"
    # without the rule the two allocations are two causes no rule ranks: unknown, not a guess
    assert verdict(lines, without("allocation-named-by-its-first-line")).kind == "unknown"


def test_unranked_causes_are_unknown_with_both_candidates():
    v = verdict(("error: invalid argument: --cache-type-k q9", CUDA_OOM))
    assert v.kind == "unknown" and v.rule == "conflict"
    assert {p.kind for p in v.candidates} == {"bad-argument", "gpu-oom"}
    inc = classify_exit(report_from_log(("error: invalid argument: --cache-type-k q9", CUDA_OOM),
                                        exit_code=1, backend="cuda"))
    assert inc.kind == "unknown" and set(inc.candidates) == {"bad-argument", "gpu-oom"}
    assert "--cache-type-k" in inc.evidence and "cudaMalloc" in inc.evidence
    assert "does not guess" in inc.title and len(inc.evidence_lines) == 2


def test_a_weak_sign_alone_never_decides():
    lines = ("ValueError: Failed to load model from file: /m/x.gguf",)
    v = verdict(lines)
    assert v.kind is None and v.rule == "weak-evidence" and len(v.pieces) == 1
    inc = classify_exit(report_from_log(lines, exit_code=1))
    assert inc.kind == "unknown" and inc.rule == "exit"
    # the weak sign is shown as the candidate, not named
    assert inc.candidates == ("bad-model",) and "Failed to load model" in inc.evidence
    assert "does not name a kind" in inc.title and inc.evidence_lines == lines
    # nor outweighs a decisive line, even one an order rule would put below it
    assert verdict(("ValueError: Failed to load model from file: /m/x.gguf", CUDA_OOM)).kind == "gpu-oom"


def test_the_catalogue_is_well_formed():
    names = [e.name for e in catalogue.ENTRIES]
    assert len(names) == len(set(names)) and len(names) > 80
    known = set(KINDS) | {"gpu-oom", "device-oom"}
    for e in catalogue.ENTRIES:
        assert e.kind in known, e.name
        assert e.source and e.proves, e.name
    assert rule_between("system-too-old", "missing-library").name == "versioned-symbol-over-cannot-open"
    assert runtime_tables.CUDA_ERRORS["cudaErrorInsufficientDriver"] == (35, "cuda-driver-too-old")
    assert runtime_tables.VK_RESULTS["VK_ERROR_DEVICE_LOST"][0] == -4


# ------------------------------------------------------------- the issue's misreadings

def diagnose(*lines, exit_code=None, signal=None, os="linux", backend=None, phase=None):
    return classify_exit(report_from_log(lines, exit_code=exit_code, signal=signal, os=os,
                                         backend=backend, phase=phase))


def test_a_drafter_that_fails_to_load_is_the_drafter_not_a_bad_model():
    inc = diagnose("srv    load_model: loading draft model '/m/draft-q4.gguf'",
                   "llama_model_load: error loading model: error loading model vocabulary: unknown "
                   "pre-tokenizer type: 'qwen35'",
                   "llama_model_load_from_file_impl: failed to load model", exit_code=1)
    assert inc.kind == "drafter-failure" and "pre-tokenizer" in inc.evidence
    # the same load error for the target model is a bad model
    assert diagnose("srv    load_model: loading model '/m/main.gguf'",
                    "llama_model_load: error loading model: error loading model vocabulary: unknown "
                    "pre-tokenizer type: 'qwen35'", exit_code=1).kind == "bad-model"
    assert diagnose("main: unable to load draft model", "error loading model: missing tensor 'x'",
                    exit_code=1).kind == "drafter-failure"


def test_metal_out_of_memory_is_metal_oom_not_an_assertion():
    inc = diagnose("ggml_metal_graph_compute: command buffer 0 failed with status 5",
                   "error: Insufficient Memory (00000008:kIOGPUCommandBufferCallbackErrorOutOfMemory)",
                   "GGML_ASSERT(false) failed", signal="SIGABRT")
    assert inc.kind == "metal-oom"
    assert diagnose("-[MTLDebugDevice newBufferWithBytesNoCopy:length:options:deallocator:]:700: "
                    "failed assertion `Buffer Validation", signal="SIGABRT").kind == "metal-oom"


def test_an_old_cuda_driver_is_its_own_kind():
    assert diagnose("ggml_cuda_init: failed to initialize CUDA: CUDA driver version is insufficient "
                    "for CUDA runtime version", CUDA_OOM, "CUDA error: out of memory",
                    exit_code=1).kind == "cuda-driver-too-old"
    assert diagnose("CUDA error 35 at ggml-cuda.cu:1234: cudaErrorInsufficientDriver",
                    "GGML_ASSERT: ggml-cuda.cu:1234: !\"CUDA error\"", exit_code=134).kind == "cuda-driver-too-old"


def test_a_radv_out_of_memory_before_a_device_loss_is_vulkan_oom():
    inc = diagnose("ggml_vulkan: Found 1 Vulkan devices:",
                   "radv/amdgpu: Not enough memory for command submission.",
                   "llama_model_load: error loading model: vk::Queue::submit: ErrorDeviceLost",
                   exit_code=1)
    assert inc.kind == "vulkan-oom" and "Not enough memory" in inc.evidence
    # the device loss alone, wrapped in a load error, is a GPU error, not a bad model
    assert diagnose("llama_model_load: error loading model: vk::Queue::submit: ErrorDeviceLost",
                    exit_code=1).kind == "gpu-error"


def test_a_library_version_node_missing_is_the_missing_library_not_an_old_glibc():
    inc = diagnose("./llama-server: /usr/local/cuda/lib64/libcudart.so.11.0: version `libcudart.so.12' "
                   "not found (required by ./libggml-cuda.so)", exit_code=1)
    assert inc.kind == "missing-library"
    assert diagnose("./llama-server: /lib/x86_64-linux-gnu/libm.so.6: version `GLIBC_2.38' not found "
                    "(required by ./llama-server)", exit_code=1).kind == "system-too-old"


def test_rocm_without_kernels_for_the_gfx_is_no_kernel_image():
    for line in ("ROCm error: shared object initialization failed",
                 "hipErrorNoBinaryForGpu: Unable to find code object for all current devices!",
                 "rocBLAS error: Cannot read /opt/rocm/lib/rocblas/library/TensileLibrary.dat: "
                 "No such file or directory for GPU arch : gfx1103"):
        inc = diagnose("ggml_cuda_init: found 1 ROCm devices:", line,
                       "GGML_ASSERT(false) failed", signal="SIGABRT")
        assert inc.kind == "no-kernel-image", line


def test_the_former_unknowns_are_named():
    assert diagnose("Out of memory: Killed process 4242 (llama-server) total-vm:70123456kB, "
                    "anon-rss:6000000kB", signal="SIGKILL").kind == "host-oom"
    assert diagnose("systemd-oomd[812]: Killed /user.slice/app.scope due to memory pressure",
                    signal="SIGKILL").kind == "host-oom"
    assert diagnose("time=2025 level=ERROR msg=\"llama runner terminated\" error=\"exit status 3221225781\"",
                    os="windows").kind == "missing-library"
    assert diagnose("Process exited with code -1073741515", os="windows").kind == "missing-library"
    assert diagnose("Error: listen tcp 127.0.0.1:11434: bind: address already in use",
                    exit_code=1).kind == "port-in-use"
    # HipVMM: read since spent batch 19 as ROCm's VMM pool, open between its memory and a
    # ROCm fault when out of memory, a GPU runtime error otherwise (tests at the end)
    inc = diagnose("ggml_cuda_init: found 1 ROCm devices:", "HipVMM Failure: hipErrorOutOfMemory",
                   signal="SIGABRT")
    assert inc.kind == "unknown" and inc.candidates == ("rocm-oom", "gpu-error")
    assert diagnose("HipVMM Failure: invalid argument", "ggml_cuda_init: found 1 ROCm devices:",
                    signal="SIGABRT").kind == "gpu-error"


# Wordings that look like a cause and are not (each from its source): a confident wrong
# kind sends the user the wrong way, so these must stay unnamed or weak.
@pytest.mark.parametrize("line, not_kind", [
    # src/llama-mmap.cpp: --mlock refused by RLIMIT_MEMLOCK; the engine goes on unlocked
    ("warning: failed to mlock 73400320-byte buffer (after previously locking 0 bytes): "
     "Cannot allocate memory", "host-oom"),
    # a Windows crash report names the runtime DLL as the faulting module: not a missing DLL
    (r"Faulting module path: C:\Windows\SYSTEM32\VCRUNTIME140.dll", "missing-library"),
    # any client's words (a wrapper's health check), not ggml-rpc's GGML_ABORT line
    ("health check: Failed to connect to 127.0.0.1:8080", "rpc-worker-lost"),
])
def test_a_look_alike_line_is_not_named(line, not_kind):
    inc = classify_exit(report_from_log((line,), exit_code=1))
    assert inc.kind != not_kind and inc.kind == "unknown"


@pytest.mark.parametrize("line, kind", [
    # ggml/src/ggml-backend-reg.cpp load_backend (b11434): another build's backend library
    ("load_backend: failed to find ggml_backend_init in /opt/app/libggml-cuda.so", "stale-library"),
    ("load_backend: failed to initialize backend from /opt/app/libggml-vulkan.so: incompatible API "
     "version (backend: 1, current: 2)", "stale-library"),
    # ggml/src/gguf.cpp: a damaged length field, not the host's memory
    ("gguf_init_from_file_impl: encountered bad_alloc error while reading key 7", "bad-model"),
    # Python argparse, click, Go pflag/cobra: a wrapper refusing its own option
    ("error: argument --n-gpu-layers: invalid int value: 'all'", "bad-argument"),
    ("Error: No such option: --ctx", "bad-argument"),
    ("Error: unknown flag: --ctx-size", "bad-argument"),
    # Windows ERROR_MOD_NOT_FOUND / WSAEACCES (a reserved port range)
    ("ggml_backend_load: LoadLibraryW failed with error 126", "missing-library"),
    ("OSError: [WinError 10013] An attempt was made to access a socket in a way forbidden by its "
     "access permissions", "port-in-use"),
])
def test_a_source_wording_names_its_kind(line, kind):
    assert classify_exit(report_from_log((line,), exit_code=1)).kind == kind


_METAL_STATUS = "ggml_metal_graph_compute: command buffer 0 failed with status 5"
_METAL_ASSERT = "GGML_ASSERT: /src/llama.cpp/ggml-metal.m:969: false"
_OVER_SET = ("ggml_metal_add_buffer: allocated 'kv              ' buffer, size =  1024.00 MB, (22869.34 / "
             "21845.34), warning: current allocated size is greater than the recommended max working set size")


def test_an_old_metal_failure_over_the_working_set_is_metal_oom():
    inc = classify_exit(report_from_log((_OVER_SET, _METAL_STATUS, _METAL_ASSERT), signal="SIGABRT"))
    assert inc.kind == "metal-oom" and inc.rule == "metal-failure-over-working-set"
    assert "failed with status 5" in inc.evidence


def test_an_old_metal_failure_without_a_reason_is_unknown_with_both_candidates():
    inc = classify_exit(report_from_log((_METAL_STATUS, _METAL_ASSERT), signal="SIGABRT"))
    assert inc.kind == "unknown" and inc.candidates == ("metal-oom", "gpu-error")
    assert "does not guess" in inc.title


def test_a_metal_failure_that_names_its_error_is_read_by_that_error():
    # b11434 prints the reason after the status line: a timeout is a GPU fault, not memory
    timeout = "error: Caused GPU Timeout Error (00000002:kIOGPUCommandBufferCallbackErrorTimeout)"
    inc = classify_exit(report_from_log((_OVER_SET, _METAL_STATUS, timeout), signal="SIGABRT"))
    assert inc.kind == "gpu-error"
    oom = "error: Insufficient Memory (00000008:kIOGPUCommandBufferCallbackErrorOutOfMemory)"
    assert classify_exit(report_from_log((_METAL_STATUS, oom), signal="SIGABRT")).kind == "metal-oom"


@pytest.mark.parametrize("line, kind", [
    # the library lacking the version is an environment's own copy: stale, not an old system
    ("OSError: /home/u/.conda/envs/llm/bin/../lib/libstdc++.so.6: version `GLIBCXX_3.4.30' not found",
     "stale-library"),
    ("ImportError: /opt/conda/lib/libstdc++.so.6: version `GLIBCXX_3.4.32' not found (required by x.so)",
     "stale-library"),
    # ... while the system's own libc lacking it is the system too old
    ("./bin/chat: /lib/x86_64-linux-gnu/libc.so.6: version `GLIBC_2.34' not found (required by ./bin/chat)",
     "system-too-old"),
    ("/usr/lib64/libstdc++.so.6: version `GLIBCXX_3.4.21' not found", "system-too-old"),
    # Ollama gpu_info_cudart.c (`cudaSetDevice err: %d`, 35 = cudaErrorInsufficientDriver)
    ("cudaSetDevice err: 35", "cuda-driver-too-old"),
    # LocalAI pkg/model/initializers.go: the backend's binary is not on disk
    ("4:49PM INF [llama-cpp] Fails: grpc process not found: /tmp/localai/backend_data/backend-assets/grpc/"
     "llama-cpp. some backends(stablediffusion, tts) require LocalAI compiled with GO_TAGS", "missing-library"),
    # the Microsoft C runtime's abort()
    ("R6010 - abort() has been called", "assertion-failed"),
])
def test_a_loader_runtime_or_wrapper_wording_names_its_kind(line, kind):
    assert classify_exit(report_from_log((line,), exit_code=1)).kind == kind


@pytest.mark.parametrize("line, kind", [
    # CPython's call check and pydantic v1: the installed wrapper does not take the option
    ("got an unexpected keyword argument 'n_gpu_layers' (type=value_error)", "bad-argument"),
    ("ValidationError: 1 validation error for LlamaCpp n_gpu_layers extra fields not permitted "
     "(type=value_error.extra)", "bad-argument"),
    # gguf-py's magic check: not a GGUF file at all
    ("ValueError: GGUF magic invalid", "bad-model"),
    # the Go runtime's banner in a Go wrapper's own log
    ("SIGILL: illegal instruction", "illegal-instruction"),
    # Go's bind error with the reason in the OS's language
    ("Error: listen tcp 127.0.0.1:11434: bind: 通常每个套接字地址只允许使用一次。", "port-in-use"),
])
def test_a_wrapper_runtime_wording_names_its_kind(line, kind):
    assert classify_exit(report_from_log((line,), exit_code=1)).kind == kind


def test_a_nameless_allocation_on_a_gpu_build_is_unknown_between_the_gpu_and_the_host():
    # old llama.cpp's `unable to allocate backend buffer` names no buffer type: on a build
    # that splits layers between GPU and CPU either may have failed (ollama#5764: the host)
    lines = ("Error: llama runner process has terminated: error loading model: unable to allocate "
             "backend buffer",)
    inc = classify_exit(report_from_log(lines, backend="cuda"))
    assert inc.kind == "unknown" and inc.candidates == ("cuda-oom", "host-oom")
    assert "does not guess" in inc.title and inc.recoverable_by == "smaller-plan"
    rocm = classify_exit(report_from_log(lines, backend="rocm"))
    assert rocm.kind == "unknown" and rocm.candidates == ("rocm-oom", "host-oom")
    # negative: a buffer the line names decides without doubt
    named = ("llama_model_load: error loading model: unable to allocate CUDA0 buffer",)
    inc = classify_exit(report_from_log(named, backend="cuda"))
    assert inc.kind == "cuda-oom" and not inc.candidates
    host = ("llama_model_load: error loading model: unable to allocate CUDA_Host buffer",)
    assert classify_exit(report_from_log(host, backend="cuda")).kind == "host-oom"
    # ... and so does a build with one kind of memory
    assert classify_exit(report_from_log(lines, backend="cpu")).kind == "host-oom"


_ILLEGAL_ACCESS = ("CUDA error: an illegal memory access was encountered", "current device: 1",
                   "ggml_backend_cuda_synchronize", "cudaStreamSynchronize(cuda_ctx->stream())")


def test_a_gpu_error_with_a_drafter_loaded_is_unknown_between_them():
    # llama.cpp#27750: the fault was the target's second GPU, the draft pinned to the first;
    # with a drafter loaded the log cannot say whose graph faulted
    inc = classify_exit(report_from_log(_ILLEGAL_ACCESS, has_drafter=True, backend="cuda"))
    assert inc.kind == "unknown" and inc.candidates == ("gpu-error", "drafter-failure")
    assert inc.rule == "gpu-error-with-a-drafter" and inc.recoverable_by == "drop-drafter"
    assert not inc.counts_as_strike  # the start without the drafter tells first
    # negative: without a drafter the GPU error is named
    assert classify_exit(report_from_log(_ILLEGAL_ACCESS, has_drafter=False, backend="cuda")).kind == "gpu-error"
    # ... a drafter the user chose is kept and the error named
    forced = report_from_log(_ILLEGAL_ACCESS, has_drafter=True, backend="cuda")
    assert classify_exit(replace(forced, drafter_forced=True)).kind == "gpu-error"
    # ... and a crash with no telling line while a catalogue drafter loads stays the drafter's
    bare = classify_exit(report_from_log(("llama_model_loader: loaded meta data",), signal="SIGSEGV",
                                         has_drafter=True))
    assert bare.kind == "drafter-failure" and bare.rule == "crash-starting-with-a-catalog-drafter"


@pytest.mark.parametrize("line, kind", [
    # ggml-rpc.cpp before RPC_STATUS_ASSERT: GGML_ASSERT(status) after a failed send/recv
    (r"D:\a\llama-box\llama-box\llama.cpp\ggml\src\ggml-rpc\ggml-rpc.cpp:438: GGML_ASSERT(status) failed",
     "rpc-worker-lost"),
    ("GGML_ASSERT: /src/llama.cpp/ggml/src/ggml-rpc.cpp:512: status", "rpc-worker-lost"),
    # glibc's ldd: a needed library the loader does not find
    ("        libllama.so => not found", "missing-library"),
    # Ollama 0.12+ llm/server.go: the install lacks the llama-server it launches
    ('{"error":"error starting llama-server: llama-server binary not found (checked: /usr/lib/ollama/'
     'llama-server)"}', "missing-library"),
    # ggml-cuda.cu's old CUDA_CHECK tail: `<file>:<line>: <cudaGetErrorString>`
    ("ggml-cuda.cu:7068: invalid argument", "gpu-error"),
    ("CUDA error 700 at ggml-cuda.cu:6951: an illegal memory access was encountered", "gpu-error"),
    ("cudaErrorMisalignedAddress", "gpu-error"),
])
def test_a_wording_widened_after_batch_11_names_its_kind(line, kind):
    assert classify_exit(report_from_log((line,), exit_code=1)).kind == kind


@pytest.mark.parametrize("line, not_kind", [
    # a graph the worker could not compute (its memory, an op it lacks): not a lost worker
    ('ggml-rpc.cpp:1782: GGML_ASSERT(status == GGML_STATUS_SUCCESS && "Unsuccessful graph computations '
     'are not supported with RPC") failed', "rpc-worker-lost"),
    # an assertion in another file of the same form
    ("ggml/src/ggml-cuda/ggml-cuda.cu:90: GGML_ASSERT(status) failed", "rpc-worker-lost"),
    # a library ldd found
    ("        libllama.so => /usr/local/lib/libllama.so (0x00007f)", "missing-library"),
    # the engine's own refusal of an argument is not a CUDA error
    ("error: invalid argument: --foo", "gpu-error"),
])
def test_a_look_alike_of_a_batch_11_wording_is_not_that_kind(line, not_kind):
    assert classify_exit(report_from_log((line,), exit_code=1)).kind != not_kind


def test_ollama_falling_back_to_the_cpu_is_the_gpu_unused():
    lines = ('level=WARN source=amd_windows.go:140 msg="amdgpu is not supported (supported types:[gfx1103])" '
             'gpu_type=gfx1150 gpu=0',
             'level=INFO source=gpu.go:392 msg="no compatible GPUs were discovered"')
    assert classify_exit(report_from_log(lines, backend="rocm")).kind == "gpu-unused"
    # a CPU build saying it finds no GPU is normal, not a failure of that kind
    assert classify_exit(report_from_log(lines, backend="cpu")).kind != "gpu-unused"


@pytest.mark.parametrize("line, kind", [
    # cublasGetStatusString(CUBLAS_STATUS_ALLOC_FAILED) through ggml-cuda's CUBLAS_CHECK (CUDA 12)
    ("CUDA error: the resource allocation failed", "cuda-oom"),
    # llama.cpp's assert macro of spring 2023 (llama-util.h)
    (r"LLAMA_ASSERT: D:\a\llama.cpp\llama.cpp\llama.cpp:830: false", "assertion-failed"),
    # Node's listen error object with libuv's Windows EACCES (a reserved or held port)
    ('[ERROR] Error starting server {"code":"EACCES","errno":-4092,"syscall":"listen","address":"127.0.0.1",'
     '"port":1234}', "port-in-use"),
])
def test_a_wording_widened_after_batch_12_names_its_kind(line, kind):
    assert classify_exit(report_from_log((line,), exit_code=1, backend="cuda")).kind == kind


@pytest.mark.parametrize("line, not_kind", [
    # another cuBLAS status is a GPU fault, not memory
    ("CUDA error: the GPU program failed to execute", "cuda-oom"),
    # Linux libuv's EACCES (-13) on listen is a privileged port, not one another program holds
    ('{"code":"EACCES","errno":-13,"syscall":"listen","address":"0.0.0.0","port":80}', "port-in-use"),
    # the macro's name in prose is not the assert's line
    ("the LLAMA_ASSERT macro was renamed in June", "assertion-failed"),
])
def test_a_look_alike_of_a_batch_12_wording_is_not_that_kind(line, not_kind):
    assert classify_exit(report_from_log((line,), exit_code=1, backend="cuda")).kind != not_kind


def test_ollama_discovery_failing_to_init_the_cuda_driver_is_the_gpu_unused():
    # Ollama discover/gpu_info_nvcuda.c: cuInit failed (3: not initialized), so it runs on the CPU
    line = ('level=INFO source=gpu.go:612 msg="Unable to load cudart library /usr/lib/x86_64-linux-gnu/'
            'libcuda.so.575.57.08: cuda driver library init failure: 3"')
    assert classify_exit(report_from_log((line,), backend="cuda")).kind == "gpu-unused"
    # negative: 35 is the driver older than the runtime, which the catalogue names first
    old = line.replace("failure: 3", "failure: 35")
    assert classify_exit(report_from_log((old,), backend="cuda")).kind == "cuda-driver-too-old"
    # ... and a CPU build saying so is not a GPU build running without its GPU
    assert classify_exit(report_from_log((line,), backend="cpu")).kind != "gpu-unused"


def test_a_wording_widened_after_batch_13_names_its_kind():
    # ggml-cuda.cu's bad_arch() of late 2023
    line = "ERROR: ggml-cuda was compiled without support for the current GPU architecture."
    assert classify_exit(report_from_log((line,), backend="cuda")).kind == "no-kernel-image"
    # Ollama 0.1.3x amd_linux.go: the ROCm payload lacks the gfx, so it runs on the CPU; the
    # build's missing gfx is the cause (no-kernel-image since batches 35 and 36, gpu-unused before)
    amd = ('level=WARN source=amd_linux.go:116 msg="amdgpu [0] gfx1103 is not supported by '
           '/tmp/ollama2145067703/rocm [gfx1030 gfx1100]"')
    assert classify_exit(report_from_log((amd,), backend="rocm")).kind == "no-kernel-image"
    assert classify_exit(report_from_log((amd,), backend="cpu")).kind == "unknown"  # negative


@pytest.mark.parametrize("lines, kind", [
    # symbols only macOS itself provides: its libc++ and its frameworks' classes
    (("Dyld Error Message:", "  Symbol not found: __ZTTNSt3__114basic_ifstreamIcNS_11char_traitsIcEEEE"),
     "system-too-old"),
    (("dyld: Symbol not found: _OBJC_CLASS_$_MTLComputePassDescriptor",), "system-too-old"),
    # a library outside macOS lacking the symbol: another build's copy
    (("dyld[61266]: Symbol not found: _llama_sampler_grammar_is_inflight",
      "  Referenced from: <F1BE81C2-73D7-3A71-90E5-5F8F9921B022> /Applications/GPUStack.app/llama-box",
      "  Expected in:     <924D1BCB-5D80-3E69-A7CE-B285152F24AB> /Applications/GPUStack.app/libllama.dylib"),
     "stale-library"),
    # ... and one in /usr/lib is macOS too old
    (("dyld: Symbol not found: _foo", "  Expected in: /usr/lib/libSystem.B.dylib"), "system-too-old"),
])
def test_dyld_symbol_misses_are_read_by_where_the_symbol_was_expected(lines, kind):
    assert classify_exit(report_from_log(lines, signal="SIGABRT", os="darwin")).kind == kind


def test_a_bare_dyld_symbol_miss_is_a_sign_only():
    # negative: without `Expected in:` the same line follows an old macOS and another build's library
    inc = classify_exit(report_from_log(("dyld: Symbol not found: _ggml_backend_foo",), signal="SIGABRT",
                                        os="darwin"))
    assert inc.kind == "unknown" and inc.candidates == ("stale-library",)


def test_gos_exit_code_minus_one_is_not_sighup():
    # Go's ProcessState.ExitCode() is -1 for a process a signal ended without naming it
    line = ('level=ERROR source=sched.go:388 msg="error loading llama server" '
            'error="llama runner process no longer running: -1 "')
    inc = classify_exit(report_from_log((line,)))
    assert inc.kind == "unknown" and "SIGHUP" not in (inc.exit_description or "")
    # negative: a named signal and a real code are still read
    assert classify_exit(report_from_log(("Error: llama runner process has terminated: signal: killed",))).kind \
        == "host-oom"
    killed_137 = classify_exit(report_from_log(("container exited with code 137",)))
    assert "137" in (killed_137.exit_description or "")


def test_a_load_error_covering_model_and_draft_is_unknown_between_them():
    # LocalAI reports the model and its draft together: either file may be the unreadable one
    line = ("Error: failed to load model with internal loader: could not load model: rpc error: code = Internal "
            "desc = Failed to load model: /models/m.gguf (with draft model: /models/mtp.gguf). Error: "
            "llama_model_load: error loading model: unknown model architecture: 'gemma4_assistant'")
    inc = classify_exit(report_from_log((line,), has_drafter=True))
    assert inc.kind == "unknown" and inc.candidates == ("bad-model", "drafter-failure")
    assert inc.rule == "load-error-covers-the-draft" and inc.recoverable_by == "drop-drafter"
    # negative: the same error without a draft model is the model's
    alone = line.replace(" (with draft model: /models/mtp.gguf)", "")
    assert classify_exit(report_from_log((alone,))).kind == "bad-model"


@pytest.mark.parametrize("line, candidate", [
    # gpt4all's own guess after any crash on load (batch 13's was a CPU without AVX)
    ("[Warning] (Tue Jul 25 13:08:13 2023): ERROR: Previous attempt to load model resulted in crash for "
     "`m.bin` most likely due to out of memory.", "host-oom"),
    # llamafile found no usable GPU module (library, driver or compiler)
    ("fatal error: support for --gpu nvidia was explicitly requested, but it wasn't available", "missing-library"),
])
def test_a_wrappers_guess_is_a_sign_only(line, candidate):
    inc = classify_exit(report_from_log((line,)))
    assert inc.kind == "unknown" and candidate in inc.candidates


# ---- the catalogue mined from the wrappers' and llama.cpp's sources before batch 14 ----
# Each wording is one a source prints (docs/diagnosis-batches.md, "Batch 14: the catalogue from the sources"),
# none of them taken from a thread; the look-alikes below keep each one narrow.

@pytest.mark.parametrize("line, backend, kind", [
    # Ollama 2026 llm/server.go: its llama-server runner's out-of-memory, read by llm/status.go
    ('level=ERROR source=server.go:702 msg="llama-server reported out-of-memory during startup: '
     'ggml_backend_cuda_buffer_type_alloc_buffer: allocating 9000.00 MiB on device 0: cudaMalloc failed"',
     "cuda", "cuda-oom"),
    # Jan tauri-plugin-llamacpp error.rs: its own out-of-memory reading of llama-server's stderr
    ('LlamacppError { code: OutOfMemory, message: "Out of memory. The model requires more RAM or VRAM '
     'than available." }', "vulkan", "vulkan-oom"),
    # Ollama 0.12-0.20 llm/server.go: its estimate against the system memory
    ("Error: model is too large for system memory", None, "host-oom"),
    # ggml-sycl's host allocation (b11434)
    ("ggml_sycl_host_malloc: can't allocate 4294967296 Bytes of memory on host", None, "host-oom"),
    # Go's os/exec and Node's child_process: the program the wrapper launches is not there
    ('<qwen> start() failed for command \'llama-server -m /m.gguf\': exec: "llama-server": executable file '
     'not found in $PATH', None, "missing-library"),
    ("fork/exec /usr/local/bin/llama-server: no such file or directory", None, "missing-library"),
    ("Error: spawn /opt/jan/llama-server ENOENT", None, "missing-library"),
    # ... built for another architecture
    ("fork/exec /app/llama-server: exec format error", None, "stale-library"),
    # b11434 with loadable backends and no libggml-cpu beside it
    ("llama_model_load: error loading model: make_cpu_buft_list: no CPU backend found", None, "missing-library"),
    # a Vulkan build with no Vulkan driver
    ("  what():  vk::createInstance: ErrorIncompatibleDriver", "vulkan", "missing-library"),
    # koboldcpp.py: no backend library beside it; its own argument check; its format detection
    ("KoboldCPP couldn't locate any backends to use (i.e Default, Vulkan, CLBlast, CuBLAS).", None,
     "missing-library"),
    ("Error: Using --quantkv requires --flashattention", None, "bad-argument"),
    ("Unknown Model, cannot load.", None, "bad-model"),
    ("Warning: Port 5001 already appears to be in use by another program.", None, "port-in-use"),
    # b11434's own load errors (gguf.cpp, llama-model-loader.cpp)
    ("gguf_init_from_file_impl: this GGUF file is version 4 but this software only supports up to version 3",
     None, "bad-model"),
    # (a later shard handed to the engine: the path is wrong, not the file; bad-model until batch 58)
    ("llama_model_load: error loading model: illegal split file idx: 1 (file: /m-00002-of-00003.gguf), model "
     "must be loaded with the first split", None, "bad-argument"),
    # Jan's words said only on llama.cpp's `error loading model architecture`
    ("The model's architecture is not supported by this version of the backend.", None, "bad-model"),
    # CUDA 11/12's cudaErrorDevicesUnavailable string and cudaErrorCallRequiresNewerDriver
    ("CUDA error: CUDA-capable device(s) is/are busy or unavailable", "cuda", "gpu-error"),
    ("CUDA error: API call is not supported in the installed CUDA driver", "cuda", "cuda-driver-too-old"),
    # Jan's 180 s wait for llama-server's ready line
    ("The model took too long to load and timed out.", None, "startup-timeout"),
    # ggml-vulkan (b11434) after a device loss
    ("ggml_vulkan: device fault on NVIDIA GeForce RTX 3060: page fault", "vulkan", "gpu-error"),
])
def test_a_wording_mined_from_the_sources_names_its_kind(line, backend, kind):
    assert classify_exit(report_from_log((line,), exit_code=1, backend=backend)).kind == kind


def test_the_sycl_pool_running_out_is_a_device_allocation():
    # ggml-sycl's dpct helpers (b11434): read as the device memory of the build, like sycl.oom
    (piece,) = gather(("dpct_malloc: out of memory for virtual memory pool",), strip_log_prefix)
    assert piece.entry.name == "sycl.oom" and piece.kind == "device-oom"


@pytest.mark.parametrize("line, not_kind", [
    # Go's exec finding a program that is not the engine's launcher words
    ("fork/exec /usr/bin/nvidia-smi: permission denied", "missing-library"),
    # a CPU backend that was found
    ("load_backend: loaded CPU backend from /app/libggml-cpu-haswell.so", "missing-library"),
    # another VkResult from vkCreateInstance is not a missing driver
    ("vk::createInstance: ErrorLayerNotPresent", "missing-library"),
    # Python's ENOENT for the model file is not the engine's program
    ("FileNotFoundError: [Errno 2] No such file or directory: '/models/qwen.gguf'", "missing-library"),
    # koboldcpp's port being free (its start line)
    ("Starting OpenAI Compatible API on port 5001 at http://localhost:5001/v1/", "port-in-use"),
    # the supported GGUF version said in passing
    ("llama_model_loader: - kv   0:  general.architecture str = llama (GGUF V3 (latest))", "bad-model"),
])
def test_a_look_alike_of_a_mined_wording_is_not_that_kind(line, not_kind):
    assert classify_exit(report_from_log((line,), exit_code=1)).kind != not_kind


@pytest.mark.parametrize("line, candidate", [
    # wrappers' words around any failed start: shown, never deciding (the exit decides)
    ('level=ERROR source=sched.go:455 msg="error loading llama server" error="llama-server process has '
     'terminated: exit status 2"', "bad-model"),
    ("Error: 500 Internal Server Error: model runner has unexpectedly stopped, this may be due to resource "
     "limitations or an internal error, check ollama server logs for details", "assertion-failed"),
    ("Error: llama runner process has terminated: this model may be incompatible with your version of Ollama. "
     "If you previously pulled this model, try updating it by running `ollama pull x`", "bad-model"),
    ("11:02AM ERR GRPC Process is not responding: rpc error: code = Unavailable", "assertion-failed"),
    ("RuntimeError: Server process terminated unexpectedly with exit code: 3221225477", "assertion-failed"),
    ("[qwen] upstream exited unexpectedly", "assertion-failed"),
    ("llama.cpp failed early with code Some(1)", "assertion-failed"),
    ("The model process encountered an unexpected error.", "assertion-failed"),
    ("Could not load engine: LoadLibrary failed", "missing-library"),
    # a Metal shader library that would not compile: an older macOS, an old GPU or a damaged bundle
    ('ggml_metal_init: error: Error Domain=MTLLibraryErrorDomain Code=3 "program_source:3:10: error"',
     "system-too-old"),
    ("ggml_vulkan: Error: Vulkan 1.2 required.", "system-too-old"),
    ("WARNING: failed to allocate 512.00 MB of pinned memory: out of memory", "host-oom"),
])
def test_a_mined_wrapper_wording_is_a_sign_only(line, candidate):
    pieces = gather((line,), strip_log_prefix)
    assert pieces and all(p.strength is catalogue.Strength.WEAK for p in pieces), pieces
    assert candidate in {p.kind for p in pieces}
    assert decide(pieces).kind is None  # weak evidence names nothing; the exit decides


@pytest.mark.parametrize("line, backend", [
    # Ollama 0.1.2x-0.1.3x, 0.3-0.12 and 2026 discovery: a GPU found and left for the CPU
    ('level=WARN source=amd_linux.go:341 msg="amdgpu detected, but no compatible rocm library found.  Please '
     'install ROCm"', None),
    ('level=WARN source=gpu.go:228 msg="CPU does not have minimum vector extensions, GPU inference disabled"',
     None),
    ('level=ERROR source=amd_linux.go:386 msg="amdgpu devices detected but permission problems block access: '
     'kfd driver not loaded"', None),
    # koboldcpp.py: its CUDA library is not in the bundle
    ("Warning: CuBLAS library file not found. CPU library will be used.", None),
    # llamafile and b11434's own warnings
    ("warning: --n-gpu-layers 99 was passed but no GPUs were found; falling back to CPU", None),
    ("warning: llama.cpp was compiled without support for GPU offload. Setting the main GPU has no effect.", None),
    ("ggml_vulkan: Warning: Device type is CPU. This is probably not the device you want.", "vulkan"),
])
def test_a_wrapper_leaving_the_gpu_is_the_gpu_unused(line, backend):
    assert classify_exit(report_from_log((line,), backend=backend)).kind == "gpu-unused"


@pytest.mark.parametrize("line", [
    # ... and where the wrapper says it left the GPU because its build has no code for it, the
    # build is the cause (no-kernel-image since batches 35 and 36; gpu-unused before)
    'level=INFO source=gpu.go:146 msg="CUDA GPU is too old. Falling back to CPU mode. Compute Capability '
    'detected: 3.0"',
    "level=INFO msg=\"skipping CUDA device — compute capability not in compiled architectures\"",
])
def test_a_wrapper_leaving_a_gpu_its_build_lacks_is_no_kernel_image(line):
    inc = classify_exit(report_from_log((line,)))
    assert inc.kind == "no-kernel-image" and inc.rule == "gpu-left-for-want-of-its-code"


def test_the_gpu_left_is_not_blamed_when_something_else_failed():
    # negative: the fallback is a sign; a failure the log names, or an exit, decides first
    fell_back = 'level=INFO msg="CUDA GPU is too old. Falling back to CPU mode. Compute Capability detected: 3.0"'
    oom = "ggml_aligned_malloc: insufficient memory (attempted to allocate 9000.00 MB)"
    assert classify_exit(report_from_log((fell_back, oom))).kind == "host-oom"
    assert classify_exit(report_from_log((fell_back,), exit_code=1)).kind != "gpu-unused"
    # ... and a Vulkan software device on a CPU build is not a GPU build on the CPU
    lavapipe = "ggml_vulkan: Warning: Device type is CPU. This is probably not the device you want."
    assert classify_exit(report_from_log((lavapipe,), backend="cpu")).kind != "gpu-unused"


# ------------------------------------------------- widened from spent batch 14, from sources

_NAMELESS = "Error: llama runner process has terminated: error loading model: unable to allocate backend buffer"
_SYSTEM_MEMORY = ('time=2024-09-03T10:12:01.120+02:00 level=INFO source=server.go:101 msg="system memory" '
                  'total="15.9 GiB" free="{free}" free_swap="{swap}"')
_OFFLOAD = ('time=2024-09-03T10:12:01.180+02:00 level=INFO source=memory.go:326 msg="offload to cuda" '
            'layers.requested=-1 layers.model=41 layers.offload=14 layers.split="" memory.available="[3.3 GiB]" '
            'memory.gpu_overhead="0 B" memory.required.full="9.6 GiB" memory.required.partial="3.2 GiB" '
            'memory.required.kv="1.3 GiB" memory.required.allocations="[3.2 GiB]"')


def test_a_nameless_allocation_is_the_host_when_ollamas_estimate_shows_the_host_short():
    # Ollama's own lines: 6.4 GiB of the load stays on the host (9.6 full - 3.2 on the GPU),
    # and the system had 2.1 GiB free (ollama#6606: 16 GB of RAM, a 3050)
    lines = (_SYSTEM_MEMORY.format(free="2.1 GiB", swap="0 B"), _OFFLOAD, _NAMELESS)
    inc = classify_exit(report_from_log(lines, backend="cuda"))
    assert inc.kind == "host-oom" and not inc.candidates
    assert inc.rule == "nameless-allocation-host-short-by-the-estimate"
    # negative: the host's share fits in the free memory with swap: the log cannot tell
    fits = (_SYSTEM_MEMORY.format(free="4.0 GiB", swap="3.0 GiB"), _OFFLOAD, _NAMELESS)
    inc = classify_exit(report_from_log(fits, backend="cuda"))
    assert inc.kind == "unknown" and inc.candidates == ("cuda-oom", "host-oom")
    # negative: either line alone says nothing about the host's share
    for only in ((_SYSTEM_MEMORY.format(free="2.1 GiB", swap="0 B"), _NAMELESS), (_OFFLOAD, _NAMELESS)):
        inc = classify_exit(report_from_log(only, backend="cuda"))
        assert inc.kind == "unknown" and inc.candidates == ("cuda-oom", "host-oom")
    # negative (order): a buffer the line names decides before any estimate
    named = (_SYSTEM_MEMORY.format(free="2.1 GiB", swap="0 B"), _OFFLOAD,
             "llama_model_load: error loading model: unable to allocate CUDA0 buffer")
    assert classify_exit(report_from_log(named, backend="cuda")).kind == "cuda-oom"


def test_ollamas_estimate_reads_its_units():
    from stoker.diagnosis.classify import host_short_from_log
    short = ('level=INFO msg="system memory" total="8 GiB" free="900.5 MiB" free_swap="0 B"',
             'level=INFO msg=offload library=cuda layers.model=33 layers.offload=10 '
             'memory.required.full="5.5 GiB" memory.required.partial="2.0 GiB"')
    assert host_short_from_log(short) is not None
    # a full offload leaves the host no share: never short
    full = (short[0], 'level=INFO msg=offload library=cuda memory.required.full="5.5 GiB" '
                      'memory.required.partial="5.5 GiB"')
    assert host_short_from_log(full) is None


@pytest.mark.parametrize("line, kind", [
    # Unsloth Studio's LLAMA_SERVER_NOT_FOUND_DETAIL (unsloth#8184) and other launchers' words
    ("This is a GGUF model, but the llama.cpp runtime (llama-server) is not installed. Run `unsloth studio "
     "setup` to download the prebuilt runtime, then try again. (Advanced: set LLAMA_SERVER_PATH to an "
     "existing binary.)", "missing-library"),
    ("PAError: the built-in runtime (llama-server) is not installed", "missing-library"),
    # the CLR over LLamaSharp: a libllama of another version (the TypeLoadException of
    # LLamaSharp#1119 is a sign only since batch 15: tests below)
    ("System.EntryPointNotFoundException: Unable to find an entry point named 'llama_model_load_from_file' "
     "in DLL 'llama'.", "stale-library"),
    # ... and no libllama at all
    ("System.DllNotFoundException: Unable to load DLL 'llama' or one of its dependencies: The specified "
     "module could not be found. (0x8007007E)", "missing-library"),
    ("System.DllNotFoundException: Unable to load shared library 'libllama' or one of its dependencies.",
     "missing-library"),
    # (LLamaSharp's RuntimeError over it names no kind since spent batch 19: tests at the end)
])
def test_a_wording_widened_after_batch_14_names_its_kind(line, kind):
    assert classify_exit(report_from_log((line,))).kind == kind


@pytest.mark.parametrize("line, not_kind", [
    # a .NET type that fails for a method of its own, not a native one
    ("System.TypeLoadException: Could not load type 'App.Foo' from assembly 'App' because the method "
     "'Render' has no implementation (no RVA).", "stale-library"),
    # an entry point of another native library
    ("System.EntryPointNotFoundException: Unable to find an entry point named 'GetDpiForWindow' in DLL "
     "'user32.dll'.", "stale-library"),
    # another program's DLL missing, not the engine's
    ("System.DllNotFoundException: Unable to load DLL 'libSkiaSharp' or one of its dependencies.",
     "missing-library"),
    # a runtime that is installed, said so
    ("the llama.cpp runtime (llama-server) is installed at C:/Users/a/.unsloth/llama.cpp", "missing-library"),
])
def test_a_look_alike_of_a_batch_14_wording_is_not_that_kind(line, not_kind):
    assert classify_exit(report_from_log((line,), exit_code=1)).kind != not_kind


def test_unsloths_failed_start_is_a_guess_and_the_missing_runtime_decides():
    guess = ("Failed to load model: llama-server failed to start. Check that the GGUF file is valid and you "
             "have enough memory.")
    pieces = gather((guess,), strip_log_prefix)
    assert pieces and all(p.strength is catalogue.Strength.WEAK for p in pieces)
    assert decide(pieces).kind is None
    missing = "This is a GGUF model, but the llama.cpp runtime (llama-server) is not installed."
    assert classify_exit(report_from_log((guess, missing))).kind == "missing-library"


# Widened from spent batch 15: llama.cpp's closing line, and the CLR's TypeLoadException and
# AccessViolationException over a binding, are signs only (the catalogue's wordings say why, from each
# wording's source). Each test has its negative: the same lines in the other order, or with
# the sign made decisive, must give another answer.
_CLOSING = "llama_model_load_from_file_impl: failed to load model"
_TYPE_LOAD = ("System.TypeLoadException: Could not load type 'LLama.Native.SafeLLamaContextHandle' from assembly "
              "'LLamaSharp, Version=0.0.0.0, Culture=neutral, PublicKeyToken=null' because the method "
              "'llama_encode' has no implementation (no RVA).")
_ENTRY_POINT = ("System.EntryPointNotFoundException: Unable to find an entry point named 'llama_encode' in DLL "
                "'llama'.")
_AV = ("Fatal error. System.AccessViolationException: Attempted to read or write protected memory. This is "
       "often an indication that other memory is corrupt.",
       "   at LLama.Native.SafeLlamaModelHandle.llama_model_load_from_file(System.String, "
       "LLama.Native.LLamaModelParams)",
       "   at LLama.LLamaWeights.LoadFromFile(LLama.Abstractions.IModelParams)")


def _strengthened(pieces, name):
    """The pieces with the named entry made decisive: what the rule was before batch 15."""
    strong = catalogue.Strength.DECISIVE
    return tuple(replace(p, entry=replace(p.entry, strength=strong)) if p.entry.name == name else p
                 for p in pieces)


@pytest.mark.parametrize("name, lines, candidate", [
    ("llama.load-failed", (_CLOSING, "OSError: exception: access violation reading 0x0000000000000004"),
     "bad-model"),
    ("llama.load-failed", ("llama_load_model_from_file: failed to load model",), "bad-model"),
    ("dotnet.type-load-no-implementation", (_TYPE_LOAD,), "stale-library"),
    ("dotnet.access-violation-in-native-call", _AV, "stale-library"),
])
def test_a_batch_15_sign_alone_is_unknown_with_its_candidate(name, lines, candidate):
    pieces = gather(lines, strip_log_prefix)
    assert any(p.entry.name == name and p.strength is catalogue.Strength.WEAK for p in pieces)
    assert decide(pieces).kind is None
    inc = classify_exit(report_from_log(lines))
    assert inc.kind == "unknown" and candidate in inc.candidates
    # negative: with the sign decisive (the rule before batch 15) the same log names a kind
    assert decide(_strengthened(pieces, name)).kind == candidate


@pytest.mark.parametrize("lines, kind", [
    # the closing line after the allocation that failed (koboldcpp#1852's shape, with its cause)
    (("ggml_backend_cpu_buffer_type_alloc_buffer: failed to allocate buffer of size 34359738368", _CLOSING),
     "host-oom"),
    # ... after the file's own error
    (("llama_model_load: error loading model: unknown model architecture: 'kimi'", _CLOSING), "bad-model"),
    # the TypeLoadException corroborated by the entry point the library lacks
    ((_TYPE_LOAD, _ENTRY_POINT), "stale-library"),
    # a fault in the native load call after the GPU's allocation failed
    (("ggml_backend_cuda_buffer_type_alloc_buffer: allocating 9000.00 MiB on device 0: cudaMalloc failed: "
      "out of memory",) + _AV, "cuda-oom"),
])
def test_a_batch_15_sign_never_outweighs_the_cause_in_either_order(lines, kind):
    assert classify_exit(report_from_log(lines, backend="cuda")).kind == kind
    # negative (order): the cause wins whichever line comes first, since the sign never decides
    assert classify_exit(report_from_log(tuple(reversed(lines)), backend="cuda")).kind == kind


# Widened from spent batch 16: ggml_init's check of its own malloc (`ctx->mem_buffer != NULL`)
# is the host's allocation failing, and an `undefined symbol` that is glibc's own function is a
# system too old for the build (the catalogue's wordings say why, from ggml.c and glibc's Versions files).
_MEM_BUFFER_OLD = "GGML_ASSERT: /home/ci/gpt4all-backend/llama.cpp-230511/ggml.c:4411: ctx->mem_buffer != NULL"
_MEM_BUFFER_NEW = "D:/a/x/ggml/src/ggml.c:1685: GGML_ASSERT(ctx->mem_buffer != NULL) failed"
_GETCPU = "OSError: /tmp/_MEIUwJ6Ds/koboldcpp_cublas.so: undefined symbol: getcpu"


@pytest.mark.parametrize("line", [_MEM_BUFFER_OLD, _MEM_BUFFER_NEW])
@pytest.mark.parametrize("backend", [None, "cuda"])
def test_ggml_inits_own_malloc_failing_is_the_hosts_memory(line, backend):
    lines = (line, "Aborted")
    assert classify_exit(report_from_log(lines, signal="SIGABRT", backend=backend)).kind == "host-oom"
    # negative: read as the abort it also is (the catalogue before batch 16), it is an assertion
    pieces = gather(lines, strip_log_prefix)
    as_abort = tuple(replace(p, entry=catalogue.entry("abort.assert")) if p.entry.name == "ggml.context-malloc"
                     else p for p in pieces)
    assert decide(pieces).kind == "host-oom" and decide(as_abort).kind == "assertion-failed"


@pytest.mark.parametrize("line", [
    # another condition of the same assertion macro, in the same file
    "GGML_ASSERT: ggml.c:4411: ctx->mem_size >= ggml_nbytes(tensor)",
    "ggml/src/ggml.c:1685: GGML_ASSERT(ctx->mem_buffer_owned) failed",
    # a check that names the buffer without the NULL test
    "GGML_ASSERT(buf->mem_buffer != NULL) failed",
])
def test_another_ggml_assertion_stays_an_assertion(line):
    assert classify_exit(report_from_log((line,), signal="SIGABRT")).kind == "assertion-failed"


def test_the_mem_buffer_check_yields_to_the_gpu_allocation_before_it():
    # two allocations: the first is the root cause (allocation-named-by-its-first-line)
    lines = (CUDA_OOM, _MEM_BUFFER_NEW)
    assert classify_exit(report_from_log(lines, backend="cuda")).kind == "cuda-oom"
    assert classify_exit(report_from_log(tuple(reversed(lines)), backend="cuda")).kind == "host-oom"


@pytest.mark.parametrize("line", [
    _GETCPU,
    "./llama-server: symbol lookup error: ./libggml-base.so: undefined symbol: gettid",
    "ImportError: /opt/app/libllama.so: undefined symbol: __isoc23_strtol",
    "OSError: /x/libggml.so: undefined symbol: close_range, version GLIBC_2.34",
])
def test_a_missing_glibc_function_is_a_system_too_old(line):
    assert classify_exit(report_from_log((line,), exit_code=1)).kind == "system-too-old"
    # the same line is also read as another build's library; the glibc owner outranks that
    hits = [e.name for e in catalogue.matches(line)]
    assert hits[0] == "ld.glibc-symbol-undefined" and "ld.stale-symbol" in hits


@pytest.mark.parametrize("line", [
    # libllama's and ggml's own symbols: another build's library
    "OSError: /x/libllama.so: undefined symbol: llama_kv_self_can_shift",
    "llama-server: symbol lookup error: libggml-cuda.so: undefined symbol: ggml_backend_cuda_reg",
    # a name that only begins like a glibc function
    "OSError: /x/libllama.so: undefined symbol: getcpu_count",
    "OSError: /x/libggml.so: undefined symbol: ggml_getcpu",
    # a glibc function every supported glibc has (no newer system needed)
    "OSError: /x/libggml.so: undefined symbol: malloc",
])
def test_an_undefined_symbol_that_is_not_glibcs_newer_own_is_another_builds_library(line):
    assert classify_exit(report_from_log((line,), exit_code=1)).kind == "stale-library"


def test_a_missing_glibc_function_says_why_a_sibling_library_could_not_be_opened_in_either_order():
    cannot = "OSError: libcudart.so.12: cannot open shared object file: No such file or directory"
    lines = (_GETCPU, cannot)
    assert classify_exit(report_from_log(lines)).kind == "system-too-old"
    assert classify_exit(report_from_log(tuple(reversed(lines)))).kind == "system-too-old"
    # negative (order): with versioned-symbol-over-cannot-open reversed, the cannot-open wins
    assert verdict(lines, flipped("versioned-symbol-over-cannot-open")).kind == "missing-library"


# Widened from spent batch 18: LM Studio's load-error JSON with the system memory it found
# unused (lmstudio-bug-tracker#14) and Ollama's estimate putting nearly all the free memory on
# the host with no failure line (ollama#10739); wrapper_memory.py says what the fields mean.
def _lmstudio(unused, capacity="314.65 GB", cause=""):
    return ("{", '  "title": "Failed to load model",', f'  "cause": "{cause}",',
            '  "errorData": {', '    "n_ctx": 1048576,', '    "n_batch": 512,', '    "n_gpu_layers": 81',
            "  },", '  "data": {', '    "memory": {', f'      "ram_capacity": "{capacity}",',
            f'      "ram_unused": "{unused}"', "    },", '    "gpu": {', '      "type": "NvidiaCuda",',
            '      "vram_recommended_capacity": "141.90 GB",', '      "vram_unused": "130.46 GB"', "    }",
            "  }", "}")


@pytest.mark.parametrize("unused, capacity", [
    ("316.65 KB", "314.65 GB"),  # lmstudio-bug-tracker#14
    ("1.20 MB", "15.85 GB"),  # under a ten-thousandth of a 16 GB machine
    ("0 B", "31.91 GB"),
])
def test_lm_studio_finding_the_system_memory_used_up_is_the_hosts_memory(unused, capacity):
    lines = _lmstudio(unused, capacity)
    inc = classify_exit(report_from_log(lines, backend="cuda"))
    assert inc.kind == "host-oom" and not inc.candidates
    assert '"ram_unused"' in inc.evidence
    # negative: without the figure's reading (the catalogue before batch 18) only the weak
    # "Failed to load model" is left: unknown, with bad-model as the candidate
    pieces = gather(lines, strip_log_prefix)
    bare = tuple(p for p in pieces if p.entry.name != "lmstudio.ram-exhausted")
    assert decide(pieces).kind == "host-oom" and decide(bare).kind is None


@pytest.mark.parametrize("unused, capacity", [
    ("26.74 GB", "31.91 GB"),  # llama-cpp-python#1556: the same report after an unknown architecture
    ("120.00 MB", "15.85 GB"),  # low, but above the floor a busy machine keeps free
    ("316.65 KB", "0 B"),  # no total to read it against
])
def test_lm_studio_memory_figures_above_the_floor_say_nothing(unused, capacity):
    inc = classify_exit(report_from_log(_lmstudio(unused, capacity), backend="cuda"))
    assert inc.kind == "unknown" and inc.candidates == ("bad-model",)


def test_lm_studio_memory_figures_are_read_as_one_object():
    from stoker.diagnosis.wrapper_memory import lmstudio_ram_exhausted
    # the compact form on one line
    one = ('{"title":"Failed to load model","cause":"","data":{"memory":{"ram_capacity":"314.65 GB",'
           '"ram_unused":"316.65 KB"}}}',)
    assert lmstudio_ram_exhausted(one) == 0
    # a ram_unused with no ram_capacity beside it (another object, far away) is not compared
    apart = ('"ram_capacity": "314.65 GB"',) + ("x",) * 5 + ('"ram_unused": "316.65 KB"',)
    assert lmstudio_ram_exhausted(apart) is None
    # no ram_unused at all
    assert lmstudio_ram_exhausted(('"ram_capacity": "314.65 GB"', '"vram_unused": "0 B"')) is None


def test_lm_studios_figure_meets_its_cause_line_by_the_order():
    # a cause llama.cpp gives beside the used-up memory: the load error is the allocation's
    # echo (allocation-inside-load-error), as beside an engine's allocation line
    lines = _lmstudio("316.65 KB", cause="llama.cpp error: 'error loading model: vector::_M_default_append'")
    assert classify_exit(report_from_log(lines)).kind == "host-oom"
    assert verdict(lines).rule == "allocation-inside-load-error"
    # negative (order): with that rule reversed the load error wins
    assert verdict(lines, flipped("allocation-inside-load-error")).kind == "bad-model"
    # the same cause with memory to spare (llama-cpp-python#1556's shape) is the file's
    spare = _lmstudio("26.74 GB", "31.91 GB", cause="llama.cpp error: 'error loading model architecture: "
                                                    "unknown model architecture: deepseek2'")
    assert classify_exit(report_from_log(spare)).kind == "bad-model"
    # an engine's own GPU allocation line before the figure is the first allocation, and wins
    gpu = (CUDA_OOM,) + _lmstudio("316.65 KB")
    assert classify_exit(report_from_log(gpu, backend="cuda")).kind == "cuda-oom"
    assert verdict(gpu).rule == "allocation-named-by-its-first-line"


_OLLAMA_FREE = ('May 16 17:44:49 Debian ollama[6012]: time=2025-05-16T17:44:49.091+02:00 level=INFO '
                'source=server.go:135 msg="system memory" total="62.6 GiB" free="{free}" free_swap="215.1 MiB"')
_OLLAMA_ESTIMATE = ('May 16 17:44:49 Debian ollama[6012]: time=2025-05-16T17:44:49.187+02:00 level=INFO '
                    'source=server.go:168 msg=offload library=cuda layers.requested=-1 layers.model=49 '
                    'layers.offload=4 layers.split="" memory.available="[11.4 GiB]" memory.gpu_overhead="0 B" '
                    'memory.required.full="68.3 GiB" memory.required.partial="10.9 GiB" '
                    'memory.required.kv="2.2 GiB" memory.required.allocations="[10.9 GiB]"')


@pytest.mark.parametrize("free", ["59.1 GiB", "50.0 GiB"])  # #10739: 57.4 GiB on the host; and over the free
def test_ollamas_estimate_alone_leaves_host_oom_as_the_candidate_never_the_name(free):
    lines = (_OLLAMA_FREE.format(free=free), _OLLAMA_ESTIMATE)
    inc = classify_exit(report_from_log(lines, backend="cuda"))
    assert inc.kind == "unknown" and inc.candidates == ("host-oom",)
    # negative: made decisive, the forecast alone would name a kind it cannot prove
    pieces = gather(lines, strip_log_prefix)
    assert decide(pieces).kind is None
    assert decide(_strengthened(pieces, "ollama.estimate-host-tight")).kind == "host-oom"


def test_ollamas_estimate_with_room_to_spare_is_no_sign():
    lines = (_OLLAMA_FREE.format(free="120.0 GiB"), _OLLAMA_ESTIMATE)
    inc = classify_exit(report_from_log(lines, backend="cuda"))
    assert inc.kind == "unknown" and inc.candidates == ()
    # either line alone: no share to weigh
    for only in lines:
        assert classify_exit(report_from_log((only,), backend="cuda")).candidates == ()


def test_ollamas_tight_estimate_never_outweighs_a_failing_line_in_either_order():
    lines = (_OLLAMA_FREE.format(free="59.1 GiB"), _OLLAMA_ESTIMATE, CUDA_OOM)
    assert classify_exit(report_from_log(lines, backend="cuda")).kind == "cuda-oom"
    moved = (CUDA_OOM, _OLLAMA_FREE.format(free="59.1 GiB"), _OLLAMA_ESTIMATE)
    assert classify_exit(report_from_log(moved, backend="cuda")).kind == "cuda-oom"
    # the nameless allocation stays open between the GPU and the host (the estimate fits)
    nameless = lines[:2] + (_NAMELESS,)
    inc = classify_exit(report_from_log(nameless, backend="cuda"))
    assert inc.kind == "unknown" and inc.candidates == ("cuda-oom", "host-oom")


# Widened from spent batch 19: ggml's HIP VMM pool out of memory is open between the GPU's
# memory and ROCm's VMM failing with memory free (koboldcpp-rocm#105, llama.cpp#11405), any
# other HipVMM error is a GPU runtime error, and LLamaSharp's RuntimeError, which drops the
# loader's reason, is open between a missing library and a system too old (LLamaSharp#285);
# the catalogue's wordings say why, from vendors/hip.h, llama.cpp#11420 and LLamaSharp's NativeApi.
# Jan's engine.dll failure whose reason FormatMessage lost (janhq/jan#4149) stays a sign.
_HIP_VMM_OOM = "ggml/src/ggml-cuda/ggml-cuda.cu:444: HipVMM Failure: out of memory"  # koboldcpp-rocm#105
_HIP_MALLOC_OOM = ("ggml_backend_cuda_buffer_type_alloc_buffer: allocating 9000.00 MiB on device 0: "
                   "cudaMalloc failed: out of memory")
_ROCM_DEVICE = "  Device 0: AMD Radeon RX 6700 XT, compute capability 10.3, VMM: yes"


@pytest.mark.parametrize("lines", [
    (_HIP_VMM_OOM,),
    # llama.cpp#11405's shape: the device line, the failure, the abort's debugger noise
    ("ggml_cuda_init: found 1 ROCm devices:", _ROCM_DEVICE,
     "/home/u/llama.cpp/ggml/src/ggml-cuda/ggml-cuda.cu:359: HipVMM Failure: out of memory", "",
     "ptrace: Operation not permitted.", "No stack."),
    # hipGetErrorString of an old ROCm gives the enum's name
    ("ggml-cuda.cu:444: HipVMM Failure: hipErrorOutOfMemory",),
])
@pytest.mark.parametrize("backend", ["rocm", None])
def test_rocms_vmm_pool_out_of_memory_is_open_between_its_memory_and_a_rocm_fault(lines, backend):
    inc = classify_exit(report_from_log(lines, signal="SIGABRT", backend=backend))
    assert inc.kind == "unknown" and inc.candidates == ("rocm-oom", "gpu-error")
    assert inc.rule == "hip-vmm-out-of-memory" and "HipVMM Failure" in inc.evidence
    assert "VMM" in inc.advice and inc.recoverable_by is None  # a smaller plan is not the cure for both
    # the line is read as ROCm's allocation (the vendor is in the words), then left open
    pieces = gather(lines, strip_log_prefix)
    assert [p.entry.name for p in pieces if "HipVMM" in p.line] == ["hip.vmm-oom"]
    assert decide(pieces).kind == "rocm-oom"
    # negative: read as ggml-cuda's generic out of memory (the catalogue before batch 19), the
    # same log names a GPU's memory outright
    as_generic = tuple(replace(p, entry=catalogue.entry("cuda.oom")) if p.entry.name == "hip.vmm-oom" else p
                       for p in pieces)
    assert decide(as_generic).kind == "gpu-oom"


def test_without_the_opening_the_vmm_pool_failure_would_be_named_rocm_oom(monkeypatch):
    # negative: with the line not left open, koboldcpp-rocm#105's log is named rocm-oom, the miss
    monkeypatch.setattr(open_readings, "OPEN_BY_LINE",
                        tuple(o for o in open_readings.OPEN_BY_LINE if o.rule != "hip-vmm-out-of-memory"))
    inc = classify_exit(report_from_log((_HIP_VMM_OOM,), backend="rocm"))
    assert inc.kind == "rocm-oom" and not inc.candidates


@pytest.mark.parametrize("line", [
    # hipMemSetAccess refusing (llama.cpp#26054, ROCm/rocm-systems#2516): no memory figure at all
    "ggml/src/ggml-cuda/ggml-cuda.cu:648: HipVMM Failure: invalid argument",
    "ggml-cuda.cu:669: HipVMM Failure: hipErrorInvalidValue",
    "ggml-cuda.cu:444: HipVMM Failure: operation not supported",
])
def test_any_other_hip_vmm_failure_is_a_gpu_runtime_error(line):
    inc = classify_exit(report_from_log((line,), signal="SIGABRT", backend="rocm"))
    assert inc.kind == "gpu-error" and not inc.candidates
    assert classify_exit(report_from_log((line,), signal="SIGABRT")).kind == "gpu-error"


@pytest.mark.parametrize("lines, backend, kind", [
    # the same pool on CUDA runs out for real (ollama#3237's shape): cuda-oom, named
    (("CUDA error: out of memory", "  current device: 0, in function alloc at ggml-cuda.cu:256",
      "  cuMemCreate(&handle, reserve_size, &prop, 0)", 'GGML_ASSERT: ggml-cuda.cu:256: !"CUDA error"'),
     "cuda", "cuda-oom"),
    # ROCm's own hipMalloc running out (the legacy pool, model and KV buffers): rocm-oom, named
    ((_HIP_MALLOC_OOM,), "rocm", "rocm-oom"),
    (("ROCm error: out of memory", "  current device: 0, in function ggml_cuda_op_mul_mat at ggml-cuda.cu:1612"),
     "rocm", "rocm-oom"),
])
def test_an_out_of_memory_outside_rocms_vmm_pool_is_still_named(lines, backend, kind):
    inc = classify_exit(report_from_log(lines, signal="SIGABRT", backend=backend))
    assert inc.kind == kind and not inc.candidates


def test_a_device_line_saying_vmm_is_no_failure():
    assert gather((_ROCM_DEVICE, "  Device 0: AMD Radeon RX 6800, gfx1030 (0x1030), VMM: no"),
                  strip_log_prefix) == ()


def test_the_vmm_pool_failure_meets_other_allocations_and_its_abort_by_the_order():
    # a hipMalloc that failed first is the root cause, named
    assert classify_exit(report_from_log((_HIP_MALLOC_OOM, _HIP_VMM_OOM), backend="rocm")).kind == "rocm-oom"
    # the VMM pool failing first stays open: it is the first allocation
    lines = (_HIP_VMM_OOM, _HIP_MALLOC_OOM)
    inc = classify_exit(report_from_log(lines, backend="rocm"))
    assert inc.kind == "unknown" and inc.candidates == ("rocm-oom", "gpu-error")
    assert verdict(lines).rule == "allocation-named-by-its-first-line"
    # negative (order): without the first-line rule the two allocations are an unranked conflict
    assert verdict(lines, without("allocation-named-by-its-first-line")).rule == "conflict"
    # the abort after it is its echo; with allocation-before-abort reversed the abort wins
    aborted = (_HIP_VMM_OOM, "GGML_ASSERT(false) failed")
    assert classify_exit(report_from_log(aborted, backend="rocm")).candidates == ("rocm-oom", "gpu-error")
    assert verdict(aborted, flipped("allocation-before-abort")).kind == "assertion-failed"


_LLAMASHARP_285 = (
    "System.TypeInitializationException: The type initializer for 'LLama.Native.NativeApi' threw an exception.",
    " ---> LLama.Exceptions.RuntimeError: The native library cannot be correctly loaded. It could be one of "
    "the following reasons: ",
    "1. No LLamaSharp backend was installed. Please search LLamaSharp.Backend and install one of them. ",
    "3. One of the dependency of the native library is missed. Please use `ldd` on linux, `dumpbin` on "
    "windows and `otool`to check if all the dependency of the native library is satisfied.",
    "   at LLama.Native.NativeApi..cctor()",
    "   --- End of inner exception stack trace ---",
    "   at LLama.Native.NativeApi.llama_log_set(LLamaLogCallback logCallback)")
_GLIBC_233 = ("/lib/x86_64-linux-gnu/libc.so.6: version `GLIBC_2.33' not found (required by "
              "/app/runtimes/linux-x64/native/libllama.so)")
_CANNOT_OPEN = ("System.DllNotFoundException: Unable to load shared library 'libllama' or one of its "
                "dependencies. libllama: cannot open shared object file: No such file or directory")


@pytest.mark.parametrize("exit_code", [None, 134])
def test_llamasharps_load_failure_without_its_reason_is_open_between_missing_and_too_old(exit_code):
    inc = classify_exit(report_from_log(_LLAMASHARP_285, exit_code=exit_code))
    assert inc.kind == "unknown" and inc.candidates == ("missing-library", "system-too-old")
    assert inc.rule == "native-load-failed-reason-dropped" and "cannot be correctly loaded" in inc.evidence
    assert "GLIBC" in inc.advice
    # the line is read as a strong missing-library (so the order still ranks it), then left open
    # (the `at LLama.Native.NativeApi.llama_log_set(` frame is only the weak native-call sign)
    pieces = gather(_LLAMASHARP_285, strip_log_prefix)
    telling = [p for p in pieces if p.strength is not catalogue.Strength.WEAK]
    assert [p.entry.name for p in telling] == ["llamasharp.native-load-failed"]
    assert telling[0].strength is catalogue.Strength.STRONG and decide(pieces).kind == "missing-library"


def test_without_the_opening_llamasharps_failure_would_be_named_missing_library(monkeypatch):
    # negative: with the line not left open (the reading before batch 19, which read it as the
    # DllNotFoundException it wraps) LLamaSharp#285's log is named missing-library, the miss
    monkeypatch.setattr(open_readings, "OPEN_BY_LINE",
                        tuple(o for o in open_readings.OPEN_BY_LINE if o.rule != "native-load-failed-reason-dropped"))
    inc = classify_exit(report_from_log(_LLAMASHARP_285))
    assert inc.kind == "missing-library" and not inc.candidates


@pytest.mark.parametrize("reason, kind", [
    (_GLIBC_233, "system-too-old"),  # the loader's reason LLamaSharp#285's log lacks
    (_CANNOT_OPEN, "missing-library"),  # .NET's own exception, with dlerror's words
    ("./libllama.so: error while loading shared libraries: libgomp.so.1: cannot open shared object file",
     "missing-library"),
])
def test_a_line_with_the_loaders_reason_names_the_kind_in_either_order(reason, kind):
    for lines in ((reason,) + _LLAMASHARP_285, _LLAMASHARP_285 + (reason,)):
        inc = classify_exit(report_from_log(lines))
        assert inc.kind == kind and not inc.candidates, lines[0]


def test_llamasharps_failure_yields_to_an_old_glibc_by_the_order():
    lines = _LLAMASHARP_285 + (_GLIBC_233,)
    assert verdict(lines).rule == "versioned-symbol-over-cannot-open"
    # negative (order): with that rule reversed the RuntimeError's missing-library wins
    assert verdict(lines, flipped("versioned-symbol-over-cannot-open")).kind == "missing-library"


@pytest.mark.parametrize("line", [
    # another program's native load failure, in other words
    "SkiaSharp: The native library could not be loaded: libSkiaSharp.so",
    "RuntimeError: The native library 'onnxruntime' cannot be loaded on this platform",
    # LLamaSharp's reasons list quoted on its own, no failure line
    "2. You are using a device with only CPU but installed cuda backend. Please install cpu backend instead.",
])
def test_a_look_alike_of_llamasharps_failure_is_not_read(line):
    assert not [p for p in gather((line,), strip_log_prefix) if p.entry.name == "llamasharp.native-load-failed"]
    assert classify_exit(report_from_log((line,), exit_code=1)).candidates != ("missing-library", "system-too-old")


_JAN_4149 = ('20241128 03:48:41.743000 UTC 21264 ERROR Could not load engine: Could not load library '
             '"C:\\Users\\u\\AppData\\Roaming\\Jan-beta\\data\\extensions\\@janhq\\inference-cortex-extension\\dist'
             '\\bin\\win-cuda-12-0/engines/cortex.llamacpp/engine.dll"',
             "Unknown error (FormatMessage failed) - server.cc:299")


def test_jans_engine_load_failure_whose_reason_formatmessage_lost_is_a_missing_dependency():
    # dylib's get_error_description asks FormatMessageA for US English; a Windows without those
    # messages fails it (microsoft/STL#5104), so the LoadLibrary error code is lost. cortex found
    # engine.dll before loading it, so what is left is most often a DLL it needs (read since spent
    # batches 42 to 44: cortex.cpp#1887; a sign only before)
    inc = classify_exit(report_from_log(_JAN_4149, os="windows", backend="cuda"))
    assert inc.kind == "missing-library" and inc.rule == "sole-evidence"
    assert gather(_JAN_4149[1:], strip_log_prefix) == ()
    # with the reason kept (janhq/jan#4971's shape), the loader's words name it
    kept = (_JAN_4149[0] + " The specified module could not be found.",)
    assert classify_exit(report_from_log(kept, os="windows", backend="cuda")).kind == "missing-library"


# Widened from spent batch 20: whose load a model-load error was. Every launcher that loads a
# draft (llama-server, llama-cli/speculative, KoboldCpp) loads the target first and announces
# the draft's load (`loading draft model '%s'`, KoboldCpp's `Attempting to load draft model
# for speculative decoding.`); llama_model_loader's own lines are printed alike for both, so
# they never place a load. A load error after the draft's announcement is the drafter's
# (koboldcpp#2262), after the target's `loading model '%s'` the model's; placed in neither
# with a drafter in the launch it is open between them (lmstudio-bug-tracker#441). An abort
# with a drafter loaded names no culprit (llama.cpp#23260, #23285: GGML_ASSERT(buffer)).
_KOBOLD_2262 = (
    "Attempting to load draft model for speculative decoding. It will be fully offloaded if possible. "
    "Vocab must match the main model.",
    "llama_model_loader: loaded meta data with 50 key-value pairs and 49 tensors from "
    "C:/m/gemma-4-26b-A4B-it-assistant-QAT-Q4_0.gguf (version GGUF V3 (latest))",
    "print_info: file format = GGUF V3 (latest)",
    "llama_model_load: error loading model: unknown model architecture: 'gemma4-assistant'",
    "llama_model_load_from_file_impl: failed to load model",
    "llama_init_from_model: model cannot be NULL",
    "Error: failed to load speculative decoding draft model 'C:/m/gemma-4-26b-A4B-it-assistant-QAT-Q4_0.gguf'",
    "Speculative Decoding will not be used!",
    "Load Text Model OK: True")
_LMS_441 = (
    "2025-02-17 10:14:59 [DEBUG] ",
    "llama_model_load: error loading model: invalid vector subscript",
    "llama_model_load_from_file_impl: failed to load model",
    "common_init_from_params: failed to load model 'D:\\models\\Qwen2.5-Coder-0.5B-Instruct-Q4_K_M.gguf'")
_LOAD_ERROR = "llama_model_load: error loading model: unknown model architecture: 'gemma4-assistant'"
_META = ("llama_model_loader: loaded meta data with 50 key-value pairs and 49 tensors from {} "
         "(version GGUF V3 (latest))")


def test_koboldcpps_draft_that_fails_to_load_is_the_drafter():
    inc = classify_exit(report_from_log(_KOBOLD_2262, os="windows", has_drafter=True))
    assert inc.kind == "drafter-failure" and not inc.candidates and inc.recoverable_by == "drop-drafter"
    # the load error itself is placed in the draft's load although the draft's own loader line
    # (`loaded meta data ... from`) follows the announcement
    pieces = verdict(_KOBOLD_2262).pieces
    assert [p.entry.name for p in pieces if "error loading model" in p.line] == ["drafter.load-error"]
    # ... and the wrapper's line alone names it too, whichever lines the tail kept
    for line in _KOBOLD_2262[6:7] + (
            "Error: Draft model vocab of (151936) is too different from base vocab of (262144). "
            "Speculative decoding cannot be used!",
            "Error: Speculative decoding cannot be used with Recurrent draft models!"):
        assert classify_exit(report_from_log((line,), has_drafter=True)).kind == "drafter-failure", line
    # from the log alone (drafter read from its words) the answer is the same
    assert classify_exit(report_from_log(_KOBOLD_2262, os="windows")).kind == "drafter-failure"


def test_without_the_announcement_or_the_wrappers_line_koboldcpps_error_is_not_the_drafters():
    # negative: the lines the miss read (the announcement and KoboldCpp's failure line gone):
    # with no drafter known it is the model's architecture, with one it is left open
    bare = _KOBOLD_2262[1:6]
    assert classify_exit(report_from_log(bare, has_drafter=False)).kind == "bad-model"
    inc = classify_exit(report_from_log(bare, has_drafter=True))
    assert inc.kind == "unknown" and inc.candidates == ("bad-model", "drafter-failure")


@pytest.mark.parametrize("lines", [
    # llama-server (server.cpp b4274 on, server-context.cpp b11434): the target, then the draft
    ("srv    load_model: loading model '/m/main.gguf'", _META.format("/m/main.gguf"),
     "srv    load_model: loading draft model '/m/draft.gguf'", _META.format("/m/draft.gguf"), _LOAD_ERROR),
    # the draft's announcement with the draft's loader line naming the same file
    ("srv    load_model: loading draft model 'C:\\m\\draft.gguf'", _META.format("C:/m/draft.gguf"), _LOAD_ERROR),
    # the MTP/DFlash era's common_speculative_init_result
    ("I common_speculative_init_result: loading draft model '.../d.gguf'", _LOAD_ERROR),
])
def test_a_load_error_after_the_drafts_announcement_is_the_drafter(lines):
    inc = classify_exit(report_from_log(lines, exit_code=1, has_drafter=True))
    assert inc.kind == "drafter-failure" and not inc.candidates


@pytest.mark.parametrize("lines", [
    # the target's announcement and its loader line: the draft's load has not begun
    ("srv    load_model: loading model '/m/main.gguf'", _META.format("/m/main.gguf"), _LOAD_ERROR),
    # a draft configured and announced only AFTER the target's load failed
    ("srv    load_model: loading model '/m/main.gguf'", _LOAD_ERROR,
     "srv    load_model: failed to load model, '/m/main.gguf'"),
    # a draft's announcement, its load over (the server up), then the target reloaded
    ("srv    load_model: loading draft model '/m/d.gguf'", "main: server is listening on http://127.0.0.1:8080",
     "srv    load_model: loading model '/m/other.gguf'", _LOAD_ERROR),
])
def test_a_main_model_load_error_with_a_draft_configured_is_the_models(lines):
    inc = classify_exit(report_from_log(lines, exit_code=1, has_drafter=True))
    assert inc.kind == "bad-model" and not inc.candidates


@pytest.mark.parametrize("lines", [
    _LMS_441,  # LM Studio's engine: no announcement of either load
    (_LOAD_ERROR,),
    # a loader line alone places nothing: the draft's load prints it as the target's does
    (_META.format("/m/main.gguf"), _LOAD_ERROR),
    # the draft announced, then a loader line naming ANOTHER file: not the draft's load
    ("srv    load_model: loading draft model '/m/draft.gguf'", _META.format("/m/main.gguf"), _LOAD_ERROR),
    # the server up after the draft's announcement: the error is no load's
    ("srv    load_model: loading draft model '/m/d.gguf'", "main: server is listening on http://127.0.0.1:8080",
     _LOAD_ERROR),
])
def test_a_load_error_placed_in_no_load_with_a_drafter_is_open_between_them(lines):
    inc = classify_exit(report_from_log(lines, has_drafter=True))
    assert inc.kind == "unknown" and inc.candidates == ("bad-model", "drafter-failure")
    assert inc.rule == "load-error-of-an-unnamed-load" and inc.recoverable_by == "drop-drafter"
    assert not inc.counts_as_strike  # the start without the drafter tells first
    # negative: the same lines without a drafter in the launch are the model's
    assert classify_exit(report_from_log(lines, has_drafter=False)).kind == "bad-model"


def test_a_draft_line_with_no_failure_is_no_evidence():
    lines = ("Attempting to load draft model for speculative decoding. It will be fully offloaded if possible.",
             "srv    load_model: loading draft model '/m/draft.gguf'", _META.format("/m/draft.gguf"),
             "Speculative decoding will be used with 3 draft tokens")
    assert verdict(lines).kind is None
    assert classify_exit(report_from_log(lines, exit_code=0)).kind != "drafter-failure"


@pytest.mark.parametrize("line", [
    # other programs' and other contexts' words near KoboldCpp's
    "Error: failed to load speculative decoding context",
    "Draft model vocab of (32000) does not match base vocab of (32002). Speculative decoding may malfunction!",
    "Error: Speculative decoding cannot be used with Recurrent models!",  # the TARGET is recurrent
])
def test_a_look_alike_of_koboldcpps_draft_failure_is_not_read(line):
    assert not [p for p in gather((line,), strip_log_prefix) if p.entry.name == "koboldcpp.draft"]


def test_the_drafters_load_error_meets_its_echoes_by_the_order():
    lines = _KOBOLD_2262[:5] + ("GGML_ASSERT(model) failed",)
    assert verdict(lines).kind == "drafter-failure" and verdict(lines).rule == "drafter-before-its-echoes"
    # negative (order): with drafter-before-its-echoes reversed the abort wins
    assert verdict(lines, flipped("drafter-before-its-echoes")).kind == "assertion-failed"


_ASSERT_23260 = "[39975] /home/u/llama.cpp/ggml/src/ggml-backend.cpp:194: GGML_ASSERT(buffer) failed"
_ASSERT_ENCODER = ('/raid/llama-cpp-dflash/src/llama-context.cpp:2320: GGML_ASSERT(cparams.n_ubatch >= n_tokens '
                   '&& "encoder requires n_ubatch >= n_tokens") failed')


def test_an_abort_with_a_drafter_loaded_is_open_between_them():
    # llama.cpp#23260: GGML_ASSERT(buffer) under --spec-type draft-mtp, a regression bisected to
    # 3e12fbd; the same assert fired in llama-bench with no drafter at all (llama.cpp#23285)
    inc = classify_exit(report_from_log((_ASSERT_23260,), has_drafter=True, backend="rocm"))
    assert inc.kind == "unknown" and inc.candidates == ("assertion-failed", "drafter-failure")
    assert inc.rule == "assertion-with-a-drafter" and inc.recoverable_by == "drop-drafter"
    # negative: without a drafter it is named
    assert classify_exit(report_from_log((_ASSERT_23260,), has_drafter=False)).kind == "assertion-failed"
    # ... and a drafter the user chose is kept and the abort named
    forced = report_from_log((_ASSERT_23260,), has_drafter=True)
    assert classify_exit(replace(forced, drafter_forced=True)).kind == "assertion-failed"


def test_the_encoders_single_shot_check_with_a_drafter_is_the_drafters():
    # only a non-causal context runs llama_context::encode; with a drafter in the launch that is
    # the block-diffusion drafter (buun-llama-cpp#21: DFlash's encoder-style attention)
    inc = classify_exit(report_from_log((_ASSERT_ENCODER, "#3 llama_context::encode(llama_batch const&)"),
                                        signal="SIGABRT", has_drafter=True))
    assert inc.kind == "drafter-failure" and inc.rule == "encoder-check-with-a-drafter"
    # ... while serving too: the drafter encodes on every speculative step
    serving = report_from_log((_ASSERT_ENCODER,), signal="SIGABRT", has_drafter=True, phase="ready")
    assert classify_exit(serving).rule == "encoder-check-with-a-drafter"
    # negative: an embedding model's launch (no drafter) is the assertion
    assert classify_exit(report_from_log((_ASSERT_ENCODER,), signal="SIGABRT")).kind == "assertion-failed"
    # negative: without the encoder exception the abort is left open like any other
    plain = _ASSERT_ENCODER.replace("encoder requires", "needs")
    assert classify_exit(report_from_log((plain,), signal="SIGABRT", has_drafter=True)).kind == "unknown"


def test_a_crash_with_no_telling_line_and_a_drafter_stays_the_drafters():
    inc = classify_exit(report_from_log(("llama_new_context_with_model: n_ctx = 4096",),
                                        exit_code=1, has_drafter=True))
    assert inc.kind == "drafter-failure" and inc.rule == "crash-starting-with-a-catalog-drafter"


def test_a_load_error_before_the_drafts_announcement_is_not_the_drafters():
    # negative (line order): the same lines as koboldcpp#2262's and llama-server's draft case with
    # the error moved before the announcement are no longer the drafter's
    early = (_LOAD_ERROR, "srv    load_model: loading draft model '/m/draft.gguf'")
    assert classify_exit(report_from_log(early, has_drafter=True)).kind == "unknown"
    assert classify_exit(report_from_log(early, has_drafter=False)).kind == "bad-model"
    placed = ("srv    load_model: loading model '/m/main.gguf'",) + early
    assert classify_exit(report_from_log(placed, has_drafter=True)).kind == "bad-model"


def test_without_the_opening_lm_studios_drafts_load_error_would_be_named_bad_model(monkeypatch):
    # negative: with every load taken as the target's (the reading before batch 20),
    # lmstudio-bug-tracker#441's log is named bad-model, the miss
    monkeypatch.setattr(classify, "load_places", lambda lines: tuple(LoadPlace.TARGET for _ in lines))
    inc = classify_exit(report_from_log(_LMS_441, has_drafter=True))
    assert inc.kind == "bad-model" and not inc.candidates


# Widened from spent batch 21: glibc's ABI markers (GLIBC_ABI_DT_RELR from 2.36,
# GLIBC_ABI_DT_X86_64_PLT, GLIBC_ABI_GNU2_TLS, GLIBC_ABI_GNU_TLS from 2025, backported) are
# version nodes like GLIBC_2.xx: the libc lacking one is older than the glibc the requiring file
# was linked on, and which libc that is decides the kind (the versioned-symbol entries, one
# fragment). glibc's own library in /lib or /usr/lib requiring what the libc loaded lacks proves
# another glibc's libc was loaded beside it (LocalAI#9093, fixed by bundling libpthread, libdl
# and librt too in LocalAI#9099); a bundled glibc part needing what the system's libc lacks is
# open between an old system and an incomplete bundle.
_LOCALAI_9093 = ("/home/localai/backends/cuda13-llama-cpp/llama-cpp-avx2: /home/localai/backends/"
                 "cuda13-llama-cpp/lib/libc.so.6: version `GLIBC_ABI_DT_X86_64_PLT' not found "
                 "(required by /usr/lib/x86_64-linux-gnu/libpthread.so.0)")
_GRPC_REFUSED = ('failed starting/connecting to the gRPC service error=rpc error: code = Unavailable desc = '
                 'connection error: desc = "transport: Error while dialing: dial tcp 127.0.0.1:44155: '
                 'connect: connection refused"')
_CANNOT_OPEN = "OSError: libcudart.so.12: cannot open shared object file: No such file or directory"


def _read(lines, **kw):
    return classify_exit(report_from_log(tuple(lines), exit_code=1, **kw))


@pytest.mark.parametrize("line, rule", [
    (_LOCALAI_9093, "ld.glibc-own-requirer"),
    # the line without the libc's path: the system's own libpthread still proves the mix
    ("libc.so.6: version `GLIBC_ABI_DT_X86_64_PLT' not found (required by "
     "/usr/lib/x86_64-linux-gnu/libpthread.so.0)", "ld.glibc-own-requirer"),
    ("/opt/app/lib/libc.so.6: version `GLIBC_2.41' not found (required by /lib64/libdl.so.2)",
     "ld.glibc-own-requirer"),
    # a bundled libc lacking a marker the program itself needs: the bundled copy is stale
    ("/opt/app/lib/libc.so.6: version `GLIBC_ABI_DT_RELR' not found (required by /opt/app/bin/llama-server)",
     "ld.versioned-symbol-bundled"),
])
def test_a_libc_lacking_what_the_systems_glibc_or_the_program_needs_beside_it_is_stale(line, rule):
    inc = _read((line,))
    assert inc.kind == "stale-library" and not inc.candidates
    assert catalogue.matches(line)[0].name == rule


def test_localais_bundled_libc_beside_the_systems_libpthread_is_a_stale_library():
    inc = _read((_LOCALAI_9093, _GRPC_REFUSED), backend="cuda")
    assert inc.kind == "stale-library" and not inc.candidates
    # before batch 21 the marker matched nothing: the gRPC line alone left it unknown
    assert _read((_GRPC_REFUSED,), backend="cuda").kind == "unknown"


@pytest.mark.parametrize("line", [
    # an ABI marker the program (the wrapper's own binary) needs, lacking in the system's libc
    "./llama-server: /lib/x86_64-linux-gnu/libc.so.6: version `GLIBC_ABI_DT_RELR' not found "
    "(required by ./llama-server)",
    "/usr/local/bin/ollama: /lib64/libc.so.6: version `GLIBC_ABI_DT_X86_64_PLT' not found "
    "(required by /usr/local/bin/ollama)",
    "/home/localai/backends/cuda13-llama-cpp/llama-cpp-avx2: /lib/x86_64-linux-gnu/libc.so.6: version "
    "`GLIBC_ABI_GNU2_TLS' not found (required by /home/localai/backends/cuda13-llama-cpp/llama-cpp-avx2)",
    # look-alikes: a release's version and libstdc++'s, from the system's own libraries
    "./llama-server: /lib/x86_64-linux-gnu/libc.so.6: version `GLIBC_2.38' not found (required by ./llama-server)",
    "./server: /lib/x86_64-linux-gnu/libstdc++.so.6: version `GLIBCXX_3.4.30' not found (required by ./server)",
    # libstdc++ is no part of glibc: a system libstdc++ needing more of the system's libc is no mix
    "/lib/x86_64-linux-gnu/libc.so.6: version `GLIBC_2.38' not found (required by "
    "/usr/lib/x86_64-linux-gnu/libstdc++.so.6)",
])
def test_a_version_the_systems_libc_lacks_for_the_program_is_a_system_too_old(line):
    inc = _read((line,))
    assert inc.kind == "system-too-old" and not inc.candidates
    assert catalogue.matches(line)[0].name == "ld.versioned-symbol"


@pytest.mark.parametrize("line", [
    "/lib/x86_64-linux-gnu/libc.so.6: version `GLIBC_ABI_GNU2_TLS' not found "
    "(required by /opt/app/lib/libpthread.so.0)",
    "/lib/x86_64-linux-gnu/libc.so.6: version `GLIBC_2.34' not found (required by /tmp/_MEI4120/libdl.so.2)",
])
def test_a_bundled_glibc_part_needing_more_than_the_systems_libc_is_open(line):
    inc = _read((line,))
    assert inc.kind == "unknown" and inc.candidates == ("system-too-old", "stale-library")
    assert "does not guess" in inc.title


@pytest.mark.parametrize("line", [
    # GLIBCXX and GLIBC_PRIVATE are no glibc release nor ABI marker; a library's own node is
    "/opt/app/lib/libstdc++.so.6: version `GLIBCXX_3.4.30' not found (required by /usr/lib/x86_64-linux-gnu/libm.so.6)",
    "/usr/lib/libc.so.6: version `GLIBC_PRIVATE' not found (required by /usr/lib/libpthread.so.0)",
    "/lib/x86_64-linux-gnu/libc.so.6: version `GLIBC_ABIX' not found (required by /usr/lib/libpthread.so.0)",
])
def test_look_alikes_of_a_glibc_part_requiring_a_version_are_not_read_as_one(line):
    names = {e.name for e in catalogue.matches(line)}
    assert not names & {"ld.glibc-own-requirer", "ld.glibc-part-bundled"}


def test_the_mixed_libc_meets_its_echoes_by_the_order():
    lines = (_LOCALAI_9093, _CANNOT_OPEN)
    assert verdict(lines).kind == "stale-library"
    assert verdict(tuple(reversed(lines))).kind == "stale-library"
    # negative (order): with symbol-over-cannot-open reversed, the cannot-open wins
    assert verdict(lines, flipped("symbol-over-cannot-open")).kind == "missing-library"
    # a marker lacking in the system's libc says why a sibling could not be opened, too
    system = ("./llama-server: /lib/x86_64-linux-gnu/libc.so.6: version `GLIBC_ABI_DT_RELR' not found "
              "(required by ./libggml-base.so)")
    assert verdict((system, _CANNOT_OPEN)).kind == "system-too-old"
    assert verdict((system, _CANNOT_OPEN), flipped("versioned-symbol-over-cannot-open")).kind == "missing-library"


def test_with_the_entries_order_reversed_localais_line_would_be_a_system_too_old(monkeypatch):
    # negative (order): a line's highest-ranked entry is its evidence; read lowest first, the
    # line's generic versioned-symbol entry names the old system, the wrong way
    from stoker.diagnosis import evidence
    monkeypatch.setattr(evidence, "matches", lambda line: tuple(reversed(catalogue.matches(line))))
    assert verdict((_LOCALAI_9093,)).kind == "system-too-old"


# ---- widened after batch 24 (spent): a wrapped paste, llamafile's GPU module, Ollama's runner

def test_a_wrappers_timeout_wrapped_when_pasted_is_read_across_the_break():
    # text-generation-webui modules/llama_cpp_server.py: `Server health check timed out after
    # {max_wait_time} seconds`, pasted broken after "health" (text-generation-webui#6907)
    lines = ("Error loading the model with llama.cpp: Server health",
             "                       check timed out after 28800 seconds")
    assert classify_exit(report_from_log(lines)).kind == "startup-timeout"
    # negative: two messages, the second at the margin, are not one sentence
    apart = (lines[0], lines[1].strip())
    assert classify_exit(report_from_log(apart)).kind != "startup-timeout"
    # negative: a paste indented as a whole stays line by line
    indented = tuple("  " + x.strip() for x in lines)
    assert classify_exit(report_from_log(indented)).kind != "startup-timeout"


_LLAMAFILE = ("building ggml-cuda with nvcc -arch=native...",
              "nvcc fatal   : Value 'native' is not defined for option 'gpu-architecture'",
              "/usr/bin/nvcc: returned nonzero exit status",
              "building ggml-cuda with nvcc -arch=compute_86...",
              "nvcc fatal   : Value 'compute_86' is not defined for option 'gpu-architecture'",
              "/usr/bin/nvcc: returned nonzero exit status",
              '{"timestamp":1701715088,"level":"INFO","function":"main","message":"build info"}')


def test_llamafile_failing_to_build_its_gpu_module_is_the_gpu_unused():
    assert classify_exit(report_from_log(_LLAMAFILE)).kind == "gpu-unused"
    # negative: the second attempt built it (no failure after the last `building` line)
    second_built = _LLAMAFILE[:4] + ("link_cuda_dso: GPU support loaded",) + _LLAMAFILE[6:]
    assert classify_exit(report_from_log(second_built)).kind != "gpu-unused"
    # negative: both builds failed, then a module was linked after all
    linked = _LLAMAFILE[:6] + ("link_cuda_dso: GPU support loaded",) + _LLAMAFILE[6:]
    assert classify_exit(report_from_log(linked)).kind != "gpu-unused"
    # order: a failed first build followed by a new attempt is not the failure
    assert classify_exit(report_from_log(_LLAMAFILE[:4])).kind != "gpu-unused"


_OLLAMA_PLAN = ('time=2025-05-21T17:49:23.790+08:00 level=INFO source=server.go:168 msg=offload library=cuda '
                'layers.requested=-1 layers.model=29 layers.offload=29 layers.split="" memory.available="[22.4 GiB]"')


def test_ollama_planning_the_gpu_while_its_runner_loaded_only_the_cpu_is_the_gpu_unused():
    # ml/backend/ggml/ggml.go's `system` line lists the loaded backends' features
    cpu_only = ("time=2025-05-21T17:49:23.905+08:00 level=INFO source=ggml.go:104 msg=system CPU.0.LLAMAFILE=1 "
                "compiler=cgo(gcc)")
    got = classify_exit(report_from_log((_OLLAMA_PLAN, cpu_only)))
    assert got.kind == "gpu-unused" and "29 layers on CUDA" in got.evidence
    # the same lines wrapped between keys when pasted (ollama#10798)
    p, c = _OLLAMA_PLAN.index(" layers.model"), cpu_only.index(" msg=system")
    wrapped = (_OLLAMA_PLAN[:p], " " + _OLLAMA_PLAN[p:], cpu_only[:c], " " + cpu_only[c:])
    assert classify_exit(report_from_log(wrapped)).kind == "gpu-unused"
    # negative: the runner loaded CUDA, even when the wrap put it on the next line
    with_cuda = cpu_only.replace("compiler=", "CUDA.0.ARCHS=500,600,700 CUDA.0.USE_GRAPHS=1 compiler=")
    assert classify_exit(report_from_log((_OLLAMA_PLAN, with_cuda))).kind != "gpu-unused"
    cut = with_cuda.index("CUDA.0")
    assert classify_exit(report_from_log((_OLLAMA_PLAN, with_cuda[:cut], "  " + with_cuda[cut:]))).kind != "gpu-unused"
    # negative: a plan that put no layer on the GPU, and a system line with no plan before it
    no_layers = _OLLAMA_PLAN.replace("layers.offload=29", "layers.offload=0")
    assert classify_exit(report_from_log((no_layers, cpu_only))).kind != "gpu-unused"
    assert classify_exit(report_from_log((cpu_only,))).kind != "gpu-unused"


# ---- widened after batch 25 (spent): Metal's unimplemented op, a projector's missing key,
# libnvidia-container's CUDA requirement

def test_metals_not_implemented_assert_is_an_assertion_not_a_failed_command_buffer():
    line = 'GGML_ASSERT: ggml-metal.m:539: false && "not implemented"'
    assert classify_exit(report_from_log((line,), signal="SIGABRT", backend="metal")).kind == "assertion-failed"
    # negative: the bare assert after a failed command buffer still says no reason, left open
    failed = ("ggml_metal_graph_compute: command buffer 0 failed with status 5",
              "GGML_ASSERT: ggml-metal.m:1290: false")
    got = classify_exit(report_from_log(failed, signal="SIGABRT", backend="metal"))
    assert got.kind != "assertion-failed" and set(got.candidates) == {"metal-oom", "gpu-error"}


@pytest.mark.parametrize("line", [
    "Error: llama runner process has terminated: error:Missing required key: clip.has_text_encoder",
    "clip_model_load: key clip.has_vision_encoder not found in file",
    "mtmd_init_from_file: error: Key not found: clip.vision.image_size",
])
def test_a_projector_missing_a_key_its_loader_needs_is_the_bad_model(line):
    assert classify_exit(report_from_log((line,), exit_code=1)).kind == "bad-model"


def test_a_missing_key_outside_a_projector_is_not_the_bad_model():
    # the same words from any program's config check say nothing of a model file
    assert classify_exit(report_from_log(("ValueError: Missing required key: destinations",),
                                         exit_code=1)).kind != "bad-model"


def test_the_container_runtimes_cuda_requirement_is_the_driver_too_old():
    line = ("nvidia-container-cli: requirement error: unsatisfied condition: cuda>=12.8, please update your "
            "driver to a newer version, or use an earlier cuda container: unknown")
    assert classify_exit(report_from_log((line,), exit_code=1)).kind == "cuda-driver-too-old"
    # negative: another unsatisfied condition (the GPU's brand) is not the driver's age
    brand = "nvidia-container-cli: requirement error: unsatisfied condition: brand = tesla, please update your driver"
    assert classify_exit(report_from_log((brand,), exit_code=1)).kind != "cuda-driver-too-old"


def test_the_gpu_unused_checks_read_a_one_shot_iterator_of_lines_whole():
    # the later checks (llamafile's build, Ollama's runner) read the lines again
    from stoker.diagnosis.silent_fallbacks import gpu_unused_from_log

    assert gpu_unused_from_log(iter(_LLAMAFILE), None, False) == "/usr/bin/nvcc: returned nonzero exit status"


# ---- widened after batches 26 and 27 (spent): ggml's op numbers, the projector type, a library
# of the right name but another build, Mesa's lost context, llama-run's parser, a zero batch

_UNARY = "D:\\a\\llama.cpp\\llama.cpp\\ggml\\src\\ggml.c:1726: GGML_ASSERT(tensor->op == GGML_OP_UNARY) failed"


def test_ggml_get_unary_op_failing_is_a_foreign_ggml_library():
    got = diagnose(_UNARY, exit_code=0xC0000409, os="windows")
    assert got.kind == "stale-library" and got.rule == "sole-evidence"
    # negative: any other GGML_ASSERT on its own is still the assertion
    other = _UNARY.replace("tensor->op == GGML_OP_UNARY", "ggml_can_mul_mat(a, b)")
    assert diagnose(other, exit_code=0xC0000409, os="windows").kind == "assertion-failed"


def test_an_allocation_before_the_op_number_assert_is_the_allocation():
    # order: memory-over-optional-backend puts a failed allocation before a loader sign
    lines = (CUDA_OOM, _UNARY)
    assert verdict(lines).kind == "gpu-oom"
    assert verdict(lines, flipped("memory-over-optional-backend")).kind == "stale-library"


@pytest.mark.parametrize("line", [
    "D:\\a\\x\\llamacpp\\native\\vendor\\llama.cpp\\tools\\mtmd\\clip.cpp:4391: Unknown projector type",
    "clip_model_loader: unknown projector type: gemma4v",
    "mtmd_init_from_file: unexpected audio projector type 17",
    "SigLIP: Unsupported projector type",
])
def test_a_projector_type_the_build_does_not_know_is_the_bad_model(line):
    got = diagnose(line, "WARNING: Using native backtrace. Set GGML_BACKTRACE_LLDB for more info.",
                   "1   libggml-base.0.13.1.dylib   0x000000010140156c ggml_abort + 156")
    assert got.kind == "bad-model"


def test_the_projector_types_own_info_line_is_no_evidence():
    # negative: clip.cpp prints the type it loaded; a later abort stays the assertion
    got = diagnose("clip_model_loader: projector type: gemma3", "GGML_ASSERT(ctx) failed", signal="SIGABRT")
    assert got.kind == "assertion-failed"


def test_a_library_lacking_its_own_version_node_is_another_build_of_it():
    line = ("/tmp/ollama3603894721/runners/cuda_v11/ollama_llama_server: /usr/local/cuda/lib64/"
            "libcublas.so.11: version `libcublas.so.11' not found (required by /tmp/x/ollama_llama_server)")
    assert diagnose(line, exit_code=1).kind == "stale-library"
    assert verdict((line,)).winner.entry.name == "ld.library-version-same-name"
    # negative: a node naming another major is that major missing (the existing reading)
    other = line.replace("version `libcublas.so.11'", "version `libcublas.so.12'")
    assert diagnose(other, exit_code=1).kind == "missing-library"


def test_with_the_entries_order_reversed_the_same_name_line_would_be_missing(monkeypatch):
    # negative (order): the line matches both library-version entries; read lowest first it is
    # the other-major reading
    from stoker.diagnosis import evidence
    line = "/usr/local/cuda/lib64/libcublas.so.11: version `libcublas.so.11' not found (required by ./x)"
    monkeypatch.setattr(evidence, "matches", lambda text: tuple(reversed(catalogue.matches(text))))
    assert verdict((line,)).kind == "missing-library"


_MESA_LOST = ("radv/amdgpu: The CS has been cancelled because the context is lost. "
              "This context is innocent.")


def test_mesas_lost_context_is_the_device_lost():
    assert diagnose(_MESA_LOST).kind == "gpu-error"
    # order: after a failed allocation it is that allocation (device-lost-is-the-allocation)
    lines = ("radv/amdgpu: Not enough memory for command submission.", _MESA_LOST)
    assert verdict(lines).kind == "vulkan-oom"
    assert verdict(lines, flipped("device-lost-is-the-allocation")).kind == "gpu-error"


def test_llama_runs_parser_refusal_is_the_bad_argument():
    lines = ("exec_cmd:  docker run --rm -i quay.io/ramalama/ramalama:latest llama-run -c 2048 --jinja "
             "/mnt/models/model.file", "Error: Failed to parse arguments.", "Description:", "  Runs a llm")
    assert diagnose(*lines).kind == "bad-argument"
    # negative: a tool call's JSON the model wrote, with the same first words, is no refusal
    tool = "Error: Failed to parse arguments. Expected valid JSON. Received: {"
    assert diagnose(tool).kind != "bad-argument"


_ZERO_BATCH = ("/root/llama.cpp/build-cuda/bin/llama-server \\", "  --model /m/Qwen3-4B-Q4_K_M.gguf \\",
               "  --batch-size 0", "/root/llama.cpp/src/llama-context.cpp:2225:",
               "GGML_ASSERT(n_outputs >= 1) failed")


def test_a_zero_batch_size_is_the_bad_argument_before_its_abort():
    v = verdict(_ZERO_BATCH)
    assert (v.kind, v.rule) == ("bad-argument", "argument-before-load")
    # order: with argument-before-load reversed the abort wins
    assert verdict(_ZERO_BATCH, flipped("argument-before-load")).kind == "assertion-failed"
    # negatives: -ub 0 means "as -b" (valid), and a real batch size is no sign
    for ok in ("  --ubatch-size 0", "  -ub 0", "  --batch-size 512", "  -b 2048"):
        lines = _ZERO_BATCH[:2] + (ok,) + _ZERO_BATCH[3:]
        assert verdict(lines).kind == "assertion-failed", ok
    assert verdict(("llama_context: n_batch       = 0", "GGML_ASSERT(n_outputs >= 1) failed")).kind == "bad-argument"


# ---- written from the sources before batch 28 was read: the shells' job lines, PyTorch's
# allocator, Ollama's rewrite of an unknown architecture, rocBLAS under Ollama, a missing program

@pytest.mark.parametrize("line, kind", [
    ("zsh: killed     ./llama-server -m /m/x.gguf", "host-oom"),
    ("zsh: illegal hardware instruction  ./main -m /m/x.gguf", "illegal-instruction"),
    ("[1]+  Killed                  ./llama-server -m /m/x.gguf", "host-oom"),
])
def test_the_shells_job_lines_give_the_signal(line, kind):
    assert diagnose(line).kind == kind


@pytest.mark.parametrize("line", ["zsh: command not found: llama-server", "[1]+  Done    ./llama-server",
                                  "zsh: correct 'llama-sever' to 'llama-server' [nyae]?"])
def test_shell_lines_that_are_no_signal_give_none(line):
    # negative: the shell said something, but not how a process ended
    assert diagnose(line).exit_description.startswith("the exit status is unknown")


def test_pytorchs_gpu_allocator_is_the_gpu_not_the_host():
    assert diagnose("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
                    backend="cuda").kind == "cuda-oom"
    assert diagnose("torch.cuda.OutOfMemoryError", backend="cuda").kind == "cuda-oom"
    assert diagnose("torch.OutOfMemoryError: HIP out of memory. Tried to allocate 2.00 GiB").kind == "rocm-oom"
    # negative: Python's own MemoryError is the host's
    assert diagnose("MemoryError", exit_code=1).kind == "host-oom"


def test_ollamas_rewrite_of_an_unknown_architecture_is_the_bad_model():
    line = ("Error: llama runner process has terminated: this model is not supported by your version "
            "of Ollama. You may need to upgrade")
    assert diagnose(line).kind == "bad-model"
    # order: after a loader failure it is that failure's echo (loader-before-load)
    lines = ("The specified module could not be found.", line)
    assert verdict(lines).kind == "missing-library"
    assert verdict(lines, flipped("loader-before-load")).kind == "bad-model"


def test_rocblas_without_tensile_kernels_under_ollama_is_no_kernel_image():
    line = "Error: llama runner process has terminated: error:Could not initialize Tensile host: No devices found"
    assert diagnose(line).kind == "no-kernel-image"
    # negative: other words after `error:` are not rocBLAS's
    assert diagnose("Error: llama runner process has terminated: error:Could not open file").kind != "no-kernel-image"


@pytest.mark.parametrize("line", [
    "zsh: command not found: llama-server", "bash: llama-cli: command not found",
    "'llama-server' is not recognized as an internal or external command,",
    "llama-server : The term 'llama-server' is not recognized as the name of a cmdlet, function, script file",
])
def test_the_engine_program_missing_from_the_shell_is_missing(line):
    assert diagnose(line).kind == "missing-library"


def test_another_program_missing_from_the_shell_is_not_the_engine():
    # negative: a build tool or any other command says nothing of the engine
    assert diagnose("bash: cmake: command not found").kind != "missing-library"


@pytest.mark.parametrize("line", [
    "clip_init: failed to load model '/m/mmproj.gguf': clip_model_loader: unable to find tensor mm.0.weight",
    "mtmd_init_from_file: error: Failed to load CLIP model from /m/mmproj.gguf",
    "Model format not supported (no matching implementation found)",
])
def test_a_projector_or_gpt4all_model_no_loader_takes_is_the_bad_model(line):
    assert diagnose(line, exit_code=1).kind == "bad-model"


def test_an_allocation_inside_the_projectors_load_error_is_the_allocation():
    # negative: clip_init's `failed to load model` carries the why; an allocation there is memory
    line = ("clip_init: failed to load model '/m/mmproj.gguf': ggml_backend_cuda_buffer_type_alloc_buffer: "
            "allocating 900.00 MiB on device 0: cudaMalloc failed: out of memory")
    assert diagnose(line, exit_code=1, backend="cuda").kind == "cuda-oom"
    # order: the allocation on a line of its own before mtmd's closing line
    lines = ("ggml_backend_cuda_buffer_type_alloc_buffer: allocating 900.00 MiB on device 0: cudaMalloc failed: "
             "out of memory", "mtmd_init_from_file: error: Failed to load CLIP model from /m/mmproj.gguf")
    assert verdict(lines).kind == "gpu-oom"
    assert verdict(lines, flipped("allocation-inside-load-error")).kind == "bad-model"


# ---- widened after batch 28 (spent): llamafile's CPU check, ik_llama.cpp's DFlash drafter, the
# vocabulary loader, a wrapper's wait running out, ROCr's fault reports, ggml's context pool

_CPUCHECK = ("./llava-v1.5-7b-q4.llamafile: fatal error: the cpu feature AVX was required at build time "
             "but isn't available on this system")


def test_llamafiles_cpu_check_is_the_illegal_instruction():
    assert diagnose(_CPUCHECK, "exiting process.", exit_code=1).kind == "illegal-instruction"
    # order: the build fault comes first even when a wrapper then reports a failed load
    lines = (_CPUCHECK, "llama_model_load: error loading model: failed to open GGUF file")
    assert verdict(lines).kind == "illegal-instruction"
    assert verdict(lines, flipped("build-fault-first")).kind == "bad-model"
    # negative: the system_info line that lists the features is no evidence
    assert diagnose("system_info: n_threads = 4 | AVX = 0 | AVX2 = 0 | FMA = 0 |", exit_code=1).kind == "unknown"


_DFLASH = ("common_speculative_init: DFlash context target/slot=384000 logical=384000 cross_ctx=383995",
           "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 24050.69 MiB on device 0: cudaMalloc "
           "failed: out of memory",
           "ggml_gallocr_reserve_n: failed to allocate CUDA0 buffer of size 25218973696",
           "llama_prepare_dflash_graph_inputs: failed to initialize DFlash K/V scheduler",
           "draft: DFlash draft decode failed (status=-1 local_pos=1 history_rows=1 capacity=384000)")


def test_a_dflash_draft_that_cannot_decode_is_the_drafter_before_its_allocation():
    v = verdict(_DFLASH)
    assert (v.kind, v.rule) == ("drafter-failure", "drafter-before-its-echoes")
    assert verdict(_DFLASH, flipped("drafter-before-its-echoes")).kind == "gpu-oom"
    # negative: the DFlash context's announcement alone does not make an allocation the drafter's
    assert verdict(_DFLASH[:3]).kind == "gpu-oom"


_VOCAB = ("llama.cpp error: 'error loading model vocabulary: unknown pre-tokenizer type: "
          "'deepseek-r1-qwen''")


@pytest.mark.parametrize("line", [
    _VOCAB, "\"cause\": \"" + _VOCAB + "\",",
    "llama_model_load: error loading model: error loading model vocabulary: cannot find tokenizer vocab",
    "llama_model_load: error loading model: CLIP cannot be used as main model, use it with --mmproj instead",
])
def test_the_vocabulary_loaders_refusal_is_the_bad_model(line):
    assert diagnose(line).kind == "bad-model"


def test_the_vocabulary_loaders_refusal_before_its_abort_is_the_bad_model():
    lines = (_VOCAB, "GGML_ASSERT(model) failed")
    assert verdict(lines).kind == "bad-model"
    assert verdict(lines, flipped("load-error-before-abort")).kind == "assertion-failed"
    # negative: older llama.cpp's warning for a missing pre-tokenizer is no refusal
    assert diagnose("llm_load_vocab: missing pre-tokenizer type, using: 'default'", exit_code=1).kind == "unknown"


def test_a_wrappers_wait_that_ran_out_is_the_startup_timeout():
    assert diagnose("Starting server with model: Qwen3-VL-8B.Q8_0.gguf", "Error: Server did not start in time",
                    "Server stopped").kind == "startup-timeout"
    # order: an allocation that failed while the wrapper waited is the cause
    lines = (CUDA_OOM, "Error: Server did not start in time")
    assert verdict(lines).kind == "gpu-oom"
    assert verdict(lines, flipped("allocation-inside-load-error")).kind == "startup-timeout"
    # negative: something else not starting in time says nothing of the engine
    assert diagnose("Error: subtask did not start in time").kind != "startup-timeout"


_APERTURE = (":0:rocdevice.cpp            :2992: 4026031038 us:  Callback: Queue 0x7d8018200000 aborting with "
             "error : HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION: The agent attempted to access memory beyond "
             "the largest legal address. code: 0x29")
_FAULT = ("Memory access fault by GPU node-1 (Agent handle: 0x5f2b1c0) on address 0x7f3a00000000. "
          "Reason: Page not present or supervisor privilege.")


@pytest.mark.parametrize("line", [_APERTURE, _FAULT])
def test_rocrs_fault_reports_are_the_gpu_error(line):
    assert diagnose(line, signal="SIGABRT").kind == "gpu-error"


def test_a_gpu_fault_after_a_failed_allocation_is_the_allocation():
    lines = ("ggml_backend_cuda_buffer_type_alloc_buffer: allocating 9000.00 MiB on device 0: "
             "hipMalloc failed: out of memory", _FAULT)
    assert verdict(lines).kind == "gpu-oom"
    assert verdict(lines, flipped("device-lost-is-the-allocation")).kind == "gpu-error"
    # negative: ROCr's invalid-ISA status is still a build without this GPU's code
    assert diagnose("HSA_STATUS_ERROR_INVALID_ISA: The instruction set architecture is invalid.").kind \
        == "no-kernel-image"


_POOL = "ggml_new_object: not enough space in the context's memory pool (needed 1638880, available 1638544)"


def test_ggmls_context_pool_too_small_is_the_engines_assertion():
    assert diagnose(_POOL).kind == "assertion-failed"
    # order: a failed allocation before it is the cause (allocation-before-abort)
    lines = (CUDA_OOM, _POOL)
    assert verdict(lines).kind == "gpu-oom"
    assert verdict(lines, flipped("allocation-before-abort")).kind == "assertion-failed"
    # negative: the pool's own malloc failing is the host's memory, not a miscount
    assert diagnose("GGML_ASSERT: ggml.c:4412: ctx->mem_buffer != NULL", signal="SIGABRT").kind == "host-oom"


# ---- widened after batch 29 (spent): ctypes's missing export, Mesa's Venus ring, a device that
# got none of the weights, ggml-metal's assert pasted without its colon

_CTYPES = "AttributeError: function 'llama_load_model_from_file' not found"


def test_a_binding_missing_a_llama_export_is_another_build_of_the_library():
    assert diagnose("from llama_cpp import Llama", _CTYPES).kind == "stale-library"
    # order: a missing export beats a sibling library that could not be opened
    lines = ("FileNotFoundError: Could not find module 'C:\\x\\ggml-cuda.dll' (or one of its dependencies).",
             _CTYPES)
    assert verdict(lines).kind == "stale-library"
    assert verdict(lines, flipped("symbol-over-cannot-open")).kind == "missing-library"
    # negatives: another library's export, or Python's own attribute error, says nothing of llama.cpp
    assert diagnose("AttributeError: function 'sd_ctx_new' not found").kind != "stale-library"
    assert diagnose("AttributeError: 'Llama' object has no attribute 'ctx'").kind != "stale-library"


_VENUS = "MESA-VIRTIO: debug: vn_ring_submit abort on fatal"


def test_venus_aborting_its_ring_is_the_device_lost():
    assert diagnose("*silence*", _VENUS).kind == "gpu-error"
    lines = ("ggml_vulkan: Device memory allocation of size 4294967296 failed.",
             "ggml_vulkan: vk::Device::allocateMemory: ErrorOutOfDeviceMemory", _VENUS)
    assert verdict(lines).kind == "vulkan-oom"
    assert verdict(lines, flipped("device-lost-is-the-allocation")).kind == "gpu-error"
    # negative: Venus's other debug lines are no fault
    assert diagnose("MESA-VIRTIO: debug: vn_ring_submit slow").kind != "gpu-error"


def _load(offloaded, *buffers):
    return (f"load_tensors: offloaded {offloaded} layers to GPU",) + tuple(
        f"load_tensors: {name:>12} model buffer size = {mib:8.2f} MiB" for name, mib in buffers)


def test_a_device_that_got_none_of_the_weights_is_the_gpu_unused():
    cann = _load("37/37", ("CPU", 15622.0), ("CANN0", 1.18))
    got = silent_fallbacks.gpu_unused_from_log(cann, None, False)
    assert got is not None and "15622.00 MiB" in got
    assert diagnose(*cann).kind == "gpu-unused"
    # negatives: a full offload keeps the token embeddings on the host; --cpu-moe keeps the
    # experts there; a CPU build with RPC prints the offload line with host buffers only; a
    # small model; a partial offload; a later load that did reach the device
    for ok in (_load("37/37", ("CPU_Mapped", 1190.0), ("CUDA0", 15000.0)),
               _load("37/37", ("CPU_Mapped", 60000.0), ("CUDA0", 2500.0)),
               _load("31/31", ("CPU_Mapped", 4000.0)),
               _load("31/31", ("CPU", 500.0), ("CUDA0", 0.5)),
               _load("20/37", ("CPU", 15622.0), ("CUDA0", 1.0)),
               cann + _load("37/37", ("CPU", 1190.0), ("CANN0", 14000.0))):
        assert silent_fallbacks.gpu_unused_from_log(ok, None, False) is None, ok


def test_ggml_metals_assert_without_its_colon_is_the_failed_command_buffer():
    inc = diagnose("GGML_ASSERT: /Users/x/ggml/ggml-metal.m:1459 false", "Abort trap: 6", signal="SIGABRT")
    assert inc.kind == "unknown" and inc.candidates == ("metal-oom", "gpu-error")
    # negative: an op the Metal backend lacks is the assertion it is, colon or not
    assert diagnose("GGML_ASSERT: ggml-metal.m:738 false && \"not implemented\"",
                    signal="SIGABRT").kind == "assertion-failed"


# ---- widened after batch 30 (spent): ctypes's words on macOS, Android's linker, the driver's own
# libcuda lacking an entry point, a multiarch path that lost its slash, a bind on another host

def test_ctypes_on_macos_missing_a_llama_export_is_another_build():
    line = "AttributeError: dlsym(0x308a36490, llama_context_default_params): symbol not found"
    assert diagnose("from .llama_cpp import *", line).kind == "stale-library"
    # negative: another library's symbol says nothing of llama.cpp
    assert diagnose("AttributeError: dlsym(0x308a36490, sd_ctx_new): symbol not found").kind != "stale-library"


def test_androids_linker_not_finding_the_engine_library_is_missing():
    line = ('OSError: dlopen failed: library "/data/data/com.termux/files/home/koboldcpp/koboldcpp_default.so" '
            "not found")
    assert diagnose(line).kind == "missing-library"
    # order: a missing library ends the start before the load that follows fails
    lines = (line, "llama_model_load: error loading model: failed to open GGUF file")
    assert verdict(lines).kind == "missing-library"
    assert verdict(lines, flipped("loader-before-load")).kind == "bad-model"


_LIBCUDA = ('msg="Unable to load nvcuda" library=/usr/lib64/libcuda.so.418.74 error="symbol lookup for '
            'cuCtxCreate_v3 failed: /usr/lib64/libcuda.so.418.74: undefined symbol: cuCtxCreate_v3"')


def test_the_drivers_libcuda_lacking_an_entry_point_is_the_driver_too_old():
    assert diagnose(_LIBCUDA).kind == "cuda-driver-too-old"
    # order: the build fault beats the 32-bit copy's wrong ELF class, a stale-library reading
    lines = ("/usr/lib/libcuda.so.418.74: wrong ELF class: ELFCLASS32", _LIBCUDA)
    assert verdict(lines).kind == "cuda-driver-too-old"
    assert verdict(lines, without("build-fault-first")).kind != "cuda-driver-too-old"
    # negative: ggml's CUDA library lacking a symbol is not the driver's own library
    assert diagnose("./libggml-cuda.so: undefined symbol: ggml_cuda_op_mul_mat").kind == "stale-library"


def test_a_multiarch_libc_that_lost_its_slash_is_the_systems():
    line = ("lib/x86_64-linux-gnu/libc.so.6: version `GLIBC_2.32' not found (required by ./lib/python3.9/"
            "site-packages/gpt4all/llmodel_DO_NOT_MODIFY/build/libllmodel.so)")
    assert diagnose(line).kind == "system-too-old"
    # negative: a libc inside an app's own folder is still a bundled copy
    bundled = line.replace("lib/x86_64-linux-gnu/libc.so.6", "/opt/app/lib/libc.so.6")
    assert diagnose(bundled).kind == "stale-library"


@pytest.mark.parametrize("host, kind", [
    ("127.0.0.0", "unknown"), ("192.168.1.20", "unknown"),
    ("127.0.0.1", "port-in-use"), ("0.0.0.0", "port-in-use"), ("localhost", "port-in-use"), ("::1", "port-in-use"),
])
def test_a_bind_on_another_host_is_left_open(host, kind):
    inc = diagnose(f"main: couldn't bind HTTP server socket, hostname: {host}, port: 9000", exit_code=1)
    assert inc.kind == kind
    if kind == "unknown":
        assert inc.candidates == ("port-in-use", "bad-argument")


# ---- widened after batch 31 (spent): a wrapper's -1, a stated reason beside LM Studio's memory
# figure, an assert on the MTP head, node-llama-cpp leaving CUDA, WasmEdge without its WASI-NN
# plugin or model, Go's listen address without a port

@pytest.mark.parametrize("exit_code, not_kind", [(-1, "stopped"), (-1, "illegal-instruction")])
def test_a_wrappers_exit_code_minus_one_names_no_signal(exit_code, not_kind):
    # tabby (Rust) printed `exited with status code -1` for an engine a signal ended
    inc = diagnose("llama-server <embedding> exited with status code -1", exit_code=exit_code)
    assert inc.kind == "unknown" and inc.kind != not_kind
    assert "SIGHUP" not in (inc.exit_description or "")
    # negative: Python's -N is still signal N, and -1 from the log's words is read alike
    assert diagnose("llama_model_loader: loaded meta data", exit_code=-4).kind == "illegal-instruction"
    assert diagnose("llama_model_loader: loaded meta data", exit_code=-9).kind == "host-oom"


_LMS_FIGURES = ('"ram_capacity": "62.72 GB",', '"ram_unused": "62.72 KB"')


def test_a_stated_reason_outranks_lm_studios_memory_figure():
    lines = ('"title": "Failed to load model",',
             '"cause": "llama.cpp error: \'done_getting_tensors: wrong number of tensors; expected 292, got 291\'",',
             *_LMS_FIGURES)
    v = verdict(lines)
    assert v.kind == "bad-model" and v.rule == "stated-reason-over-figure"
    # order reversed (the rule dropped): the figure's memory wins by allocation-inside-load-error
    dropped = decide(draft_scoped(lines, gather(lines, strip_log_prefix)), reason_over_figure=False)
    assert dropped.kind == "host-oom"
    # negative: with no reason of its own (lmstudio-bug-tracker#14's empty cause) the figure decides
    empty = ('"title": "Failed to load model",', '"cause": "",', *_LMS_FIGURES)
    assert verdict(empty).kind == "host-oom"
    # ... nor against an engine's own allocation line: memory meets memory by the order
    assert verdict((CUDA_OOM, *_LMS_FIGURES)).rule == "allocation-named-by-its-first-line"


_MTP_ASSERT = ("/src/llama.cpp/src/llama-model.cpp:1227: GGML_ASSERT(hparams.n_layer_nextn < "
               "hparams.n_layer_all) failed")


@pytest.mark.parametrize("line", [
    _MTP_ASSERT,
    '/src/llama.cpp/src/models/deepseek2.cpp:172: GGML_ASSERT(hparams.n_layer_nextn > 0 && "GLM4 MTP requires '
    'n_layer_nextn > 0") failed',
    '/src/llama.cpp/src/models/deepseek2.cpp:181: GGML_ASSERT(layer.nextn.eh_proj && "MTP block missing '
    'nextn.eh_proj") failed',
])
def test_an_assert_on_the_mtp_head_with_a_drafter_is_the_drafter(line):
    lines = ("srv    load_model: loading model '/m/gemma-4-26B-A4B-it-Q8_0.gguf'", line)
    inc = classify_exit(report_from_log(lines, has_drafter=True))
    assert inc.kind == "drafter-failure" and inc.rule == "assertion-on-the-mtp-head"
    # negative: without a drafter the same assert is the engine's (a model with built-in MTP
    # layers loads them without speculative decoding too)
    assert classify_exit(report_from_log(lines, has_drafter=False)).kind == "assertion-failed"


def test_another_assert_with_a_drafter_stays_open():
    lines = ("/src/ggml/src/ggml-backend.cpp:1900: GGML_ASSERT(buffer) failed",)
    inc = classify_exit(report_from_log(lines, has_drafter=True))
    assert inc.kind == "unknown" and inc.candidates == ("assertion-failed", "drafter-failure")


@pytest.mark.parametrize("line, unused", [
    ('{"level":"warn","message":"[node-llama-cpp] The prebuilt binary for platform \\"linux\\" \\"x64\\" with '
     'CUDA support is not compatible with the current system, falling back to using no GPU"}', True),
    ('[node-llama-cpp] Failed to load a prebuilt binary for platform "mac" "arm64" with Metal support, falling '
     'back to using no GPU. Error: dlopen failed', True),
    # negative: its Vulkan attempt follows any Vulkan loader, a headless server's too
    ('[node-llama-cpp] The prebuilt binary for platform "linux" "x64" with Vulkan support is not compatible '
     'with the current system, falling back to using no GPU', False),
    ("[node-llama-cpp] A prebuilt binary was not found, falling back to using no GPU", False),
])
def test_node_llama_cpp_leaving_cuda_or_metal_is_the_gpu_unused(line, unused):
    assert (silent_fallbacks.gpu_unused_from_log((line,), None, False) is not None) is unused
    assert (diagnose(line).kind == "gpu-unused") is unused


@pytest.mark.parametrize("line, kind", [
    ("unknown option: nn-preload", "missing-library"),
    ("[2024-06-03 18:48:03.977] [error] [WASI-NN] GGML backend: Model file not found.", "bad-model"),
    ("2025/07/03 14:41:53 Fatal server error: listen tcp: address 8000: missing port in address", "bad-argument"),
    ("listen tcp: address ::1:8080: too many colons in address", "bad-argument"),
])
def test_a_wording_widened_after_batch_31_names_its_kind(line, kind):
    assert diagnose(line).kind == kind


@pytest.mark.parametrize("line, not_kind", [
    ("unknown option: ctx-size", "missing-library"),  # any other option WasmEdge does not know
    ("Error: listen tcp 127.0.0.1:8080: bind: address already in use", "bad-argument"),
])
def test_a_look_alike_of_a_batch_31_wording_is_not_that_kind(line, not_kind):
    assert diagnose(line).kind != not_kind


def test_a_taken_port_in_go_stays_the_port():
    assert diagnose("Error: listen tcp 127.0.0.1:8080: bind: address already in use").kind == "port-in-use"


# ---- widened after batch 32 (spent): a hard-wrapped paste read across its break, the kernel's
# amdgpu page fault, Docker's port allocator, tabby's cudaMalloc advice, an invalid GPU code object
# left open, llama.cpp's host buffer malloc of 2023

_MODAL = ("RemoteError: Image build for im-Arbk6QjxvEerqHIijMkS1g failed with the",
          "exception:",
          "OSError(\"/usr/lib/x86_64-linux-gnu/libstdc++.so.6: version `GLIBCXX_3.4.29' not",
          "found (required by",
          "/usr/local/lib/python3.11/site-packages/gpt4all/llmodel_DO_NOT_MODIFY/build/libl",
          "lmodel.so)\")")


def test_a_wording_hard_wrapped_at_the_margin_is_read_across_the_break():
    inc = diagnose(*_MODAL)
    assert inc.kind == "system-too-old" and "not found (required by" in (inc.evidence or "")
    # negative: a short line is a line of its own, never a wrapped one
    short = ("libstdc++.so.6: version `GLIBCXX_3.4.29' not", "found (required by x)")
    assert diagnose(*short).kind == "unknown"
    # ... and a line the catalogue reads is no wrapped tail: a device line before an assert is not
    # read as "memory ... failed" across the two (ik_llama.cpp#1749)
    device = ("ggml_vulkan: 0 = NVIDIA GeForce RTX 3060 (NVIDIA) | uma: 0 | fp16: 1 | warp size: 32 | "
              "shared memory: 49152 | int dot: 1 | matrix cores: NV_coopmat2")
    assert diagnose(device, "ggml-vulkan.cpp:2169: GGML_ASSERT((GGML_KQ_MASK_PAD % rows_cols[0]) == 0) failed",
                    signal="SIGABRT").kind == "assertion-failed"
    # ... nor a line that begins as a log line of its own (a `name: ` prefix)
    assert diagnose(device, "main: exiting, the warm-up failed").kind != "vulkan-oom"


@pytest.mark.parametrize("line, kind", [
    ("Aug 08 22:35:13 host kernel: amdgpu 0000:c3:00.0: amdgpu: [gfxhub] page fault (src_id:0 ring:24 vmid:8 "
     "pasid:32794)", "gpu-error"),
    ("amdgpu 0000:c3:00.0: amdgpu: GCVM_L2_PROTECTION_FAULT_STATUS:0x00801031", "gpu-error"),
    ("docker: Error response from daemon: driver failed programming external connectivity on endpoint local-ai "
     "(f1e7): Bind for 0.0.0.0:8080 failed: port is already allocated.", "port-in-use"),
    ("  CUDA memory allocation error detected:", "cuda-oom"),
    (r"GGML_ASSERT: D:\a\ctransformers\ctransformers\models\ggml/llama.cpp:453: data", "host-oom"),
])
def test_a_wording_widened_after_batch_32_names_its_kind(line, kind):
    assert diagnose(line).kind == kind


@pytest.mark.parametrize("line, not_kind", [
    ("amdgpu 0000:c3:00.0: amdgpu: SMU is initialized successfully!", "gpu-error"),
    # another file's `GGML_ASSERT(data)` guards device or mapped memory, not llama.cpp's host buffer
    ("GGML_ASSERT: /src/ggml/src/ggml-openvino/ggml-openvino.cpp:412: data", "host-oom"),
    ("GGML_ASSERT: /src/llama.cpp:453: data->ne[0] == 4", "host-oom"),
])
def test_a_look_alike_of_a_batch_32_wording_is_not_that_kind(line, not_kind):
    assert diagnose(line).kind != not_kind


@pytest.mark.parametrize("line", [
    "CUDA error: device kernel image is invalid",
    "CUDA error 200 at ggml-cuda.cu:100: cudaErrorInvalidKernelImage",
])
def test_an_invalid_cuda_code_object_is_left_open(line):
    inc = diagnose(line, "  current device: 0, in function ggml_cuda_compute_forward", signal="SIGABRT")
    assert inc.kind == "unknown" and inc.candidates == ("no-kernel-image", "gpu-error")
    assert inc.rule == "kernel-image-invalid"
    # negative: no code object for the device at all is the build's architecture, named
    assert diagnose("ROCm error: hipErrorNoBinaryForGpu: Unable to find code object for all current devices",
                    signal="SIGABRT").kind == "no-kernel-image"
    assert diagnose("CUDA error: no kernel image is available for execution on the device",
                    signal="SIGABRT").kind == "no-kernel-image"


# ---- widened after batches 33 and 34 (spent): b11434's newer quantized-V refusal and its
# parallel-sequence bound, clap's invalid value, rocBLAS's list of the Tensile files it has,
# RamaLama's readiness wait, Lemonade's and LLamaSharp's fall-backs to the CPU

@pytest.mark.parametrize("line, kind", [
    ("llama_init_from_model: failed to initialize the context: quantized V cache was requested, but this "
     "requires Flash Attention", "bad-argument"),
    ("llama_init_from_model: failed to initialize the context: n_seq_max must be <= 256", "bad-argument"),
    ("error: invalid value 'cuda' for '--device <DEVICE>'", "bad-argument"),
    ('Mar 02 06:28:39 ubuntu ollama[1295]: "/usr/local/lib/ollama/rocm/rocblas/library/'
     'TensileLibrary_lazy_gfx1030.dat"', "no-kernel-image"),
    (" List of available TensileLibrary Files : ", "no-kernel-image"),
    ("Error: llama-server at 0.0.0.0:8080 did not become ready after 10 seconds.", "startup-timeout"),
    ("WARNING:  Loading Qwen3-30B-A3B-GGUF on GPU didn't work, re-attempting on CPU", "gpu-unused"),
])
def test_a_wording_widened_after_batches_33_and_34_names_its_kind(line, kind):
    assert diagnose(line).kind == kind


@pytest.mark.parametrize("line, not_kind", [
    # a context that reports its sequences is no refusal
    ("llama_context: n_seq_max     = 4", "bad-argument"),
    # clap's value error for a value, not an option, and a Tensile file named outside the list
    ("error: invalid value", "bad-argument"),
    ("rocblas: loading /opt/rocm/lib/rocblas/library/TensileLibrary_lazy_gfx1100.dat", "no-kernel-image"),
    # a wrapper that says only that its server is not ready, with no wait that ran out
    ("Error: request_failed: Lemonade server did not become ready: exit status: 1;", "startup-timeout"),
    ("INFO:     GPU acceleration active: 1 Vulkan device(s) detected by llama-server", "gpu-unused"),
])
def test_a_look_alike_of_a_batch_33_or_34_wording_is_not_that_kind(line, not_kind):
    assert diagnose(line).kind != not_kind


_LLAMASHARP_TRIES = ("[llama Info]: Detected cuda major version 12.",
                     "[llama Debug]: Trying './runtimes/linux-x64/native/cuda12/libllama.so'")


def test_llamasharp_loading_its_cpu_build_after_its_cuda_build_failed_is_the_gpu_unused():
    inc = diagnose(*_LLAMASHARP_TRIES,
                   "[llama Info]: Failed Loading './runtimes/linux-x64/native/cuda12/libllama.so'",
                   "[llama Debug]: Trying './runtimes/linux-x64/native/avx/libllama.so'",
                   "[llama Info]: Loaded './runtimes/linux-x64/native/avx/libllama.so'")
    assert inc.kind == "gpu-unused" and "cuda12" in (inc.evidence or "") and "avx" in (inc.evidence or "")
    # negatives: the CUDA build loaded, or the CPU build failed too (then nothing runs)
    assert diagnose(*_LLAMASHARP_TRIES,
                    "[llama Info]: Loaded './runtimes/linux-x64/native/cuda12/libllama.so'").kind != "gpu-unused"
    assert diagnose(*_LLAMASHARP_TRIES,
                    "[llama Info]: Failed Loading './runtimes/linux-x64/native/cuda12/libllama.so'",
                    "[llama Info]: Failed Loading './runtimes/linux-x64/native/avx/libllama.so'").kind != "gpu-unused"
    # ... and an order the other way round (a CPU build loaded before a GPU one was tried) is not it
    assert diagnose("[llama Info]: Loaded './runtimes/linux-x64/native/avx/libllama.so'",
                    "[llama Info]: Failed Loading './runtimes/linux-x64/native/cuda12/libllama.so'"
                    ).kind != "gpu-unused"


# ---- written from b11434's sources, not from threads (while batch 36 was gathered): the
# message ggml_abort prints for any GGML_ABORT, every refusal of gguf.cpp's reader, and the
# per-purpose buffers of the KV cache, the recurrent state, LoRA adapters and control vectors

@pytest.mark.parametrize("line, kind", [
    # ggml_abort's `<__FILE__>:<__LINE__>: <message>`, on Linux and Windows build paths
    ("/home/user/llama.cpp/ggml/src/ggml-cpu/ops.cpp:8123: fatal error", "assertion-failed"),
    (r"D:\a\llama.cpp\llama.cpp\ggml\src\ggml-backend.cpp:1234: pre-allocated tensor in a backend "
     "that cannot run the operation", "assertion-failed"),
    ("/tmp/build/llama.cpp/src/llama-graph.cpp:456: unexpected sampler type", "assertion-failed"),
    # gguf.cpp's reader (gguf_init_from_reader in b11434, gguf_init_from_file_impl before)
    ("gguf_init_from_reader: tensor 'blk.0.attn_q.weight' has invalid ggml type 99. should be in [0, 40)",
     "bad-model"),
    ("gguf_init_from_file_impl: duplicate key 'general.name' for KV pair 12", "bad-model"),
    ("gguf_init_from_reader: number of tensors is -5 but must be in [0, 1152921504606846975]", "bad-model"),
    ("gguf_init_from_reader: alignment 3 is not a power of 2", "bad-model"),
    ("gguf_init_from_reader: this GGUF file is version 4 but this software only supports up to version 3",
     "bad-model"),
    ("gguf_init_from_reader: incorrect shape for a tensor 'output.weight' may cause overflow errors: "
     "[4096, 32000, 1, 1]", "bad-model"),
    ("gguf_init_from_reader: memory size overflow while allocating ggml context", "bad-model"),
    ("gguf_read_emplace_helper: encountered length_error while reading value for key 'tokenizer.ggml.tokens'",
     "bad-model"),
    # the per-purpose buffers (b11434 llama-kv-cache.cpp, llama-memory-recurrent.cpp, llama-adapter.cpp)
    ("llama_memory_recurrent: failed to allocate buffer for rs cache", "host-oom"),
    ("llama_adapter_lora_init_impl: failed to allocate buffer for lora adapter", "host-oom"),
    ("llama_adapter_cvec::init: failed to allocate buffer for control vector", "host-oom"),
    # ggml-alloc's renamed reserve, ggml-backend's default buffer, the cache types, the template
    ("ggml_gallocr_reserve_n_impl: failed to allocate CPU buffer of size 2147483648", "host-oom"),
    ("ggml_backend_buft_alloc_buffer_n_default: failed to allocate CPU buffer of size 8589934592", "host-oom"),
    ("llama_init_from_model: V cache type q4_0 with block size 32 does not divide n_embd_head_v=80",
     "bad-argument"),
    ("llama_init_from_model: K cache type q5_1 with block size 32 does not divide n_embd_head_k=72",
     "bad-argument"),
    ("common_chat_templates_init: failed to initialize chat template", "bad-model"),
])
def test_a_wording_from_the_b11434_sources_names_its_kind(line, kind):
    # a CPU build: a nameless allocation there is the host's memory
    assert diagnose(line, backend="cpu").kind == kind


@pytest.mark.parametrize("line, not_kind", [
    # a compiler's diagnostics name a file and line too, but are not an abort
    ("/home/user/llama.cpp/ggml/src/ggml.c:1234:5: error: implicit declaration of function 'foo'",
     "assertion-failed"),
    ("/home/user/llama.cpp/ggml/src/ggml.c:1234: warning: ignoring return value", "assertion-failed"),
    ("/home/user/llama.cpp/src/llama.cpp:88: note: in expansion of macro", "assertion-failed"),
    # the linker's errors name a source line too
    ("/home/user/llama.cpp/ggml/src/ggml-cuda/ggml-cuda.cu:412: undefined reference to `cublasCreate_v2'",
     "assertion-failed"),
    # another project's sources, and a Go file of a wrapper
    ("/home/user/whatever/lib/foo.cpp:12: something happened", "assertion-failed"),
    ("/go/src/github.com/ollama/ollama/llm/server.go:123: llama runner started", "assertion-failed"),
    # the reader's own progress lines and a key simply absent, not refused
    ("gguf_init_from_reader: loaded 291 tensors", "bad-model"),
    ("llama_model_loader: - kv   0: general.architecture str = llama", "bad-model"),
    # a buffer allocated, not failed (as printed, and padded as b11434 pads it)
    ("llama_kv_cache: CPU KV buffer size = 256.00 MiB", "host-oom"),
    ("llama_kv_cache:        CPU KV buffer size =   256.00 MiB", "host-oom"),
    # a template that only loses its tool calls (a warning), and a cache type reported, not refused
    ("common_chat_templates_init: failed to parse tool use chat template (ignoring it): x", "bad-model"),
    ("llama_context: V cache type q8_0", "bad-argument"),
])
def test_a_look_alike_of_a_b11434_source_wording_is_not_that_kind(line, not_kind):
    assert diagnose(line, backend="cpu").kind != not_kind


def test_an_allocation_before_a_generic_abort_is_the_allocation():
    lines = ("llama_init_from_model: failed to allocate buffer for kv cache",
             "/home/user/llama.cpp/src/llama-context.cpp:345: fatal error")
    v = verdict(lines)
    assert v.kind == "device-oom" and v.rule == "allocation-before-abort"
    assert verdict(lines, flipped("allocation-before-abort")).kind == "assertion-failed"


def test_a_load_error_before_a_generic_abort_is_the_model():
    lines = ("gguf_init_from_reader: duplicate tensor name 'blk.0.ffn_up.weight' for tensor 12",
             "/home/user/llama.cpp/src/llama-model-loader.cpp:900: fatal error")
    v = verdict(lines)
    assert v.kind == "bad-model" and v.rule == "load-error-before-abort"
    assert verdict(lines, flipped("load-error-before-abort")).kind == "assertion-failed"


def test_a_sycl_buffer_the_device_cannot_hold_is_a_device_allocation():
    (piece,) = gather(("ensure_half: can't allocate 268435456 Bytes of memory on device",), strip_log_prefix)
    assert piece.entry.name == "sycl.oom"
    # ... and its twin on the host stays the host's
    (piece,) = gather(("aligned_malloc_host: can't allocate 268435456 Bytes of memory on host",), strip_log_prefix)
    assert piece.kind == "host-oom"


# ---- widened after batches 35 and 36 (spent): Android's linker starting a program, HIP's fat
# binary without the device's ISA, the wrappers' own words for a build without the GPU's
# architecture, gin-contrib/cors's refusal of an origin, and Ollama's discovery leaving the GPU

@pytest.mark.parametrize("line, kind", [
    ('CANNOT LINK EXECUTABLE "/data/local/tmp/llama-cli": library "libllama.so" not found: needed by main '
     'executable', "missing-library"),
    ('CANNOT LINK EXECUTABLE "/data/local/tmp/llama-cli": cannot locate symbol "ggml_backend_dev_count" '
     'referenced by "/data/local/tmp/libllama.so"...', "stale-library"),
    ("Cannot find CO in the bundle /opt/rocm-6.4.3/lib/librocsolver.so.0.4.60403 for ISA: gfx906:sramecc+:xnack-",
     "no-kernel-image"),
    ("2024/01/14 19:50:06 gpu.go:138: CUDA GPU is too old. Falling back to CPU mode. Compute Capability "
     "detected: 5.2", "no-kernel-image"),
    ('msg="skipping CUDA device — compute capability not in compiled architectures"', "no-kernel-image"),
    ('msg="dropping ROCm device — no rocblas support for gfx target" gfx=gfx1036', "no-kernel-image"),
    ("Error: Cannot install llamacpp:rocm on this system: Unsupported GPU: gfx950", "no-kernel-image"),
    ("panic: bad origin: origins must contain '*' or include http://,https://,chrome-extension://",
     "bad-argument"),
])
def test_a_wording_widened_after_batches_35_and_36_names_its_kind(line, kind):
    assert diagnose(line).kind == kind


@pytest.mark.parametrize("line, not_kind", [
    # a library the linker found, and a symbol a program looks up itself
    ('linker: library "libllama.so" loaded from /data/local/tmp', "missing-library"),
    ('dlsym: cannot locate symbol "foo" in the program (optional)', "stale-library"),
    # a bundle that has the ISA, and an old cudart answering for a newer card (compute 1.x)
    ("Found CO in the bundle /opt/rocm/lib/librocblas.so for ISA: gfx1100", "no-kernel-image"),
    ('source=gpu.go:148 msg="[0] CUDA GPU is too old. Compute Capability detected: 1.0"', "no-kernel-image"),
    # a CUDA device Ollama keeps, and an unsupported CPU, not GPU
    ('msg="using CUDA device" compute capability=8.6', "no-kernel-image"),
    ("Unsupported GPU driver version", "no-kernel-image"),
    # Metal's shader compiler refusing a static_assert is no ggml abort
    ("error: static_assert failed due to requirement '__tensor_ops_detail::__is_same_v<bfloat, half>'",
     "assertion-failed"),
    # CORS answering one request with 403 is no start-up refusal
    ('[GIN] 2024/02/26 | 403 | OPTIONS "/api/chat" origin not allowed', "bad-argument"),
])
def test_a_look_alike_of_a_batch_35_or_36_wording_is_not_that_kind(line, not_kind):
    assert diagnose(line).kind != not_kind


def test_ollama_skipping_every_library_of_a_family_it_was_asked_for_is_the_gpu_unused():
    skipped = ('msg="skipping available library at users request" requested=cuda libDir=/usr/lib/ollama/cuda_v12',
               'msg="skipping available library at users request" requested=cuda libDir=/usr/lib/ollama/cuda_v13')
    inc = diagnose(*skipped, backend="cuda")
    assert inc.kind == "gpu-unused" and "requested=cuda" in (inc.evidence or "")
    # ... as the 2026 source words it (`user's`, slog's quoting)
    assert diagnose('level=DEBUG msg="skipping available library at user\'s request" requested=cuda '
                    'libDir=/usr/lib/ollama/cuda_v13', backend="cuda").kind == "gpu-unused"
    # negative: asking for one version skips the other, and the GPU runs on the one asked for
    assert diagnose('msg="skipping available library at users request" requested=cuda_v12 '
                    'libDir=/usr/lib/ollama/cuda_v13', backend="cuda").kind != "gpu-unused"
    # ... and asking for the CPU is the user's choice, not a fallback
    assert diagnose('msg="skipping available library at users request" requested=cpu '
                    'libDir=/usr/lib/ollama/cuda_v12', backend="cuda").kind != "gpu-unused"


def test_ollama_finding_nvml_but_failing_to_init_it_is_the_gpu_unused_on_a_gpu_build():
    line = ('msg="Unable to load CUDA management library /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.550.54.14: '
            'nvml vram init failure: 999"')
    assert diagnose(line, 'msg="no GPU detected"', backend="cuda").kind == "gpu-unused"
    # a CPU build says nothing about a GPU it never meant to use
    assert diagnose(line, 'msg="no GPU detected"', backend="cpu").kind != "gpu-unused"


def test_a_build_without_the_gpus_architecture_outranks_the_gpu_left():
    # the wrapper's skip names the cause; the CPU run after it is the echo
    inc = diagnose('msg="skipping CUDA device — compute capability not in compiled architectures"',
                   'msg="no compatible GPUs were discovered"', backend="cuda")
    assert inc.kind == "no-kernel-image"


# ---- widened after batch 37 (spent): a model over the engine's compiled limits, the Metal shader
# compiler rejecting ggml's tensor-ops source, and a driver that lost the device under Ollama

@pytest.mark.parametrize("line", [
    "Error: llama runner process has terminated: GGML_ASSERT(hparams.n_expert <= LLAMA_MAX_EXPERTS) failed",
    "/src/llama.cpp/src/llama-model.cpp:1330: GGML_ASSERT(hparams.n_layer_all > 0 && hparams.n_layer_all "
    "<= LLAMA_MAX_LAYERS) failed",
])
def test_a_model_over_the_engines_compiled_limits_is_the_bad_model(line):
    (piece,) = gather((line,), strip_log_prefix)
    assert piece.entry.name == "model.over-engine-limit"
    assert diagnose(line, signal="SIGABRT").kind == "bad-model"


def test_a_request_over_the_sequence_limit_is_not_the_model():
    assert diagnose("llama-memory-hybrid-idx.cpp:171: GGML_ASSERT(seq_id < (llama_seq_id) LLAMA_MAX_SEQ) failed",
                    signal="SIGABRT").kind == "assertion-failed"


def test_the_metal_compiler_rejecting_the_tensor_ops_shaders_is_a_gpu_error():
    lines = ("ggml_metal_library_init: error: Error Domain=MTLLibraryErrorDomain Code=3",
             "  static_assert failed due to requirement '__tensor_ops_detail::__is_same_v<bfloat, half>'",
             '  "Input types must match cooperative tensor types"',
             "ggml_metal_init: error: failed to initialize the Metal library")
    assert diagnose(*lines, backend="metal").kind == "gpu-error"
    # negative: a compile error that is not the tensor-ops check stays a sign (an older macOS?)
    assert diagnose("ggml_metal_library_init: error: Error Domain=MTLLibraryErrorDomain Code=3",
                    "  program_source:12:1: error: unknown type name 'bfloat'",
                    "ggml_metal_init: error: failed to initialize the Metal library",
                    backend="metal").kind != "gpu-error"


def test_ollama_losing_the_device_in_its_container_is_the_gpu_unused():
    line = ('cuda driver library failed to get device context 800time=2025-07-11T07:00:00.476Z level=WARN '
            'source=gpu.go:434 msg="error looking up nvidia GPU memory"')
    assert diagnose(line, backend="cuda").kind == "gpu-unused"
    assert diagnose(line, backend="cpu").kind != "gpu-unused"


# ---- widened after batch 38 (spent): Node's listen EACCES as its message, the SYCL runtime
# without a device inside a load error, and a GPU build whose system info lists no GPU backend

def test_nodes_listen_eacces_on_an_unprivileged_port_is_the_port():
    assert diagnose("Error starting server Error: listen EACCES: permission denied 127.0.0.1:1234").kind \
        == "port-in-use"
    # a port under 1024 may be the privilege, not the port: not named
    assert diagnose("Error: listen EACCES: permission denied 0.0.0.0:80").kind != "port-in-use"


def test_the_sycl_runtime_without_a_device_inside_a_load_error_is_the_runtimes():
    lines = ("found 1 SYCL devices:",
             "llama_model_load: error loading model: DeviceList is empty. -30 (PI_ERROR_INVALID_VALUE)",
             "llama_load_model_from_file: exception loading model")
    assert diagnose(*lines, backend="sycl").kind == "gpu-error"
    # negative: a load error without it stays the model's
    assert diagnose("llama_model_load: error loading model: invalid model file", backend="sycl").kind == "bad-model"


@pytest.mark.parametrize("backend, line, unused", [
    # Ollama 0.5's runner: every CPU variant tried, no CUDA backend among what loaded
    ("cuda", 'time=2025-03-05T20:08:37.823+08:00 level=INFO source=runner.go:934 msg=system info="CPU : '
             'LLAMAFILE = 1 | cgo(clang)" threads=8', True),
    ("rocm", "system_info: n_threads = 8 (n_threads_batch = 8) / 16 | CPU : SSE3 = 1 | AVX2 = 1 |", True),
    # the GPU backend among them: used
    ("cuda", "system_info: n_threads = 8 (n_threads_batch = 8) / 16 | CUDA : ARCHS = 890 | USE_GRAPHS = 1 | "
             "CPU : SSE3 = 1 |", False),
    ("rocm", 'msg=system info="ROCm : NO_VMM = 1 | CPU : SSE3 = 1 |"', False),
    # a CPU build, or a backend whose features the line may not list, says nothing
    ("cpu", "system_info: n_threads = 8 | CPU : SSE3 = 1 |", False),
    ("vulkan", "system_info: n_threads = 8 | CPU : SSE3 = 1 |", False),
])
def test_a_gpu_build_whose_system_info_lists_no_gpu_backend_runs_on_the_cpu(backend, line, unused):
    assert (diagnose(line, backend=backend).kind == "gpu-unused") is unused


def test_an_rpc_worker_that_cannot_listen_is_its_port_and_a_bad_host_is_the_argument():
    # rpc-server, b11434: a failed bind or listen (SO_REUSEADDR set, so not a TIME_WAIT port)
    starting = ("Starting RPC server v3.0.0", "  endpoint       : 127.0.0.1:50052")
    assert diagnose(*starting, "Failed to create server socket", exit_code=1).kind == "port-in-use"
    # a host that is no IPv4 address is refused before the bind, in words of its own
    assert diagnose(*starting, "Invalid host address: my-box.local", "Failed to create server socket",
                    exit_code=1).kind == "bad-argument"
    # look-alikes: a wrapper's sentence with the same words inside it, and the accept loop's own failure
    assert diagnose("warning: Failed to create server socket for metrics, continuing").kind != "port-in-use"
    assert diagnose("Failed to accept client connection").kind != "port-in-use"


# ---- widened after batches 39 and 40 (spent): the V-cache refusal's 2024 words, main_gpu
# refused with no device, Lemonade's CLI giving up on a load, and a GPU backend library that
# never loaded

def test_the_2024_v_cache_refusal_is_the_argument_not_the_context_allocation():
    lines = ("llama_new_context_with_model: V cache quantization requires flash_attn",
             "common_init_from_params: failed to create context with model 'm.gguf'",
             "main: error: unable to load model")
    assert diagnose(*lines, backend="cuda").kind == "bad-argument"
    # negative: the context failure alone on a CUDA build stays an allocation's
    assert diagnose(*lines[1:], backend="cuda").kind != "bad-argument"


def test_main_gpu_refused_with_no_device_is_no_gpu_not_the_option():
    none = "llama_prepare_model_devices: invalid value for main_gpu: 0 (available devices: 0)"
    loaded = "llama_model_load_from_file_impl: failed to load model"
    assert diagnose(none, loaded, backend="cuda").kind == "unknown"  # which cause: the lines before say
    # ... and a line before it that names the cause decides
    assert diagnose("ggml_cuda_init: failed to initialize CUDA: CUDA driver version is insufficient for "
                    "CUDA runtime version", none, loaded, backend="cuda").kind == "cuda-driver-too-old"
    # negative: a main_gpu past the devices there are is the user's option
    assert diagnose("llama_prepare_model_devices: invalid value for main_gpu: 3 (available devices: 2)",
                    loaded, backend="cuda").kind == "bad-argument"


def test_lemonades_cli_giving_up_on_a_load_is_a_startup_timeout_not_the_model():
    lines = ("Loading model: user.GLM-4.6V_Q6",
             "Error loading model: Could not connect to Lemonade server (Failed to read connection).",
             "Make sure the server is running and try again.")
    assert diagnose(*lines).kind == "startup-timeout"
    # negative: a server that is not running is no load at all
    assert diagnose("Error loading model: Could not connect to Lemonade server (Could not establish "
                    "connection).").kind != "startup-timeout"
    # order: a crash the server logged before the read ended is the cause, not the wait
    assert diagnose("CUDA error: out of memory", *lines[1:], backend="cuda").kind == "cuda-oom"


@pytest.mark.parametrize("backend, lines, unused", [
    # unsloth#6273: a CUDA build whose ggml-cuda.dll did not load (its CUDA 13 runtime DLLs off PATH)
    ("cuda", (r"load_backend: loaded RPC backend from ...\ggml-rpc.dll",
              r"load_backend: loaded CPU backend from ...\ggml-cpu-cascadelake.dll"), True),
    ("vulkan", ("load_backend: loaded CPU backend from /app/libggml-cpu-haswell.so",), True),
    # the build's own backend loaded (before or after the CPU's, as Ollama's two folders do): used
    ("cuda", ("load_backend: loaded CUDA backend from /usr/lib/ollama/cuda_v12/libggml-cuda.so",
              "load_backend: loaded CPU backend from /usr/lib/ollama/libggml-cpu-haswell.so"), False),
    ("rocm", ("load_backend: loaded CPU backend from /usr/lib/ollama/libggml-cpu-haswell.so",
              "load_backend: loaded ROCm backend from /usr/lib/ollama/rocm/libggml-hip.so"), False),
    # a CPU build, or a backend that is not loaded as a library (Metal), says nothing
    ("cpu", ("load_backend: loaded CPU backend from ./libggml-cpu.so",), False),
    ("metal", ("load_backend: loaded CPU backend from ./libggml-cpu.so",), False),
])
def test_a_gpu_build_whose_backend_library_never_loaded_runs_on_the_cpu(backend, lines, unused):
    assert (diagnose(*lines, backend=backend).kind == "gpu-unused") is unused


# ---- widened after batch 41 (spent): Unsloth Studio's health wait, Ollama's missing runner
# folder, and a segfault inside a GPU runtime's library

def test_unsloth_studio_giving_up_on_its_server_is_a_startup_timeout():
    lines = ("Pre-caching helper GGUF: unsloth/gemma-4-E2B-it-GGUF/gemma-4-E2B-it-UD-Q4_K_XL.gguf",
             "Error: server did not become healthy within 30 seconds.")
    assert diagnose(*lines).kind == "startup-timeout"
    # look-alike: the same words with no wait named (a shortcut that did not start it)
    assert diagnose("Unsloth did not become healthy when launched via the shortcut").kind != "startup-timeout"


def test_ollamas_missing_runner_folder_is_a_missing_library_and_its_echo_is_not():
    missing = ("2024/09/09 04:48:23 config.go:173: ERROR unable to locate llm runner directory. "
               "Set OLLAMA_RUNNERS_DIR to the location of 'ollama/runners'")
    assert diagnose(missing, "Error: no suitable llama servers found").kind == "missing-library"
    # the closing error alone follows any runner's failure: not read as this
    assert diagnose("Error: no suitable llama servers found").kind != "missing-library"


def test_a_segfault_inside_a_gpu_runtime_library_is_the_gpu_stack():
    found = ("ggml_cuda_init: found 1 ROCm devices (Total VRAM: 16368 MiB):",
             "  Device 0: AMD Radeon RX 6900 XT, gfx1030 (0x1030), VMM: no, Wave Size: 32, VRAM: 16368 MiB",
             "Segmentation fault (core dumped)")
    comgr = "segfault at ... ip ... error 4 in libamd_comgr.so.3.0"
    assert diagnose(*found, comgr, signal="SIGSEGV", backend="rocm").kind == "gpu-error"
    assert diagnose("llama-server[4242]: segfault at 7f00 ip 00007f12 sp 00007ffd error 4 in "
                    "libcuda.so.580.65.06[7f12+1000]", signal="SIGSEGV", backend="cuda").kind == "gpu-error"
    # look-alike: a fault in ggml's own library is not the vendor's
    assert diagnose(*found, "segfault at 0 ip 00007f12 sp 00007ffd error 4 in libggml-base.so[7f12+1000]",
                    signal="SIGSEGV", backend="rocm").kind != "gpu-error"
    # order: an allocation that failed first is the cause, the crash its echo
    first = diagnose("ggml_backend_cuda_buffer_type_alloc_buffer: allocating 9000.00 MiB on device 0: "
                     "cudaMalloc failed: out of memory", comgr, signal="SIGSEGV", backend="rocm")
    assert (first.kind, first.rule) == ("rocm-oom", "device-lost-is-the-allocation")


# ---- widened after batches 42 and 43 (spent): Ollama's vocab-only load, the -ngl warning of a
# build that cannot offload, cortex's engine library refused, LocalAI's worker without its
# backend, and CUDA's unnamed error

BLOB = "/usr/share/ollama/.ollama/models/blobs/sha256-1fa8532d986d729117d6b5ac2c884824d0717c94"


@pytest.mark.parametrize("line", [
    f"Error: unable to load model: {BLOB}",
    r"Error: 500 Internal Server Error: unable to load model: C:\Users\John Doe\.ollama\models\blobs\sha256-6e41",
    f'level=INFO source=sched.go:455 msg="NewLlamaServer failed" model={BLOB} error="unable to load model: {BLOB}"',
])
def test_ollamas_vocab_only_load_failing_is_the_model(line):
    assert diagnose(line).kind == "bad-model"


def test_ollamas_runner_failing_its_full_load_is_not_read_as_the_model():
    # the runner's own load allocates the weights: its panic says nothing of which cause
    assert diagnose(f"panic: unable to load model: {BLOB}").kind == "unknown"
    # order: an allocation the runner logged before its panic is the cause
    assert diagnose(CUDA_OOM, f"panic: unable to load model: {BLOB}", backend="cuda").kind == "cuda-oom"
    # ... and before the server's vocab-only words too (a memory line beats a load error)
    assert diagnose(CUDA_OOM, f"Error: unable to load model: {BLOB}", backend="cuda").kind == "cuda-oom"


def test_layers_asked_of_a_build_that_cannot_offload_leave_the_gpu_unused():
    ignored = "warning: no usable GPU found, --gpu-layers option will be ignored"
    for backend in (None, "cpu", "cuda"):
        assert diagnose(ignored, backend=backend).kind == "gpu-unused"
    # look-alike: a discovery finding no GPU on a build the user chose as the CPU's asked for nothing
    assert diagnose("no usable GPU found", backend="cpu").kind != "gpu-unused"
    # order: a failure the log states is the cause, the ignored layers a remark
    assert diagnose(ignored, "error: invalid argument: --ctx-sizee", exit_code=1).kind == "bad-argument"


def test_cortex_refusing_its_engine_library_with_the_reason_lost_is_a_missing_dependency():
    lost = ('Model failed to start: Could not load engine llama-cpp: Could not load engine cortex.llamacpp: '
            'Could not load library "engine.dll"')
    assert diagnose(lost, os="windows").kind == "missing-library"
    # the reason on the next line decides: another build's entry point is the stale library
    stale = diagnose(lost, "The specified procedure could not be found.", os="windows")
    assert stale.kind == "stale-library"
    # look-alike: a library named with the reason after it on the same line is read by the reason
    assert diagnose('Could not load library "engine.dll" The specified procedure could not be found.',
                    os="windows").kind == "stale-library"


def test_localais_worker_without_its_backend_is_the_missing_part():
    line = 'ERR Failed to find llama-cpp-rpc-server error="llama-cpp backend not found, install it first"'
    assert diagnose(line).kind == "missing-library"
    assert diagnose("ERR ds4 backend not found after install").kind == "missing-library"
    # look-alike: a backend name the gallery does not know is the user's value, not a missing part
    assert diagnose('ERR backend "llama-cpp-foo" not found in the gallery').kind != "missing-library"


def test_cudas_unnamed_error_is_left_open_between_the_gpu_and_the_driver():
    inc = diagnose("CUDA error 999 at /ctransformers/models/ggml/ggml-cuda.cu:5067: unknown error", backend="cuda")
    assert inc.kind == "unknown" and set(inc.candidates) == {"gpu-error", "cuda-driver-too-old"}
    assert diagnose("CUDA error: unknown error", "  current device: 0, in function ggml_cuda_init",
                    backend="cuda").kind == "unknown"
    # look-alike: a CUDA error that names itself is read by its name
    assert diagnose("CUDA error: an illegal memory access was encountered", backend="cuda").kind == "gpu-error"
    # order: a driver the runtime names too old decides over the unnamed error after it
    assert diagnose("CUDA error: CUDA driver version is insufficient for CUDA runtime version",
                    "CUDA error: unknown error", backend="cuda").kind == "cuda-driver-too-old"


# ---- widened after batch 44 (spent): a container's init finding no program to run

def test_a_container_whose_image_lacks_the_engine_program_is_the_missing_part():
    assert diagnose("ERROR (catatonit:2): failed to exec pid1: No such file or directory").kind == "missing-library"
    assert diagnose("Error: crun: executable file `llama-server` not found in $PATH: No such file or directory: "
                    "OCI runtime attempted to invoke a command that was not found").kind == "missing-library"
    # look-alike: the program is there but may not be run (a permission), not a missing part
    assert diagnose("ERROR (catatonit:2): failed to exec pid1: Permission denied").kind != "missing-library"


# ---- widened after batch 45 (spent): the Metal compiler rejecting ggml's source, with and without
# a failure after it, and llama-swap stopping its upstream

METAL_COMPILE = ("program_source:6464:18: error: use of undeclared identifier 'kernel_mul_mm_id'",
                 "ggml_metal_device_init: error: failed to allocate context",
                 "llama_new_context_with_model: failed to initialize Metal backend",
                 "common_init_from_params: failed to create context with model 'SmolLM2-1.7B-Instruct-Q4_K_M.gguf'")


def test_the_metal_compiler_rejecting_ggmls_source_is_left_open_not_read_as_the_context():
    inc = diagnose(*METAL_COMPILE, exit_code=1, backend="metal", os="darwin")
    assert inc.kind == "unknown" and set(inc.candidates) == {"gpu-error", "system-too-old"}
    assert "program_source" in inc.evidence and inc.rule == "metal-source-rejected"
    # without the compiler's line, the context that could not be made is not read as this
    assert diagnose(*METAL_COMPILE[1:], exit_code=1, backend="metal", os="darwin").rule != "metal-source-rejected"
    # look-alike: a warning of the same compiler is not a rejection
    assert diagnose("program_source:12:5: warning: unused variable 'x'", backend="metal",
                    os="darwin").rule != "metal-source-rejected"
    # the tensor-ops check the engine's shaders fail is the engine's (a fix in the build)
    assert diagnose("program_source:88:3: error: static_assert failed due to requirement "
                    "'__tensor_ops_detail::__is_same_v<bfloat, half>'", backend="metal",
                    os="darwin").kind == "gpu-error"
    # order: a Metal allocation that failed first is the cause
    assert diagnose("ggml_metal_graph_compute: command buffer 0 failed with status 5",
                    "error: Insufficient Memory (00000008:kIOGPUCommandBufferCallbackErrorOutOfMemory)",
                    METAL_COMPILE[0], backend="metal", os="darwin").kind == "metal-oom"


def test_metal_shaders_that_did_not_compile_with_the_run_going_on_leave_the_gpu_unused():
    line = "[node-llama-cpp] ggml_metal_library_init_from_source: error compiling source"
    assert diagnose(line, backend="metal", os="darwin").kind == "gpu-unused"
    # a failure after it decides (node-llama-cpp#629: an abort on the buffer type)
    assert diagnose(line, "ggml/src/ggml-backend.cpp:62: GGML_ASSERT(buft) failed", signal="SIGABRT",
                    backend="metal", os="darwin").kind == "assertion-failed"
    # look-alike: a CPU build says nothing of the Metal device
    assert diagnose(line, backend="cpu", os="darwin").kind != "gpu-unused"


def test_llama_swap_stopping_its_upstream_is_stopped():
    lines = ("[DEBUG] <qwen-coder> Stopping process",
             "[DEBUG] <qwen-coder> swapState() State transitioned from ready to stopping",
             "[DEBUG] <qwen-coder> Process timed out waiting to stop, sending KILL signal (normal during shutdown)")
    assert diagnose(*lines).kind == "stopped"
    assert diagnose("[DEBUG] <m> process stopped by llama-swap: signal: terminated").kind == "stopped"
    # look-alike: a state that moves on to starting is no stop
    assert diagnose("[DEBUG] <m> swapState() State transitioned from stopped to starting").kind != "stopped"
    # order: a wrapper that gave up waiting for the start then stops it: the wait is the cause
    assert diagnose("[WARN] <m> Health check timed out after 120s, server did not start in time",
                    *lines[1:]).kind == "startup-timeout"
    # ... and a crash the engine logged before the stop is the cause
    assert diagnose(CUDA_OOM, *lines[1:], backend="cuda").kind == "cuda-oom"


# ---- widened after batch 46 (spent): a llama.cpp library whose start-up code failed inside the
# Windows loader, and the BPE tokenizer missing a byte of the model's vocabulary

KOBOLD_INIT = ("Initializing dynamic library: koboldcpp_noavx2.dll",
               "Traceback (most recent call last):",
               '  File "ctypes\\__init__.py", line 373, in __init__',
               "OSError: [WinError 1114] A dynamic link library (DLL) initialization routine failed")


def test_an_engine_library_failing_its_start_up_code_is_the_cpu_it_was_built_beyond():
    assert diagnose(*KOBOLD_INIT, os="windows").kind == "illegal-instruction"
    # the code decides in any language the message is printed in
    assert diagnose("OSError: [WinError 1114] Error en una rutina de inicialización de biblioteca de "
                    "vínculos dinámicos (DLL)", os="windows").kind == "illegal-instruction"
    # node's dlopen (LM Studio) prints the text without the code
    assert diagnose(r"Failed to load liblmstudio ...\bin\liblmstudio\cpu\liblmstudio_bindings.node.",
                    "A dynamic link library (DLL) initialization routine failed.",
                    exit_code=1, os="windows").kind == "illegal-instruction"
    # look-alike: PyTorch's DLL failing its start-up is torch's (hybrid graphics), not the engine's
    assert diagnose('OSError: [WinError 1114] A dynamic link library (DLL) initialization routine failed. '
                    r'Error loading "C:\venv\lib\site-packages\torch\lib\c10.dll" or one of its dependencies.',
                    os="windows").kind != "illegal-instruction"
    # look-alike: a library the loader could not find is missing, not a fault inside it
    assert diagnose("OSError: [WinError 126] The specified module could not be found",
                    os="windows").kind == "missing-library"
    # order: a build fault outranks the wrapper's complaint after it, in either order of lines
    after = diagnose(*KOBOLD_INIT, "[16180] Failed to execute script 'koboldcpp' due to unhandled exception!",
                     os="windows")
    before = diagnose("No GPU backend found, or could not automatically determine GPU layers. Please set it "
                      "manually.", *KOBOLD_INIT, os="windows")
    assert after.kind == before.kind == "illegal-instruction"


def test_a_bpe_vocabulary_missing_a_byte_is_a_model_this_build_cannot_read():
    line = "ERROR: byte not found in vocab: '"
    assert diagnose("llama_model_loader: - type q6_K:  226 tensors", line, "'", exit_code=139).kind == "bad-model"
    # look-alike: a GGUF key the loader could not find is no vocabulary fault and not this rule's
    assert diagnose("key general.name not found in file").kind != "bad-model"
    # order: an allocation that failed before the tokenizer ran is the cause (a memory line beats
    # a load error) ...
    assert diagnose(CUDA_OOM, line, backend="cuda").kind == "cuda-oom"
    # ... and a build the CPU cannot run makes the vocabulary line an echo
    assert diagnose(line, "Exception 0xc000001d 0x0 0x0 0x7ff6", os="windows").kind == "illegal-instruction"


# ---- widened after batch 47 (spent): VirtualLock refused by the commit limit, and the 2024 clip
# loader's assert on a projector that is not LLaVA's

def test_a_lock_refused_because_the_paging_file_is_full_is_the_host_out_of_memory():
    full = ("warning: failed to VirtualLock 17825792-byte buffer (after previously locking 1407303680 bytes): "
            "The paging file is too small for this operation to complete.")
    assert diagnose(full, os="windows").kind == "host-oom"
    # look-alike: the lock quota (or RLIMIT_MEMLOCK's ENOMEM) is a lock limit, the engine going on
    # unlocked: a sign only
    for quota in ("warning: failed to VirtualLock 17825792-byte buffer (after previously locking 0 bytes): "
                  "Insufficient quota to complete the requested service.",
                  "warning: failed to mlock 17825792-byte buffer (after previously locking 0 bytes): "
                  "Cannot allocate memory"):
        assert diagnose(quota).kind != "host-oom"
    # order: a build the CPU cannot run is the cause whatever memory the host had, and the commit
    # limit is the cause of the abort after it
    assert diagnose(full, "Exception 0xc000001d 0x0 0x0 0x7ff6", os="windows").kind == "illegal-instruction"
    assert diagnose(full, "GGML_ASSERT(ctx->mem_buffer != NULL) failed", os="windows").kind == "host-oom"


def test_the_2024_clip_loader_refusing_a_projector_that_is_not_llavas_is_the_model():
    line = "GGML_ASSERT: llama.cpp/llava/clip.cpp:1016: new_clip->has_llava_projector"
    assert diagnose(line, "error: Uncaught SIGABRT (SI_0)", signal="SIGABRT", os="darwin").kind == "bad-model"
    assert diagnose("/src/examples/llava/clip.cpp:1203: GGML_ASSERT(new_clip->has_llava_projector) failed",
                    signal="SIGABRT").kind == "bad-model"
    # look-alike: another assert of the same loader is the engine's
    assert diagnose("GGML_ASSERT: llama.cpp/llava/clip.cpp:1020: new_clip->has_vision_encoder == true "
                    "&& ctx->n_layer > 0", signal="SIGABRT").kind != "bad-model"
    # order: an allocation that failed first is the cause
    assert diagnose(CUDA_OOM, line, backend="cuda", signal="SIGABRT").kind == "cuda-oom"


# ---- widened after batch 48 (spent): Lemonade's bind failure, HotSpot's SIGILL report, and a folder
# given as the model

def test_lemonades_bind_failure_on_loopback_is_the_port_taken():
    line = "[Error] (Server) Failed to bind IPv4 HTTP server to 127.0.0.1:13305"
    assert diagnose(line, "[Info]  (Server) IPv6 HTTP server listening on [::1]:13305").kind == "port-in-use"
    assert diagnose("[Error] (Server) Failed to bind IPv6 HTTP server to [::1]:13305").kind == "port-in-use"
    # look-alike: on an address that may not be this machine's, it is left open with the wrong value
    other = diagnose("[Error] (Server) Failed to bind IPv4 HTTP server to 192.168.7.20:13305")
    assert other.kind == "unknown" and set(other.candidates) == {"port-in-use", "bad-argument"}
    # order: a build the CPU cannot run outranks the bind failure after it
    assert diagnose("Illegal instruction (core dumped)", "Exception 0xc000001d 0x0 0x0 0x7ff6", line,
                    os="windows").kind == "illegal-instruction"


def test_hotspots_sigill_report_is_the_cpu_even_when_the_jvm_then_aborts():
    report = ("#  SIGILL (0x4) at pc=0x00007fb9b4934142, pid=19985, tid=19986",
              "# C  [libjllama.so+0x23142]  gpt_params::gpt_params()+0x3e2", "Aborted (core dumped)")
    assert diagnose(*report, signal="SIGABRT").kind == "illegal-instruction"
    # look-alike: the same report for a segfault is no instruction fault
    assert diagnose("#  SIGSEGV (0xb) at pc=0x00007fb9b4934142, pid=19985, tid=19986",
                    signal="SIGABRT").kind != "illegal-instruction"
    # order: the instruction fault outranks a GGML_ASSERT printed before it, and the abort after it
    assert diagnose("GGML_ASSERT(n_tokens > 0) failed", *report, signal="SIGABRT").kind == "illegal-instruction"


def test_a_folder_given_as_the_model_is_the_model():
    assert diagnose("LLama.Exceptions.RuntimeError: Failed to load model "
                    "/Users/t/models/llama-2-70b-chat/.").kind == "bad-model"
    assert diagnose(r"ValueError: Failed to load model from file: C:\models\mistral\\").kind == "bad-model"
    # look-alike: a file's failed load says nothing by itself (a sign only)
    assert diagnose("LLama.Exceptions.RuntimeError: Failed to load model /Users/t/models/m.gguf.").kind != "bad-model"
    # order: a memory line before it is the cause (LLamaSharp says the same after an allocation failed)
    assert diagnose(CUDA_OOM, "LLama.Exceptions.RuntimeError: Failed to load model /m/dir/.",
                    backend="cuda").kind == "cuda-oom"


# ---- widened after batch 49 (spent): the model path `unknown`, llama.cpp's default model alias

def test_the_model_path_unknown_is_left_open_between_two_builds_and_no_path():
    lines = ("llama_init_from_gpt_params: error: failed to load model 'unknown'",
             "error loading model: failed to open unknown: No such file or directory",
             "llama_load_model_from_file: failed to load model")
    inc = diagnose(*lines, exit_code=1, os="windows")
    assert inc.kind == "unknown" and set(inc.candidates) == {"stale-library", "bad-argument"}
    assert inc.rule == "model-path-is-the-alias-default" and "one build" in inc.advice
    # look-alike: a real path that is not there is the model's (a failed or moved download)
    assert diagnose("error loading model: failed to open /models/unknown-7b.gguf: No such file or directory",
                    exit_code=1).kind == "bad-model"
    # order: a library from another build that the loader named decides over the path it garbled
    assert diagnose("llama.dll: The specified procedure could not be found.", *lines, exit_code=1,
                    os="windows").kind == "stale-library"
    # ... and an allocation that failed first is the cause
    assert diagnose(CUDA_OOM, *lines, backend="cuda").kind == "cuda-oom"


def test_the_old_system_info_without_blas_on_a_cuda_build_is_the_gpu_unused():
    # written from spent batches 29 and 32 (private-gpt#1405, llama-cpp-python#1315) when spending
    # batch 49 left gpu-unused under the training floor
    info = ("AVX = 1 | AVX2 = 1 | AVX512 = 0 | AVX512_VBMI = 0 | AVX512_VNNI = 0 | FMA = 1 | NEON = 0 | "
            "ARM_FMA = 0 | F16C = 1 | FP16_VA = 0 | WASM_SIMD = 0 | BLAS = 0 | SSE3 = 1 | SSSE3 = 0 | VSX = 0 |")
    for backend in ("cuda", "rocm"):
        assert diagnose(info, backend=backend).kind == "gpu-unused"
    # look-alikes: a CPU build says the same with nothing wrong; a CUDA build that has it says 1
    assert diagnose(info, backend="cpu").kind != "gpu-unused"
    assert diagnose(info.replace("BLAS = 0", "BLAS = 1"), backend="cuda").kind != "gpu-unused"
    # ... and llamafile prints it before linking its GPU module, which then runs the model
    assert diagnose(info, "link_cuda_dso: GPU support loaded", backend="cuda").kind != "gpu-unused"
    # order: a failure the log states decides over the CPU run
    assert diagnose(info, "llama_model_load: error loading model: unknown model architecture: 'qwen9'",
                    exit_code=1, backend="cuda").kind == "bad-model"


# ---- widened after batch 50 (spent): Ollama without the GPU runners for the GPU it found, and a
# second OpenMP runtime in the process

OLLAMA_CUDA_FOUND = ('time=2025-01-16T20:58:45.451+08:00 level=INFO source=types.go:131 msg="inference compute" '
                     'id=GPU-1c62 library=cuda variant=v12 compute=8.9 driver=12.4 name="NVIDIA GeForce RTX 4090" '
                     'total="23.6 GiB" available="21.6 GiB"')


def test_ollama_without_runners_for_the_gpu_it_found_leaves_the_gpu_unused():
    runners = ('time=2025-01-16T20:58:45.361+08:00 level=INFO source=routes.go:1267 '
               'msg="Dynamic LLM libraries" runners=[cpu]')
    assert diagnose(runners, OLLAMA_CUDA_FOUND).kind == "gpu-unused"
    empty = ('time=2025-03-18T11:15:57.676+09:00 level=DEBUG source=memory.go:108 msg=evaluating library=cuda '
             'gpu_count=1 available="[23.4 GiB]"',
             'time=2025-03-18T11:15:57.784+09:00 level=DEBUG source=server.go:259 msg="compatible gpu libraries" '
             'compatible=[]')
    assert diagnose(*empty).kind == "gpu-unused"
    # look-alikes: the runner of the GPU's family is there; and a machine with no GPU found lists
    # no GPU library with nothing wrong
    with_cuda = runners.replace("runners=[cpu]", 'runners="[cpu cpu_avx cpu_avx2 cuda_v12]"')
    assert diagnose(with_cuda, OLLAMA_CUDA_FOUND).kind != "gpu-unused"
    assert diagnose(runners).kind != "gpu-unused"
    assert diagnose(empty[1]).kind != "gpu-unused"
    # order: a failure the log states decides over the CPU run
    assert diagnose(runners, OLLAMA_CUDA_FOUND, "Error: llama runner process has terminated: error loading model: "
                    "unknown model architecture: 'qwen9'").kind == "bad-model"


def test_a_second_openmp_runtime_in_the_process_is_another_programs_library():
    line = ("OMP: Error #15: Initializing libomp140.x86_64.dll, but found libiomp5md.dll already initialized.")
    inc = diagnose(line, "Fatal Python error: Aborted", signal="SIGABRT", os="windows")
    assert inc.kind == "stale-library" and "OpenMP" in inc.title
    # look-alike: OpenMP's hint about its threads is no clash
    assert diagnose("OMP: Info #276: omp_set_nested routine deprecated, please use "
                    "omp_set_max_active_levels instead.").kind != "stale-library"
    # order: a build the CPU cannot run is the cause whatever was loaded beside it
    assert diagnose(line, "Exception 0xc000001d 0x0 0x0 0x7ff6", os="windows").kind == "illegal-instruction"
    # ... and the clash is the cause of the abort after it
    assert diagnose(line, "GGML_ASSERT(ctx) failed", signal="SIGABRT", os="windows").kind == "stale-library"


def test_a_load_the_client_left_is_open_between_its_timeout_and_a_cancel():
    # written when spending batch 50 left `stopped` under the training floor: ollama#7408 (a Ctrl-C
    # five seconds in) prints what ollama#8006 (a client's 90 s timeout) printed
    left = ('level=WARN source=server.go:594 msg="client connection closed before server finished loading, '
            'aborting load"',
            'level=ERROR source=sched.go:455 msg="error loading llama server" error="timed out waiting for '
            'llama runner to start: context canceled"')
    inc = diagnose(*left)
    assert inc.kind == "unknown" and set(inc.candidates) == {"startup-timeout", "stopped"}
    assert inc.rule == "client-left-the-load" and "timeout" in inc.advice
    # look-alike: Ollama's own wait running out is the startup timeout
    assert diagnose('level=ERROR source=sched.go:455 msg="error loading llama server" error="timed out '
                    'waiting for llama runner to start - progress 0.00 - "').kind == "startup-timeout"
    # order: memory that ran out during the load is the cause, whoever left after it
    assert diagnose('level=ERROR source=server.go:438 msg="llama runner terminated" error="signal: killed"',
                    "Out of memory: Killed process 4242 (ollama_llama_se) total-vm:52000000kB", *left).kind \
        == "host-oom"


def test_an_entry_with_words_of_its_own_says_them_and_the_kind_stands():
    folder = diagnose("LLama.Exceptions.RuntimeError: Failed to load model /Users/t/models/llama-2-70b-chat/.")
    assert folder.kind == "bad-model" and "folder" in folder.title and ".gguf" in folder.advice
    dll = diagnose("OSError: [WinError 1114] A dynamic link library (DLL) initialization routine failed",
                   os="windows")
    assert dll.kind == "illegal-instruction" and "loader" in dll.title and "AVX2" in dll.advice
    # the kind's own words stay for the kind's other lines
    sigill = diagnose("Exception 0xc000001d 0x0 0x0 0x7ff6", os="windows")
    assert sigill.kind == "illegal-instruction" and "loader" not in sigill.title
    # and an entry that did not decide lends no words: the allocation before the folder's load decides
    oom = diagnose(CUDA_OOM, "LLama.Exceptions.RuntimeError: Failed to load model /m/dir/.", backend="cuda")
    assert oom.kind == "cuda-oom" and "folder" not in oom.title


def test_a_backend_without_the_ops_kernel_is_the_abort_even_quoted_without_its_place():
    # spending batches 51 and 52: buun-llama-cpp#97 quotes the scheduler's GGML_ABORT after its
    # own `error msg:`, without the `ggml-backend.cpp:NNN:` the abort prints
    line = ("error msg: pre-allocated tensor (cache_k_l3 (view)) in a buffer (Vulkan0) that cannot run "
            "the operation (SET_ROWS)")
    assert diagnose(line, backend="vulkan").kind == "assertion-failed"
    # look-alike: koboldcpp prints the same words as a warning it carries on past
    assert diagnose("Caution: pre-allocated tensor (cache_k_l0 (view) (view)) in a buffer (CPU) that "
                    "cannot run the operation (ROPE)").kind == "unknown"
    # order: the device's memory running out first is the cause, not the abort after it
    assert diagnose("ggml_vulkan: Device memory allocation of size 2147483648 failed.", line,
                    backend="vulkan").kind == "vulkan-oom"


@pytest.mark.parametrize("line", [
    "由于找不到 libcrypto-3-x64.dll，无法继续执行代码。重新安装程序可能会解决此问题。",
    "由于找不到packet.dll无法继续执行代码，重新安装程序可能会解决此问题。",
    "ggml-cuda.dll が見つからないため、コードの実行を続行できません。",
    "Die Ausführung des Codes kann nicht fortgesetzt werden, da ggml-vulkan.dll nicht gefunden wurde.",
    "a execução de código não pode continuar porque MSVCR110.DLL não foi encontrada",
    "The program can't start because cublas64_12.dll is missing from your computer. Try reinstalling "
    "the program to fix this problem.",
])
def test_windows_missing_dll_dialog_in_any_language_is_the_missing_library(line):
    # spending batches 51 and 52: llama-cpp-turboquant#106's dialog in Chinese
    inc = diagnose(line, os="windows")
    assert inc.kind == "missing-library"


def test_the_missing_dll_dialog_is_the_cause_of_the_crash_code_after_it():
    line = "由于找不到 libssl-3-x64.dll，无法继续执行代码。重新安装程序可能会解决此问题。"
    # look-alike: a dialog about a DLL the program found but could not use is not this
    assert diagnose("无法定位程序输入点 ggml_backend_load 于动态链接库 llama.dll 上。",
                    os="windows").kind != "missing-library"
    # order: the missing DLL, not the access violation the wrapper reports after it
    assert diagnose(line, "Exception 0xc0000005 0x0 0x0 0x7ff6", exit_code=0xC0000005,
                    os="windows").kind == "missing-library"


def test_a_program_whose_elf_loader_is_absent_is_the_missing_library():
    # spending batches 51 and 52: ollama#7076, a glibc build on Void Linux
    line = "bash: /usr/local/bin/ollama: cannot execute: required file not found"
    inc = diagnose(line)
    assert inc.kind == "missing-library" and "glibc" in inc.title
    assert diagnose("bash: ./llama-server: /lib/ld-linux.so.2: bad ELF interpreter: No such file or "
                    "directory").kind == "missing-library"
    # look-alike: a script's #! line (often a Windows line ending) is not a missing library
    assert diagnose("bash: ./start.sh: cannot execute: required file not found").kind != "missing-library"
    # order: a named library's version too new for the system outranks the loader words
    assert diagnose(line, "/usr/local/bin/ollama: /lib64/libc.so.6: version `GLIBC_2.34' not found "
                    "(required by /usr/local/bin/ollama)").kind == "system-too-old"


def test_the_jvms_missing_dependency_of_a_native_library_is_the_missing_library():
    # spending batches 53 and 54: kherud/java-llama.cpp#11, jllama.dll extracted but one of the DLLs
    # it imports is not on the system
    line = (r"C:\Users\admin\AppData\Local\Temp\05ca-jllama.dll: Can't find dependent libraries")
    assert diagnose(line, os="windows").kind == "missing-library"
    # look-alike: a DLL built for another architecture is found, not missing
    assert diagnose(r"java.lang.UnsatisfiedLinkError: C:\tmp\jllama.dll: Can't load IA 32-bit .dll on a "
                    "AMD 64-bit platform", os="windows").kind != "missing-library"
    # order: the library that never loaded is the cause of the abort the binding reports after it
    assert diagnose(line, "GGML_ASSERT(model) failed", os="windows").kind == "missing-library"


_OLD_AND_NEW = (r"load_backend: loaded CUDA backend from D:\ai\ollama\lib\ollama\ggml-cuda.dll",
                r"load_backend: loaded CUDA backend from D:\ai\ollama\lib\ollama\cuda_v12\ggml-cuda.dll")


def test_one_backend_loaded_from_two_installs_is_the_stale_library():
    # spending batches 53 and 54: ollama#11229, an update that left the old layout's ggml-cuda.dll
    inc = diagnose("llama runner process has terminated: error:fault.", *_OLD_AND_NEW, os="windows")
    assert inc.kind == "stale-library" and inc.rule == "one-backend-from-two-installs"
    assert "twice" in inc.title and "lib/ollama" in inc.advice
    assert classify.backend_loaded_twice_from_log([
        "load_backend: loaded CUDA backend from /opt/x/lib/ggml-cuda.so",
        "load_backend: loaded CUDA backend from /opt/x/lib/v12/ggml-cuda.so"])


def test_sibling_variants_or_one_path_twice_are_not_two_installs():
    # look-alikes: Ollama probes its cuda_v12 and cuda_v13 folders in turn; a runner restarted
    # loads the same file again; two different backends share a folder
    for lines in ((r"load_backend: loaded CUDA backend from C:\o\lib\ollama\cuda_v12\ggml-cuda.dll",
                   r"load_backend: loaded CUDA backend from C:\o\lib\ollama\cuda_v13\ggml-cuda.dll"),
                  (_OLD_AND_NEW[1], _OLD_AND_NEW[1]),
                  (r"load_backend: loaded CPU backend from C:\o\lib\ollama\ggml-cpu-haswell.dll",
                   r"load_backend: loaded CUDA backend from C:\o\lib\ollama\cuda_v12\ggml-cuda.dll")):
        assert classify.backend_loaded_twice_from_log(lines) is None
        assert diagnose("llama runner process has terminated: error:fault.", *lines,
                        os="windows").kind != "stale-library"


def test_two_installs_give_way_to_a_named_cause_and_outrank_the_wrappers_wait():
    # order: a line that names its own cause decides; the wrapper's timeout after the crash does not
    assert diagnose(*_OLD_AND_NEW, "CUDA error: out of memory", os="windows", backend="cuda").kind == "cuda-oom"
    assert diagnose(*_OLD_AND_NEW, 'msg="error loading llama server" error="timed out waiting for llama '
                    'runner to start - progress 0.00 - "', os="windows").kind == "stale-library"


# ---- widened after batches 55 and 56 (spent): llama_model_loader's refusals of a file's contents
# where a wrapper printed the exception without llama.cpp's `error loading model:`, and Go's
# missing-program error in its Windows words and inside a structured log's quotes

@pytest.mark.parametrize("line", [
    # spending batches 55 and 56: ollama#4193, Ollama 0.1.31's runner and a newer mixtral layout
    "Error: exception create_tensor: tensor 'blk.0.ffn_gate.0.weight' not found",
    "exception check_tensor_dims: tensor 'output_norm.weight' not found",
    "what(): require_tensor_meta: tensor 'token_embd.weight' not found",
    "exception corrupted model: 291 tensors expected but 290 found",
    "exception invalid model: tensor 'blk.3.attn_q.weight' is duplicated",
    "exception key qwen2.context_length has wrong type u64 but expected type u32",
    "exception unknown tokenizer: 'gpt3'",
    "exception cannot find tokenizer vocab in model file",
    "exception invalid n_rot: 64, expected 128",
])
def test_the_loaders_refusal_of_a_files_contents_is_bad_model_without_its_prefix(line):
    assert diagnose(line).kind == "bad-model"


def test_a_missing_tensor_gives_way_to_the_memory_that_ran_out_before_it():
    line = "Error: exception create_tensor: tensor 'blk.0.ffn_gate.0.weight' not found"
    # look-alike: a LoRA adapter's tensor the base model lacks is the adapter's, not the model file's
    assert diagnose("exception LoRA tensor 'blk.0.attn_q.weight' does not exist in base model").kind \
        != "bad-model"
    # order: the first failing allocation outranks the load error that follows it
    assert diagnose("ggml_backend_cuda_buffer_type_alloc_buffer: allocating 9000.00 MiB on device 0: "
                    "cudaMalloc failed: out of memory", line, backend="cuda").kind == "cuda-oom"


@pytest.mark.parametrize("line", [
    # spending batches 55 and 56: ollama#3738, Ollama on Windows after the tmp cleaner took its runner
    'time=2024-04-28T20:50:09.953+03:00 level=ERROR source=server.go:285 msg="unable to load any llama '
    'server" error="error starting the external llama server: exec: \\"ollama_llama_server.exe\\": '
    'executable file not found in %PATH% "',
    'exec: "llama-server.exe": executable file not found in %PATH%',
    # strconv.Quote doubles a Windows path's backslashes
    r'exec: "C:\\llama\\llama-server.exe": file does not exist',
])
def test_gos_missing_program_on_windows_is_the_missing_library(line):
    assert diagnose(line, os="windows").kind == "missing-library"


def test_a_program_found_but_not_run_is_not_a_missing_program():
    # look-alike: the program is there and the system refused to run it
    assert diagnose('exec: "llama-server.exe": Access is denied.', os="windows").kind != "missing-library"
    # order: the spawn failure is the cause of the wrapper's exit after it
    assert diagnose('exec: "llama-server.exe": executable file not found in %PATH%',
                    "Error: llama runner process has terminated: exit status 1", os="windows").kind \
        == "missing-library"


# ---- widened after batch 57 (spent): an allocation no machine could grant, a tensor with no name,
# Ollama's discovery answered by PhysX's ancient CUDA runtime, and Ollama's AMD probe

_IMPOSSIBLE = "ggml_aligned_malloc: insufficient memory (attempted to allocate 2268047721628.89 MB)"
_ITS_ASSERT = "GGML_ASSERT: /src/stable-diffusion.cpp/ggml/src/ggml.c:4467: ctx->mem_buffer != NULL"


def test_an_allocation_beyond_any_address_space_is_a_miscount():
    # spending batch 57: stable-diffusion.cpp#43, a commit that computed 2.2 EB for a context
    inc = diagnose("[INFO]  stable-diffusion.cpp:3084 - running in eps-prediction mode", _IMPOSSIBLE, _ITS_ASSERT)
    assert inc.kind == "assertion-failed" and "2268047721628.89" in inc.evidence
    assert evidence.stated_bytes(_IMPOSSIBLE) > evidence.ADDRESSABLE_BYTES
    assert evidence.stated_bytes("failed to allocate ROCm0 buffer of size 27188624053504") == 27188624053504
    assert evidence.stated_bytes("failed to allocate CPU buffer") is None


def test_a_request_larger_than_this_machine_is_still_memory():
    # look-alikes: 25.9 TB asked of a GPU (an absurd image size) is far beyond the card, not beyond
    # any machine; a real malloc failure's assert with no size before it stays the host's memory
    assert diagnose("ggml_backend_cuda_buffer_type_alloc_buffer: allocating 25929092.46 MiB on device 0: "
                    "cudaMalloc failed: out of memory",
                    "ggml_gallocr_reserve_n: failed to allocate ROCm0 buffer of size 27188624053504",
                    backend="rocm").kind == "rocm-oom"
    assert diagnose(_ITS_ASSERT).kind == "host-oom"
    # order: the impossible request decides over the failed malloc's assert after it, and an assert
    # far from it is not its echo
    assert diagnose(_IMPOSSIBLE, _ITS_ASSERT).kind == "assertion-failed"
    far = [_IMPOSSIBLE] + ["[INFO] step"] * 5 + [_ITS_ASSERT]
    assert diagnose(*far).kind == "host-oom"


def test_a_tensor_with_no_name_is_another_ggml_build():
    # spending batch 57: llama-cpp-rs#731, whisper-rs's older ggml linked beside llama-cpp-rs's
    inc = diagnose("llama_model_load_from_file_impl: using device Metal (Apple M2 Pro) - 10922 MiB free",
                   "llama_model_load: error loading model: tensor '' not found in the model",
                   "llama_model_load_from_file_impl: failed to load model", os="darwin")
    assert inc.kind == "stale-library"
    # look-alike: a named tensor the file lacks is the file's
    assert diagnose("llama_model_load: error loading model: tensor 'output.weight' not found in the "
                    "model").kind == "bad-model"
    # order: the memory that ran out first still decides
    assert diagnose("ggml_backend_metal_buffer_type_alloc_buffer: error: failed to allocate buffer, "
                    "size = 4000.00 MiB", "llama_model_load: error loading model: tensor '' not found in "
                    "the model", os="darwin", backend="metal").kind == "metal-oom"


_PHYSX = ('time=2024-05-02T20:39:24.550-07:00 level=INFO source=gpu.go:101 msg="detected GPUs" '
          'library="C:\\\\Program Files (x86)\\\\NVIDIA Corporation\\\\PhysX\\\\Common\\\\cudart64_65.dll" '
          'count=1')
_CC_ONE = ('time=2024-05-02T19:41:48.667-07:00 level=INFO source=gpu.go:148 msg="[0] CUDA GPU is too '
           'old. Compute Capability detected: 1.0"')


def test_ollama_answered_by_physx_cuda_runtime_is_the_stale_library():
    # spending batch 57: ollama#4984 (and batch 28's #4117), a GPU left for the CPU after PhysX's
    # CUDA 6.5 runtime on PATH answered Ollama's discovery
    assert diagnose(_PHYSX, _CC_ONE, os="windows").kind == "stale-library"
    assert diagnose(_CC_ONE, os="windows").kind == "stale-library"
    # look-alikes: a card really under the build's minimum is the build's, not a foreign runtime;
    # PhysX's folder merely listed among the libraries found is not the one used
    assert diagnose('level=INFO source=gpu.go:148 msg="[0] CUDA GPU is too old. Compute Capability '
                    'detected: 3.0"', os="windows").kind != "stale-library"
    assert diagnose('level=DEBUG source=gpu.go:326 msg="discovered GPU libraries" paths="[C:\\\\Program Files '
                    '(x86)\\\\NVIDIA Corporation\\\\PhysX\\\\Common\\\\cudart64_65.dll]"',
                    os="windows").kind != "stale-library"
    # order: a memory failure the engine then met still decides
    assert diagnose(_CC_ONE, "ggml_aligned_malloc: insufficient memory (attempted to allocate 9000.00 MB)",
                    os="windows").kind == "host-oom"


def test_ollamas_probe_for_an_amd_runtime_is_not_a_missing_library():
    # spending batch 57: ollama#4984, whose DEBUG line was read as the cause
    probe = ('time=2024-06-13T13:05:29.059-07:00 level=DEBUG source=amd_windows.go:31 msg="unable to load '
             'amdhip64.dll: The specified module could not be found."')
    assert diagnose(probe, os="windows").kind != "missing-library"
    # look-alike: the same Windows words about the engine's own DLL are its missing library
    assert diagnose("Failed to load llama.dll: The specified module could not be found.",
                    os="windows").kind == "missing-library"


def test_ollamas_later_amd_probe_is_neither_a_missing_library_nor_a_gpu_left():
    # from the source (ollama gpu/ and discover/amd_windows.go, 0.3 to 0.12): the probe is logged
    # at DEBUG whenever amdhip64_6.dll is absent, on NVIDIA-only and iGPU-only machines too
    probe = ('time=2024-09-02T10:11:12.345+02:00 level=DEBUG source=amd_windows.go:34 msg="unable to load '
             'amdhip64_6.dll, please make sure to upgrade to the latest amd driver: The specified module could '
             'not be found."')
    assert diagnose(probe, os="windows").kind != "missing-library"
    assert diagnose(probe, os="windows", backend="cuda").kind != "gpu-unused"
    assert silent_fallbacks.gpu_unused_from_log([probe], "cuda", True) is None
    # look-alike: the same words after another DLL's name are that DLL missing
    assert diagnose('msg="unable to load ggml-cuda.dll: The specified module could not be found."',
                    os="windows").kind == "missing-library"
    # order: the probe first, then the engine's own missing library, which decides
    assert diagnose(probe, "error while loading shared libraries: libcudart.so.12: cannot open shared "
                    "object file: No such file or directory").kind == "missing-library"


def test_pythons_faulthandler_names_the_signal_that_ended_the_process():
    # spending batch 57: LibrePhotos#1499, llama-cpp-python's library loaded in a container on a CPU
    # without the instructions the prebuilt used
    line = "backend   | Fatal Python error: Illegal instruction"
    assert exit_codes.exit_from_log(["backend   | ", line])[:2] == (None, "SIGILL")
    assert diagnose(line, "backend   | Current thread 0x00007f56f8595080 (most recent call first):").kind \
        == "illegal-instruction"
    assert exit_codes.exit_from_log(["Fatal Python error: Segmentation fault"])[1] == "SIGSEGV"
    # look-alike: the interpreter's own start-up failure names no signal
    assert exit_codes.exit_from_log(["Fatal Python error: init_fs_encoding: failed to get the Python "
                                   "codec of the filesystem encoding"]) == (None, None, None)
    # order: a line naming its cause outranks the signal the crash then took
    assert diagnose("OSError: libcuda.so.1: cannot open shared object file: No such file or directory",
                    "Fatal Python error: Segmentation fault").kind == "missing-library"


# ---- widened after batch 58 (spent): a later shard handed to the engine, rocBLAS's older Tensile
# wording, a Go program's own panic, ggml-rpc's bare connect failure, MiniCPM-V's projector version

def test_a_later_shard_of_a_split_model_is_a_bad_argument():
    # spending batch 58: docker/model-runner#672, the runner handed llama.cpp the last shard
    line = ("llama_model_load: error loading model: illegal split file idx: 3 (file: /m/model-00004-of-00004.gguf), "
            "model must be loaded with the first split")
    assert diagnose(line, "llama_model_load_from_file_impl: failed to load model", os="darwin").kind == "bad-argument"
    # look-alike: a shard whose own index disagrees with its name is the file's
    assert diagnose("llama_model_load: error loading model: invalid split file idx: 2 (file: "
                    "/m/x-00002-of-00003.gguf), expected 1").kind == "bad-model"
    # order: the refused path decides over the abort a wrapper reports after it
    assert diagnose(line, "GGML_ASSERT(model) failed").kind == "bad-argument"


def test_rocblas_older_tensile_wording_is_the_missing_gpu_code():
    # spending batch 58: ollama#5596, rocBLAS's older `library` wording after Ollama's `error:`
    line = ("Error: llama runner process has terminated: exit status 0xc0000409 error:Could not initialize "
            "Tensile library")
    assert diagnose(line, os="windows").kind == "no-kernel-image"
    # look-alike: rocBLAS loading its Tensile library is not a failure
    assert diagnose("rocblas_initialize: loading Tensile library for gfx1100").kind != "no-kernel-image"
    # order: the missing GPU code decides over the abort after it
    assert diagnose(line, "GGML_ASSERT(ctx) failed", os="windows").kind == "no-kernel-image"


def test_a_go_programs_own_panic_is_its_internal_check():
    # spending batch 58: ollama#13402, ollamarunner's batch check
    panic = "panic: caching disabled but unable to fit entire input in a batch"
    assert diagnose(panic, "", "goroutine 8 [running]:").kind == "assertion-failed"
    # look-alike: the runtime's own panic is a crash (a nil pointer), not a check the program made
    assert diagnose("panic: runtime error: invalid memory address or nil pointer dereference",
                    "[signal SIGSEGV: segmentation violation code=0x1 addr=0x0 pc=0x5d1]").kind != "assertion-failed"
    # order: memory that ran out first decides over the panic that reports it
    assert diagnose("ggml_backend_cuda_buffer_type_alloc_buffer: allocating 9000.00 MiB on device 0: cudaMalloc "
                    "failed: out of memory", "panic: unable to create llama context", backend="cuda").kind == "cuda-oom"


def test_ggml_rpcs_bare_connect_failure_is_a_lost_worker():
    # spending batch 58: llama.cpp#12385, each RPC worker unreachable
    lines = ("llama_model_load_from_file_impl: using device RPC(RPC[[ip_address]:50052]) - 0 MiB free",
             "Failed to connect to :50052", "Failed to connect to 192.168.1.20:50052")
    assert diagnose(*lines).kind == "rpc-worker-lost"
    # look-alikes: a client's own words about a connection are not ggml-rpc's
    assert diagnose("curl: (7) Failed to connect to localhost port 8080 after 0 ms: Connection refused").kind \
        != "rpc-worker-lost"
    assert diagnose("Failed to connect to 127.0.0.1:11434, is the server running?").kind != "rpc-worker-lost"
    # order: the lost worker decides over the load error after it
    assert diagnose(*lines, "llama_model_load: error loading model: unable to allocate backend buffer").kind \
        == "rpc-worker-lost"


def test_a_minicpmv_projector_newer_than_the_engine_is_a_bad_model():
    # spending batch 58: ollama#12104, MiniCPM-V 4.5 on an older bundled clip.cpp
    line = "Aug 28 11:07:42 ly3 ollama[2607954]: clip.cpp:4169: Unknown minicpmv version"
    assert diagnose(line, "Aug 28 11:07:42 ly3 ollama[2607954]: SIGABRT: abort").kind == "bad-model"
    assert diagnose("mtmd_init_from_file: error: unsupported minicpmv version: 7").kind == "bad-model"
    # look-alike: the loader naming the version it read is not a failure
    assert diagnose("clip_model_loader: minicpmv_version: 6").kind != "bad-model"
    # order: the unknown projector decides over the abort it raises
    assert diagnose(line, "GGML_ASSERT(ctx) failed", signal="SIGABRT").kind == "bad-model"


# ---- widened after batches 59 and 60 (spent): Ollama's discovery failing on the NVIDIA driver it
# found, whatever build the log names; llama-swap's ready check answered 404 by its upstream

_NVCUDA_999 = ('time=2024-06-21T03:04:28.714Z level=DEBUG source=gpu.go:356 msg="Unable to load nvcuda" '
               'library=/usr/lib/x86_64-linux-gnu/libcuda.so.535.183.01 error="nvcuda init failure: 999"')


def test_ollamas_discovery_failing_on_the_driver_it_found_is_a_gpu_left_for_the_cpu():
    # spending batch 59: ollama#5166, a GPU container whose driver failed cuInit, served on the CPU;
    # no backend stated, since Ollama's own words say it found NVIDIA's driver library
    found = ('time=2024-06-21T03:04:28.694Z level=DEBUG source=gpu.go:327 msg="discovered GPU libraries" '
             'paths=[/usr/lib/x86_64-linux-gnu/libcuda.so.535.183.01]')
    assert diagnose(found, "cuInit err: 999", _NVCUDA_999).kind == "gpu-unused"
    assert diagnose('msg="Unable to load cudart library /usr/lib/x86_64-linux-gnu/libcuda.so.570.169: cuda driver '
                    'library init failure: 802"').kind == "gpu-unused"
    # look-alikes: no device behind the library (100: none, or CUDA_VISIBLE_DEVICES=-1) is a GPU
    # left only on a build that has one; 35 is the catalogue's driver older than the runtime
    no_device = ('msg="Unable to load cudart library C:\\\\Ollama\\\\lib\\\\ollama\\\\cuda_v12\\\\cudart64_12.dll: '
                 'cudart init failure: 100"')
    assert diagnose(no_device, os="windows").kind != "gpu-unused"
    assert diagnose(no_device, os="windows", backend="cuda").kind == "gpu-unused"
    assert diagnose('msg="Unable to load cudart CUDA management library /tmp/ollama1/runners/cuda_v11/'
                    'libcudart.so.11.0: cudart init failure: 35"').kind == "cuda-driver-too-old"
    # order: a failure the start then met decides over the GPU left behind
    assert diagnose(_NVCUDA_999, "llama_model_load: error loading model: invalid magic characters: 'lmgg', "
                    "expected 'GGUF'").kind == "bad-model"


def test_llama_swaps_ready_check_answered_404_is_a_start_that_cannot_complete():
    # spending batch 60: llama-swap#84, KoboldCpp behind llama-swap, which polls /health
    old = "!!! Health check error: status code: 404"
    new = ("[DEBUG] <qwen> Health check error on http://127.0.0.1:9790/health, status code: 404 (normal "
           "during startup)")
    assert diagnose("Please connect to custom endpoint at http://localhost:9790", old, old).kind == "startup-timeout"
    assert diagnose(new).kind == "startup-timeout"
    # look-alikes: llama-server's 503 while it loads and a refused connection before it listens are
    # a start still under way
    assert diagnose("!!! Health check error: status code: 503").kind != "startup-timeout"
    assert diagnose('[DEBUG] <qwen> Connection refused on http://127.0.0.1:9790/health, giving up in 120s '
                    '(normal during startup)').kind != "startup-timeout"
    # order: the engine's own failure, when the log shows one, is why the check never passed; with
    # that rule reversed the wrapper's check would win
    assert diagnose(old, CUDA_OOM, backend="cuda").kind == "cuda-oom"
    assert verdict((old, CUDA_OOM)).rule == "allocation-inside-load-error"
    assert verdict((old, CUDA_OOM), flipped("allocation-inside-load-error")).kind == "startup-timeout"


# ---- widened after batch 61 (spent): a bundled copy under a system library's requirement, ROCr's
# memory-error event, a GGML-era file refused under LangChain, Unsloth Studio's memory check

def test_a_bundled_copy_lacking_what_a_system_library_needs_is_the_stale_library():
    # spending batch 61: janhq/jan#7831, the AppImage's libcrypto loaded ahead of Fedora 43's
    line = ("/home/u/.local/share/Jan/data/llamacpp/backends/b7261/linux-common_cpus-x64/build/bin/llama-server: "
            "/tmp/.mount_Jan-aaJhkMHg/usr/lib/libcrypto.so.3: version `OPENSSL_3.3.0' not found (required by "
            "/lib64/libssl.so.3)")
    assert diagnose("The model process encountered an unexpected error.", line).kind == "stale-library"
    assert [p.entry.name for p in gather((line,), strip_log_prefix)] == ["ld.bundled-copy-under-system-requirer"]
    # look-alikes: the system's own library lacking a version the program needs is the system's age,
    # and a bundle's library requiring another major of a library is that library missing
    assert diagnose("./llama-server: /lib/x86_64-linux-gnu/libc.so.6: version `GLIBC_2.38' not found (required "
                    "by ./llama-server)").kind == "system-too-old"
    assert diagnose("./llama-server: /opt/app/lib/libggml-cuda.so: version `libcudart.so.12' not found (required "
                    "by /opt/app/lib/libggml.so)").kind == "missing-library"
    # order: the stale copy decides over a sibling library that could not be opened; reversed, the
    # missing sibling would win
    cannot = ("error while loading shared libraries: libvulkan.so.1: cannot open shared object file: "
              "No such file or directory")
    assert diagnose(cannot, line).kind == "stale-library"
    assert verdict((cannot, line)).rule == "symbol-over-cannot-open"
    assert verdict((cannot, line), flipped("symbol-over-cannot-open")).kind == "missing-library"


def test_rocrs_memory_error_event_is_a_gpu_runtime_error():
    # spending batch 61: llama.cpp#14999, MoE experts on the CPU with --no-mmap on a Radeon V620
    line = ("Memory critical error by agent node-0 (Agent handle: 0x4694bee0) on address 0x47934000. "
            "Reason: Memory in use. ")
    assert diagnose("load_tensors: loading model tensors, this can take a while... (mmap = false)", line,
                    backend="rocm").kind == "gpu-error"
    # look-alike: ROCm's own allocation failing is memory
    assert diagnose("ggml_backend_cuda_buffer_type_alloc_buffer: allocating 9000.00 MiB on device 0: "
                    "cudaMalloc failed: out of memory", backend="rocm").kind == "rocm-oom"
    # order: after a build fault it is that fault's echo (ollama#11123: the build lacked the gfx)
    assert diagnose("ROCm error: invalid device function", line, backend="rocm").kind == "no-kernel-image"
    assert verdict(("ROCm error: invalid device function", line), flipped("build-fault-first")).kind == "gpu-error"


def test_a_ggml_era_file_refused_under_langchain_is_the_models_format():
    # spending batch 61: private-gpt#1029, a GGML .bin handed to a GGUF-era llama-cpp-python
    line = ("  Could not load Llama model from path: models/ggml-vic7b-uncensored-q4_0.bin. Received error  "
            "(type=value_error)")
    assert diagnose("pydantic.error_wrappers.ValidationError: 1 validation error for LlamaCpp", line,
                    os="windows").kind == "bad-model"
    # look-alike: the same refusal of a GGUF file says nothing about the format
    assert diagnose("Could not load Llama model from path: models/llama-2-7b.Q4_K_M.gguf. Received error "
                    "(type=value_error)").kind != "bad-model"
    # order: the CPU the build cannot run on decides over the refusal it caused; reversed, the file
    # would be blamed
    crash = ("OSError: [WinError -1073741795] Windows Error 0xc000001d",
             "Could not load Llama model from path: models/ggml-model-q4_0.bin")
    assert diagnose(*crash, os="windows").kind == "illegal-instruction"
    assert verdict(crash, flipped("build-fault-first")).kind == "bad-model"


def test_unsloth_studios_memory_check_is_the_system_memory():
    # spending batch 61: unsloth#9482, a 27B on a 16 GB laptop with an integrated GPU
    line = ("Failed to load model: About 10 GB of this model does not fit in GPU memory and would run from system "
            "RAM. Only about 10 GB is available and 2 GB of that is kept free for the rest of the system, leaving "
            "about 8 GB usable.")
    assert diagnose(line).kind == "host-oom"
    # look-alike: the wrapper's load failure without its memory words is not memory
    assert diagnose("Failed to load model: llama-server exited before it was ready").kind != "host-oom"
    # order: the check's memory decides over the wrapper's load error wrapped around it; with that
    # rule reversed the load error would win
    wrapped = "llama_model_load: error loading model: the wrapper refused to start llama-server"
    assert diagnose(wrapped, line).kind == "host-oom"
    assert verdict((wrapped, line)).rule == "allocation-inside-load-error"
    assert verdict((wrapped, line), flipped("allocation-inside-load-error")).kind == "bad-model"


# ---- widened after batch 62 (spent): a log that shows the server working on a request was
# past its start, so a crash in it is not blamed on the drafter's load

def test_a_slot_working_on_a_task_means_the_engine_had_loaded():
    # spending batch 62: llama.cpp#23158, a Vulkan driver crash mid-generation with a draft model,
    # read as a drafter that broke the start
    serving = ("0.16.295.454 D slot update_slots: id  0 | task 0 | created speculative checkpoint (pos_min = 17, "
               "pos_max = 17, n_tokens = 18, size = 0.001 MiB, draft = 0.000 MiB)",
               "0.16.295.463 D srv  update_slots: decoding batch, n_tokens = 6")
    assert classify.phase_from_log(serving) == "ready"
    assert classify.phase_from_log(("slot 0 is processing [task id: 3]",)) == "ready"
    assert classify.phase_from_log(("sampler seed: 4294967295",)) == "ready"
    assert classify.phase_from_log(("prompt eval time =     131.36 ms /    18 tokens",)) == "ready"
    inc = classify_exit(report_from_log(serving, has_drafter=True, backend="vulkan"))
    assert inc.kind != "drafter-failure"
    # look-alike: the slots llama-server sets up while it loads carry no task yet
    loading = ("slot   load_model: id  0 | task -1 | new slot, n_ctx = 4096",)
    assert classify.phase_from_log(loading) == "starting"
    # ... so a start that ends there, a drafter loaded, is still the drafter's (the rule before)
    assert classify_exit(report_from_log(loading, has_drafter=True)).kind == "drafter-failure"


# ---- widened after batches 63 and 64 (spent), and one wording read again in Ollama's source

def test_metals_insufficient_memory_after_a_failed_command_buffer_is_metal_oom():
    # spending batch 64: llama.cpp#27309, ggml-metal's `error: %s` of the command buffer's error,
    # its code cut to `(...)` in the paste, read as the system's memory
    lines = ("0.26.672.359 E ggml_metal_synchronize: error: command buffer 0 failed with status 5",
             "0.26.673.527 E error: Insufficient Memory (...)")
    assert diagnose(*lines, os="darwin", backend="metal").kind == "metal-oom"
    assert diagnose(*lines, os="darwin").kind == "metal-oom"
    # look-alike: the host allocator's lower-case words stay the system's memory
    assert diagnose("ggml_aligned_malloc: insufficient memory (attempted to allocate 103000 MB)").kind == "host-oom"
    assert diagnose("error: insufficient memory to create the context").kind == "host-oom"
    # order: the device lost after the allocation is that allocation; reversed, the GPU error wins
    stripped = tuple(strip_log_prefix(line) for line in lines)
    assert verdict(stripped).rule == "device-lost-is-the-allocation"
    assert verdict(stripped, flipped("device-lost-is-the-allocation")).kind == "gpu-error"


def test_an_abort_from_a_flat_tree_with_bare_file_names_is_an_abort():
    # spending batch 64: ollama#8614, Ollama 0.5.7's cgo build of its flat llama/ folder prints
    # GGML_ABORT's `file:line:` with the bare file name
    line = "Jan 27 16:32:52 r670-1 ollama[1319558]: llama.cpp:11968: The current context does not support K-shift"
    assert diagnose(line).kind == "assertion-failed"
    assert diagnose("ggml-cuda.cu:1234: some unexpected state").kind == "assertion-failed"
    # look-alikes: a compiler's file:line:col diagnostic, its `file:line: warning:`, the old loader's
    # `llama.cpp: loading model from`, and a Go source position are not aborts
    for other in ("llama.cpp:11968:13: error: use of undeclared identifier 'foo'",
                  "ggml.c:1234: warning: unused variable 'x'",
                  "llama.cpp: loading model from /models/7B/ggml-model-q4_0.bin",
                  'time=2025-01-27T16:32:52 level=INFO source=llama.go:11968 msg="starting"'):
        assert not any(p.kind == "assertion-failed" for p in gather((other,), strip_log_prefix)), other
    # order: the first failing allocation beats the abort that follows it; reversed, the abort wins
    alloc = "ggml_aligned_malloc: insufficient memory (attempted to allocate 52000.00 MB)"
    assert diagnose(alloc, line).kind == "host-oom"
    assert verdict((alloc, line)).rule == "allocation-before-abort"
    assert verdict((alloc, line), flipped("allocation-before-abort")).kind == "assertion-failed"


def test_ollamas_old_driver_warning_is_a_sign_only():
    # Ollama 0.9-0.12 discover/cuda_common.go: the WARN that comes with choosing the older CUDA runner
    # (cuda_v11 below driver 12.1, cuda_v12 below 13); the runner then runs on that driver
    warning = ('time=2025-10-01T10:00:00.000Z level=WARN source=cuda_common.go:65 msg="old CUDA driver detected - '
               'please upgrade to a newer driver for best performance" version=12.8')
    pieces = gather((warning,), strip_log_prefix)
    assert [p.strength for p in pieces] == [catalogue.Strength.WEAK]
    assert diagnose(warning).kind != "cuda-driver-too-old"
    # what fails after it is that failure, not the driver (before: the build fault beat everything)
    assert diagnose(warning, CUDA_OOM, backend="cuda").kind == "cuda-oom"
    # the driver really too old for the runtime still says so
    assert diagnose(warning, "ggml_cuda_init: failed to initialize CUDA: CUDA driver version is insufficient "
                    "for CUDA runtime version", backend="cuda").kind == "cuda-driver-too-old"


def test_ollama_dropping_its_only_gpu_is_the_gpu_unused():
    # from Ollama's source (discover/runner.go filterIntegratedGPUs, server/routes.go), for
    # ollama#17222 (batch 57, spent): a GPU found and dropped, and none kept, leaves the CPU
    drop = ('level=INFO source=runner.go:405 msg="dropping integrated GPU; to enable, set OLLAMA_IGPU_ENABLE=1" '
            'id=0 library=Vulkan compute=0.0 name=Vulkan0 description="Intel(R) Iris(R) Xe Graphics" pci_id=""')
    none_kept = ('level=INFO source=routes.go:2054 msg="vram-based default context" total_vram="0 B" '
                 'default_num_ctx=4096')
    assert diagnose(drop, none_kept, os="windows").kind == "gpu-unused"
    # look-alikes: no GPU found at all (0 B with no drop), or another GPU kept after the drop
    assert diagnose(none_kept, os="windows").kind != "gpu-unused"
    kept = none_kept.replace('"0 B"', '"7.6 GiB"')
    assert diagnose(drop, kept, os="windows").kind != "gpu-unused"
    # order: the drop is a sign; a failure the log names decides first
    load_error = ("llama_model_load: error loading model: error loading model architecture: "
                  "unknown model architecture: 'x'")
    assert diagnose(drop, none_kept, load_error, os="windows").kind == "bad-model"


# ---- widened after batch 65 (spent): Windows older than the program, and the runner's own slip

_WER_OLD_RUNTIME = ("EventType=APPCRASH", "Sig[0].Value=llama-box.exe", "Sig[3].Name=Fault Module Name",
                    "Sig[3].Value=MSVCP140.dll", "Sig[4].Name=Fault Module Version", "Sig[4].Value=14.34.31931.0",
                    "Sig[6].Name=Exception Code", "Sig[6].Value=c0000005")


@pytest.mark.parametrize("lines", [
    _WER_OLD_RUNTIME,
    # the Application log's event 1000 as XML (gpustack/llama-box#10) and as the viewer's text
    ("<Data>llama-box.exe</Data>", "<Data>0.0.0.0</Data>", "<Data>674fb3c7</Data>", "<Data>MSVCP140.dll</Data>",
     "<Data>14.29.30139.0</Data>", "<Data>61b17c25</Data>", "<Data>c0000005</Data>"),
    ("Faulting application name: llama-server.exe, version: 0.0.0.0, time stamp: 0x674fb3c7",
     "Faulting module name: MSVCP140.dll, version: 14.29.30139.0, time stamp: 0x61b17c25",
     "Exception code: 0xc0000005"),
])
def test_a_crash_inside_a_visual_c_runtime_older_than_the_build_is_the_system(lines):
    assert diagnose(*lines, os="windows").kind == "system-too-old"


def test_a_crash_report_of_another_fault_is_not_the_old_runtime():
    newer = tuple(x.replace("14.34.31931.0", "14.40.33810.0") for x in _WER_OLD_RUNTIME)
    other_code = tuple(x.replace("c0000005", "c0000409") for x in _WER_OLD_RUNTIME)
    other_module = tuple(x.replace("MSVCP140.dll", "ggml-cuda.dll") for x in _WER_OLD_RUNTIME)
    for lines in (newer, other_code, other_module):
        assert diagnose(*lines, os="windows").kind != "system-too-old", lines
    # order: a line stating a reason outranks the report's figures; without that rule the old
    # runtime would be read as the loader's cause
    missing = "The code execution cannot proceed because ggml-cuda.dll was not found."
    pieces = gather((missing,) + _WER_OLD_RUNTIME, strip_log_prefix)
    assert decide(pieces).kind == "missing-library"
    assert decide(pieces, ORDER, reason_over_figure=False).kind == "system-too-old"


def test_an_entry_point_missing_from_windows_own_dll_is_a_windows_too_old():
    # spending batch 65: gpt4all#2223, Windows 7's user32.dll, in the reporter's words
    told = ("Can not install `gpt4all` on windows 7. When clicked the `exe` file, it reports `Cannot find entry "
            "point skip pointer frame messages in dynamic link library user32.dll.`")
    assert diagnose(told, os="windows").kind == "system-too-old"
    dialog = ("The procedure entry point SkipPointerFrameMessages could not be located in the dynamic link "
              "library C:\\Windows\\system32\\USER32.dll.")
    assert diagnose(dialog, os="windows").kind == "system-too-old"
    # look-alike: the same words for a DLL of the program's own are another build's
    own = ("The procedure entry point __kmpc_dispatch_deinit could not be located in the dynamic link library "
           "ggml-base.dll")
    assert diagnose(own, os="windows").kind == "stale-library"
    # order: a missing function in Windows says why a sibling library then could not be loaded;
    # reversed, the library's absence would be the cause
    lines = (dialog, "The code execution cannot proceed because ggml-cpu.dll was not found.")
    assert verdict(lines).rule == "versioned-symbol-over-cannot-open"
    assert verdict(lines, flipped("versioned-symbol-over-cannot-open")).kind == "missing-library"


def test_a_clean_exit_before_the_engine_was_ready_is_not_a_stop():
    # spending batch 65: gpustack#109, `Inference server exited with code 0.` (an old Visual C++ runtime)
    line = "Error running model: Inference server exited with code 0."
    starting = classify_exit(report_from_log((line,), exit_code=0, os="windows", phase="starting"))
    assert starting.kind == "unknown"
    # look-alikes: a clean exit of a serving engine is a stop, and so is one Stoker asked for
    assert classify_exit(report_from_log((line,), exit_code=0, phase="ready")).kind == "stopped"
    ours = replace(report_from_log((line,), exit_code=0, phase="starting"), signalled_by_us=True)
    assert classify_exit(ours).kind == "stopped"


def test_ollamas_runner_finding_no_kv_slot_is_its_own_slip():
    # spending batch 65: ollama#7930, parallel requests with a prompt truncated to the context
    line = "panic: failed to decode batch: could not find a kv cache slot"
    assert diagnose('level=WARN source=runner.go:129 msg="truncating input prompt" limit=2048 prompt=2052',
                    line, os="darwin").kind == "assertion-failed"
    # look-alike: the panic relaying llama_decode's own failure code says nothing of which cause
    relayed = "panic: failed to decode batch: llama_decode failed with code -3"
    assert not any(p.kind == "assertion-failed" for p in gather((relayed,), strip_log_prefix))
    # order: an allocation failure before it is the cause; reversed, the slip would win
    assert diagnose(CUDA_OOM, line, backend="cuda").kind == "cuda-oom"
    assert verdict((CUDA_OOM, line), flipped("allocation-before-abort")).kind == "assertion-failed"


# ---- widened after batch 66 (spent): the Go SIGILL banner glued to an unterminated line,
# Ollama's GGUF reader refusing a file, and LLamaSharp's other load failure

_LOCALAI_288 = ("llama.cpp: loading model from /models/gpt",
                "failed unexpectedly reached end of fileSIGILL: illegal instruction",
                "PC=0xa893c4 m=5 sigcode=2")


def test_the_go_sigill_banner_glued_to_a_line_left_unterminated_is_the_cpu():
    assert diagnose(*_LOCALAI_288).kind == "illegal-instruction"
    # look-alikes: the words quoted after a space, or with more said after them, are no banner
    for line in ("it crashes with SIGILL: illegal instruction", "SIGILL: illegal instruction is what I get on load"):
        assert not any(p.kind == "illegal-instruction" for p in gather((line,), strip_log_prefix)), line
    # order: the load error C printed before the fault is its echo; reversed, the model would win
    lines = ("error loading model: unexpectedly reached end of file", "SIGILL: illegal instruction")
    assert verdict(lines).rule == "build-fault-first"
    assert verdict(lines, flipped("build-fault-first")).kind == "bad-model"


def test_ollamas_gguf_reader_refusing_the_file_is_the_model():
    # ollama#4075: `ollama create` on a broken download
    assert diagnose("transferring model data", "creating model layer", "Error: invalid file magic",
                    os="windows").kind == "bad-model"
    assert diagnose("Error: unsupported model format", os="darwin").kind == "bad-model"
    # look-alikes: other magic and format words
    for line in ("Error: invalid file mode", "magic: invalid file magicks enabled"):
        assert not any(p.kind == "bad-model" for p in gather((line,), strip_log_prefix)), line
    # order: the refused file ends in whatever abort follows; reversed, the abort would win
    lines = ("Error: invalid file magic", "GGML_ASSERT(ctx) failed")
    assert verdict(lines).rule == "load-error-before-abort"
    assert verdict(lines, flipped("load-error-before-abort")).kind == "assertion-failed"


_LLAMASHARP_1275 = ("LLama.Exceptions.RuntimeError: Failed to load the native library. Please check the log for "
                    "more information.",
                    "   at LLama.Native.NativeLibraryUtils.TryLoadLibrary(NativeLibraryConfig config, INativeLibrary& "
                    "loadedLibrary)",
                    "Failed Loading 'runtimes/linux-x64/native/cuda12/libllava_shared.so'")


def test_llamasharps_no_candidate_loaded_is_open_like_its_other_load_failure():
    inc = diagnose(*_LLAMASHARP_1275)
    assert inc.kind == "unknown" and inc.candidates == ("missing-library", "system-too-old")
    assert inc.rule == "native-load-failed-reason-dropped"
    # look-alike: another library's loader in LLamaSharp's words
    assert diagnose("SkiaSharp: Failed to load the native library libSkiaSharp.so", exit_code=1).candidates == ()
    # order: a line with the loader's reason decides, before or after it
    for lines in ((_GLIBC_233,) + _LLAMASHARP_1275, _LLAMASHARP_1275 + (_GLIBC_233,)):
        assert diagnose(*lines).kind == "system-too-old"
    assert verdict(_LLAMASHARP_1275 + (_GLIBC_233,), flipped("versioned-symbol-over-cannot-open")).kind == \
        "missing-library"


# ---- written from Ollama's sources while batch 67 was gathered (no batch spent): its GGUF
# reader's bounds checks, its runner's projector checks, a build without its runners, and its
# memory checks' own lines

@pytest.mark.parametrize("line, kind", [
    ('Error: tensor "blk.5.ffn_down.weight" offset+size (4567890123) exceeds file size (3456789012)', "bad-model"),
    ("Error: GGUF array size 4294967295 exceeds maximum 1048576", "bad-model"),
    ("Error: GGUF string length 4294967295 exceeds maximum 1048576", "bad-model"),
    ('Error: tensor "token_embd.weight" dimensions 9 exceeds maximum 4', "bad-model"),
    ("Error: llama runner process has terminated: unknown vision model architecture: qwen2vl", "bad-model"),
    ("Error: projector embedding size (4096) does not match model (5120)", "bad-model"),
    ("Error: expected payloads not included in this build of ollama", "missing-library"),
    ('level=WARN source=server.go:137 msg="model request too large for system" requested="12.5 GiB" '
     'available=8000000000 total="15.5 GiB" free="7.4 GiB" swap="0 B"', "host-oom"),
])
def test_ollamas_own_refusals_name_their_kind(line, kind):
    assert diagnose(line, exit_code=1).kind == kind


@pytest.mark.parametrize("line", [
    "Error: file size exceeds maximum limit (100MB)",  # Ollama's cap on a file dropped into the chat
    'level=WARN source=server.go:114 msg="requested context size too large for model" num_ctx=8192 n_ctx_train=4096',
    "Error: failed to allocate memory for image embedding",
])
def test_ollamas_look_alike_lines_name_nothing(line):
    assert not any(p.strength is not catalogue.Strength.WEAK for p in gather((line,), strip_log_prefix)), line


def test_ollamas_failed_layout_is_the_memory_its_build_runs_on():
    # llm/server.go 0.11 to 0.2x: the runner answered the layout pass with ml.ErrNoMem
    line = "Error: 500 Internal Server Error: failed to commit memory for model"
    assert diagnose(line, backend="cuda", os="windows").kind == "cuda-oom"
    # ollama#13303's paste puts the client's error first, then CUDA0's own allocation: the named
    # device decides, read from the log alone too; reversed, the wrapper's line would decide
    lines = (line, "ggml_gallocr_reserve_n: failed to allocate CUDA0 buffer of size 9668469760")
    assert verdict(lines).rule == "named-device-over-unnamed" and verdict(lines).kind == "gpu-oom"
    assert verdict(lines, flipped("named-device-over-unnamed")).kind == "device-oom"


def test_the_first_rule_relating_two_kinds_decides_even_when_a_later_one_points_back():
    # memory-over-optional-backend (device-oom over a loader sign) comes before loader-before-load
    # (a loader failure over a device-oom): the earlier, more fundamental rule decides
    lines = ("load_backend: failed to load libggml-cuda.so: libcuda.so.1: cannot open shared object file",
             'msg="memory layout cannot be allocated" memory.InputWeights=4294967296')
    assert verdict(lines).kind == "device-oom" and verdict(lines).rule == "memory-over-optional-backend"
    # with that rule gone, the later one decides the other way
    assert verdict(lines, without("memory-over-optional-backend")).kind == "missing-library"


# ---- widened after batch 67 (spent): a GPU build listing no device, the engine's arithmetic
# trap, and the AppImage runtime without FUSE 2

_NO_DEVICE = ("Available devices:", "  (none)")


def test_a_gpu_build_listing_no_device_leaves_the_gpu_unused():
    # llama.cpp#26996: a HIP build's `--list-devices`, which then ends cleanly
    for exit_code in (None, 0):
        inc = diagnose(*_NO_DEVICE, exit_code=exit_code, backend="rocm", os="windows", phase="starting")
        assert inc.kind == "gpu-unused" and inc.rule == "gpu-build-on-cpu", exit_code
    # builds before `(none)` print nothing after the heading (llama.cpp#14966, under Rosetta)
    assert diagnose("~ llama-cli --list-devices", "Available devices:", backend="metal", os="darwin").kind == \
        "gpu-unused"
    # look-alikes: a CPU build's list is empty by design, and a listed device is a GPU found
    assert diagnose(*_NO_DEVICE, exit_code=0, backend="cpu", phase="starting").kind == "unknown"
    listed = ("Available devices:", "  ROCm0: AMD Radeon AI PRO R9700 (32624 MiB, 32430 MiB free)")
    assert diagnose(*listed, exit_code=0, backend="rocm", phase="starting").kind == "unknown"
    # order: a failure line says more than the list; the list only speaks when nothing failed
    assert diagnose(*_NO_DEVICE, CUDA_OOM, exit_code=1, backend="cuda").kind == "cuda-oom"


@pytest.mark.parametrize("kwargs", [
    {"signal": "SIGFPE"},
    {"exit_code": 0xC0000094, "os": "windows"},  # STATUS_INTEGER_DIVIDE_BY_ZERO (ollama#16479)
    {"exit_code": -1073741676, "os": "windows"},
])
def test_an_arithmetic_trap_is_the_engines_own_slip(kwargs):
    assert diagnose("llama_model_loader: loaded meta data with 40 key-value pairs", **kwargs).kind == \
        "assertion-failed"


def test_gos_floating_point_exception_is_read_as_sigfpe():
    # ollama#16495: Go's os/exec names SIGFPE in words
    line = ("Error: 500 Internal Server Error: llama-server process has terminated: signal: floating point "
            "exception (core dumped)")
    assert diagnose(line).kind == "assertion-failed"
    # look-alikes: a segfault or an access violation alone says nothing of its cause
    assert diagnose(line.replace("floating point exception", "segmentation fault")).kind == "unknown"
    assert diagnose("exit status 0xc0000005", os="windows").kind == "unknown"
    # order: a line naming the cause outranks the exit (an allocation failed, then the trap)
    assert diagnose(CUDA_OOM, line, backend="cuda").kind == "cuda-oom"


def test_the_appimage_runtime_without_fuse_2_is_a_missing_library():
    # lmstudio-ai/docs#247
    line = "- Starting from console: `./LM-Studio-0.4.21-2-x64.AppImage` reveals `dlopen(): error loading libfuse.so.2`"
    assert diagnose(line).kind == "missing-library"
    assert diagnose("AppImages require FUSE to run. ").kind == "missing-library"
    # look-alikes: another dlopen failure in AppImage's words, FUSE's own device error
    for other in ("dlsym(): error loading symbol from libfuse.so.2",
                  "fuse: device not found, try 'modprobe fuse' first"):
        assert not any(p.kind == "missing-library" and p.strength is not catalogue.Strength.WEAK
                       for p in gather((other,), strip_log_prefix)), other
    # order: nothing runs after it, so what follows is its echo; reversed, the abort would win
    lines = ("dlopen(): error loading libfuse.so.2", "GGML_ASSERT(backend) failed")
    assert verdict(lines).rule == "loader-before-load"
    assert verdict(lines, flipped("loader-before-load")).kind == "assertion-failed"


# ---- widened after batch 68 (spent): Ollama's NVML failing and its installer finding no GPU,
# its runner library refused with the loader's words lost, and a Linux driver inside WSL 2

@pytest.mark.parametrize("line", [
    "Jan 08 19:28:33 XDFAF ollama[178990]: 2024/01/08 19:28:33 gpu.go:39: CUDA not detected: nvml vram init failure: 9",
    "WARNING: No NVIDIA/AMD GPU detected. Ollama will run in CPU-only mode.",
    "WARNING: No NVIDIA GPU detected. Ollama will run in CPU-only mode.",  # install.sh before 0.1.30
])
def test_ollama_saying_it_runs_without_the_gpu_is_the_gpu_unused_whatever_the_build(line):
    # ollama#1898 and #4659: no build stated (Ollama's Linux releases carry GPU runners)
    assert diagnose(line).kind == "gpu-unused"
    # order: a failure line says more; the fallback only speaks when nothing failed
    assert diagnose(line, CUDA_OOM, exit_code=1, backend="cuda").kind == "cuda-oom"
    # a stated CPU build never meant to use a GPU
    assert diagnose(line, backend="cpu").kind != "gpu-unused"


def test_ollamas_look_alike_gpu_lines_keep_their_own_reading():
    # the cudart it ships answering 35 is the driver's age, not a fallback
    line = "msg=\"Unable to load cudart library /usr/lib/ollama/libcudart.so.12: cudart init failure: 35\""
    assert diagnose(line).kind == "cuda-driver-too-old"
    # another program's install warning is not Ollama's
    assert diagnose("WARNING: No NVIDIA GPU detected. Falling back to software rendering.").kind == "unknown"


def test_ollamas_runner_library_refused_with_its_reason_lost_is_a_missing_library():
    # ollama#2888: Windows' message garbled in another code page
    garbled = ("Error: Unable to load dynamic library: Unable to load dynamic server library: "
               "\ufffd\u04b2\ufffd\ufffd\ufffd")
    assert diagnose(garbled, os="windows").kind == "missing-library"
    # look-alikes: the loader's own words on the line decide, above it
    stale = "Error: Unable to load dynamic library: Unable to load dynamic server library: undefined symbol: llama_foo"
    assert diagnose(stale).kind == "stale-library"
    init = ("Error: Unable to load dynamic library: Unable to load dynamic server library: A dynamic link library "
            "(DLL) initialization routine failed.")
    assert diagnose(init, os="windows").kind == "illegal-instruction"
    # order: a loader failure ends the start, the abort after it is its echo; reversed, the abort wins
    lines = (garbled, "GGML_ASSERT(ctx) failed")
    assert verdict(lines).rule == "loader-before-load"
    assert verdict(lines, flipped("loader-before-load")).kind == "assertion-failed"


_WSL_1940 = ("gpu.go:248: Discovered GPU libraries: [/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.535.104.05 "
             "/usr/lib/wsl/lib/libnvidia-ml.so.1]",
             "CUDA error 100 at /go/src/github.com/jmorganca/ollama/llm/llama.cpp/ggml-cuda.cu:495: no CUDA-capable "
             "device is detected")


def test_a_linux_nvidia_driver_inside_wsl_shadows_wsls_own_libraries():
    # ollama#1940: the distribution's 535 driver library found before /usr/lib/wsl/lib's
    assert diagnose(*_WSL_1940, backend="cuda").kind == "stale-library"
    # look-alikes: WSL's library alone, and Ollama's search globs (no driver version in them)
    for line in ("gpu.go:248: Discovered GPU libraries: [/usr/lib/wsl/lib/libnvidia-ml.so.1]",
                 'msg="gpu library search" globs="[/usr/lib/*-linux-gnu/libcuda.so* /usr/lib/wsl/lib/libcuda.so*]"'):
        assert not any(p.kind == "stale-library" for p in gather((line,), strip_log_prefix)), line
    # order: the shadowing library is why the device is not found; reversed, the CUDA error wins
    assert verdict(_WSL_1940).rule == "loader-before-load"
    assert verdict(_WSL_1940, flipped("loader-before-load")).kind == "gpu-error"


def test_the_words_for_an_arithmetic_trap_and_for_the_new_loader_entries_say_what_to_do():
    trap = diagnose("llama_model_loader: loaded meta data", signal="SIGFPE", phase="starting")
    assert "division by zero" in trap.title and "newer engine build" in trap.advice
    windows = diagnose("Load failed", exit_code=0xC0000094, os="windows")
    assert "division by zero" in windows.title
    # an abort keeps the assertion's own words
    assert "division" not in diagnose("GGML_ASSERT(ctx) failed", signal="SIGABRT").title
    fuse = diagnose("dlopen(): error loading libfuse.so.2")
    assert "libfuse2" in fuse.advice and "FUSE 2" in fuse.title
    wsl = diagnose(*_WSL_1940, backend="cuda")
    assert "/usr/lib/wsl/lib" in wsl.title and "ldconfig" in wsl.advice


# ---- widened after batch 69 (spent): a launcher's unexpanded macro, ggml's 2023 scratch pool,
# Ollama dropping an NVIDIA device it counted, and bash's padded job line

_MACRO = 'unable to start process: start() failed: exec: "${latest-llama}": executable file not found in $PATH'


@pytest.mark.parametrize("line", [
    _MACRO,  # llama-swap#269
    'msg="failed to start" error="exec: \\"${llama}\\": executable file not found in $PATH"',
    "fork/exec $LLAMA_SERVER: no such file or directory",
    "failed to load config: models.qwen.cmd: unknown macro '${latest-llama}'",  # llama-swap 2026
])
def test_a_command_still_holding_its_macro_is_a_bad_argument_not_a_missing_program(line):
    inc = diagnose(line)
    assert inc.kind == "bad-argument"
    assert "never expanded" in inc.title and "macros:" in inc.advice


def test_a_program_really_missing_stays_a_missing_program():
    for line in ('exec: "llama-server": executable file not found in $PATH',
                 'exec: "C:\\\\llama\\\\llama-server.exe": executable file not found in %PATH%',
                 "fork/exec /opt/llama/llama-server: no such file or directory"):
        assert diagnose(line).kind == "missing-library", line
    # order: the refused command is the cause; the wrapper's stop after it is its echo, and
    # reversed, the stop would win
    lines = (_MACRO, "swapState() State transitioned from starting to stopping")
    assert verdict(lines).rule == "argument-before-load" and verdict(lines).kind == "bad-argument"
    assert verdict(lines, flipped("argument-before-load")).kind == "stopped"


_SCRATCH = ("Processing Prompt [BLAS] (7168 / 7321 tokens)ggml_new_tensor_impl: not enough space in the scratch "
            "memory pool (needed 1279262720, available 1197473792)")


def test_ggmls_scratch_pool_too_small_is_the_engines_own_miscount():
    # koboldcpp#331: the pool the engine sized for its batch overflows, assert() is compiled out,
    # and the NULL tensor crashes next; the machine still had memory
    inc = diagnose(_SCRATCH, "exception: access violation writing 0x0000000000000050", os="windows")
    assert inc.kind == "assertion-failed"
    # look-alike: ggml-alloc's measure of a real buffer is not this pool
    assert not any(p.kind == "assertion-failed" for p in gather(
        ("ggml_allocr_alloc: not enough space in the buffer to allocate blk.0 (needed 100, largest block "
         "available 50)",), strip_log_prefix))
    # order: an allocation that failed first is the cause; reversed, the miscount would win
    lines = (CUDA_OOM, _SCRATCH)
    assert verdict(lines).rule == "allocation-before-abort" and verdict(lines).kind == "gpu-oom"
    assert verdict(lines, flipped("allocation-before-abort")).kind == "assertion-failed"


@pytest.mark.parametrize("line", [
    # ollama#4604 (0.1.38): Docker lost the device after a cgroup reload (800, CUDA_ERROR_NOT_PERMITTED)
    'level=INFO source=gpu.go:197 msg="error looking up nvidia GPU memory" error="nvcuda failed to get primary '
    'device context 800"',
    "cuda driver library failed to get device context 800",  # 0.3-0.12
    'msg="error looking up nvidia GPU memory" error="cudart device memory info lookup failure 999"',
    'msg="error looking up nvidia GPU memory" error="cuda driver library device failed to initialize"',
])
def test_ollama_dropping_an_nvidia_device_it_counted_leaves_the_gpu_unused(line):
    # no build stated: a driver library that counted a device means a GPU was there
    assert diagnose(line).kind == "gpu-unused"
    assert diagnose(line, backend="cuda").kind == "gpu-unused"
    # a stated CPU build never meant to use one
    assert diagnose(line, backend="cpu").kind != "gpu-unused"
    # order: a failure line says more; the fallback only speaks when nothing failed
    assert diagnose(line, CUDA_OOM, exit_code=1, backend="cuda").kind == "cuda-oom"


def test_nvmls_refinement_of_a_kept_device_is_not_a_dropped_device():
    # discover/gpu_info_nvml.c: NVML only refines the free memory of a device already kept
    line = 'level=WARN msg="error looking up nvidia GPU memory" error="device memory info lookup failure GPU-4f2c: 999"'
    assert diagnose(line).kind == "unknown"


@pytest.mark.parametrize(("line", "signal"), [
    # intel/ipex-llm#12844: bash pads the signal's words, then writes the command
    ('Illegal instruction     (core dumped) LD_LIBRARY_PATH=$LD_LIBRARY_PATH:/opt/x /opt/x/llama-server-bin "$@"',
     "SIGILL"),
    ("Segmentation fault      (core dumped) ./llama-server -m model.gguf", "SIGSEGV"),
    ("Killed                  ./llama-server -m model.gguf", "SIGKILL"),
    ("Illegal instruction (core dumped)", "SIGILL"),
])
def test_bashs_padded_job_line_names_the_signal(line, signal):
    assert exit_codes.exit_from_log((line,))[1] == signal


@pytest.mark.parametrize("line", [
    "Killed process 1234 (llama-server) total-vm:1000kB",  # the kernel's words, one space
    "Aborted due to user request",
    "Illegal instruction handler installed",
])
def test_prose_starting_with_a_signals_words_names_no_signal(line):
    assert exit_codes.exit_from_log((line,))[1] is None


def test_a_padded_job_line_is_the_exit_and_a_named_cause_still_decides():
    assert diagnose('Illegal instruction     (core dumped) ./llama-server-bin "$@"').kind == "illegal-instruction"
    assert diagnose(CUDA_OOM, "Aborted                 (core dumped) ./llama-server", backend="cuda").kind == \
        "cuda-oom"


# ---- read from the launchers' sources (no batch): a signal named in a launcher's words for
# the end, and llama-cpp-python's own check of the model path

@pytest.mark.parametrize(("line", "signal"), [
    ("fish: Job 1, './llama-server -m x.gguf' terminated by signal SIGILL (Illegal instruction)", "SIGILL"),
    ("fish: Job 1, './llama-server -m x.gguf' terminated by signal SIGSEGV (Address boundary error)", "SIGSEGV"),
    ("[llama] llama-server exited with code null, signal SIGABRT", "SIGABRT"),
    ("Process exited with signal: SIGKILL", "SIGKILL"),
    ("The process was terminated by signal 4 (SIGILL)", "SIGILL"),
    ("subprocess.CalledProcessError: Command '['./llama-server']' died with <Signals.SIGILL: 4>.", "SIGILL"),
    ("error: process didn't exit successfully: `target/release/llama` (signal: 4, SIGILL: illegal instruction)",
     "SIGILL"),
    ("Command terminated by signal 4", "SIGILL"),
])
def test_a_signal_named_in_a_launchers_words_for_the_end_is_read(line, signal):
    assert exit_codes.exit_from_log((line,))[1] == signal


@pytest.mark.parametrize("line", [
    "srv  operator(): received signal SIGTERM",  # a signal received is no end
    "sending signal SIGKILL to llama-server",
    "Command terminated by signal 99",  # no such signal
    "terminated. See the signal SIGUSR1 handler",  # another sentence
])
def test_a_signal_sent_or_received_names_no_end(line):
    assert exit_codes.exit_from_log((line,))[1] is None


def test_a_launchers_signal_is_the_exit_and_a_named_cause_still_decides():
    line = "fish: Job 1, './llama-server' terminated by signal SIGILL (Illegal instruction)"
    assert diagnose(line).kind == "illegal-instruction"
    lines = (CUDA_OOM, "llama-server exited with code null, signal SIGABRT")
    assert diagnose(*lines, backend="cuda").kind == "cuda-oom"


def test_llama_cpp_pythons_missing_model_path_is_the_model_file():
    line = "ValueError: Model path does not exist: /models/llama-2-7b.Q4_K_M.gguf"
    assert diagnose(line).kind == "bad-model"
    # look-alike: a config file's path is not the model's
    assert diagnose("ValueError: Config file /srv/config.json not found!").kind == "unknown"
    # order: a model file that cannot be read beats the abort after it; reversed, the abort wins
    lines = (line, "GGML_ASSERT(model) failed")
    assert verdict(lines).rule == "load-error-before-abort" and verdict(lines).kind == "bad-model"
    assert verdict(lines, flipped("load-error-before-abort")).kind == "assertion-failed"


# ---- widened after batch 70 (spent): an image reference run as a container's command, a
# GGML-era grouped-query model loaded without its factor, ggml's scratch pool cut mid-line, and
# Ollama finding a GPU on a CPU without AVX

_IMAGE_AS_COMMAND = ("Error: crun: executable file `/quay.io/ramalama/ramalama:0.23` not found: No such file or "
                     "directory: OCI runtime attempted to invoke a command that was not found")


def test_an_image_reference_run_as_the_containers_command_is_a_bad_argument():
    # containers/ramalama#2843: the podman line named the image twice; exit 127 as printed
    inc = diagnose(_IMAGE_AS_COMMAND, exit_code=127)
    assert inc.kind == "bad-argument" and "image's name as its command" in inc.title
    assert diagnose('Error: exec: "quay.io/ramalama/ramalama:latest": executable file not found in $PATH').kind == \
        "bad-argument"
    # look-alikes: a program really missing from the image (crun's path form is read now too)
    for line in ("crun: executable file `/usr/bin/llama-server` not found: No such file or directory",
                 "Error: crun: executable file `llama-run` not found in $PATH: No such file or directory"):
        assert diagnose(line, exit_code=127).kind == "missing-library", line
    # order: the refused command is the cause; the wrapper's stop after it is its echo
    lines = (_IMAGE_AS_COMMAND, "swapState() State transitioned from starting to stopping")
    assert verdict(lines).rule == "argument-before-load" and verdict(lines).kind == "bad-argument"
    assert verdict(lines, flipped("argument-before-load")).kind == "stopped"


_GQA = ("error loading model: llama.cpp: tensor 'layers.0.attention.wk.weight' has wrong shape; "
        "expected  8192 x  8192, got  8192 x  1024")


def test_a_grouped_query_ggml_model_loaded_without_its_factor_is_a_bad_argument():
    # serge-chat/serge#675: LLaMA 2 70B GGML through llama-cpp-python without n_gqa=8
    inc = diagnose("llama_model_load_internal: n_head     = 64", _GQA, "llama_init_from_file: failed to load model")
    assert inc.kind == "bad-argument" and "-gqa 8" in inc.advice
    # look-alikes: a square K tensor, or another tensor's shape, is the file's
    for line in (_GQA.replace("got  8192 x  1024", "got  8192 x  8192"),
                 "error loading model: llama.cpp: tensor 'output.weight' has wrong shape; expected  4096 x 32000, "
                 "got  4096 x 32001"):
        assert diagnose(line).kind == "bad-model", line
    # order: the refused value is the cause; the load error after it is its echo, and reversed,
    # the load error would win
    lines = (_GQA, "llama_model_load: error loading model: failed to load model")
    assert verdict(lines).rule == "argument-before-load" and verdict(lines).kind == "bad-argument"
    assert verdict(lines, flipped("argument-before-load")).kind == "bad-model"


def test_ggmls_scratch_pool_line_cut_mid_sentence_is_still_the_miscount():
    # koboldcpp#50: the paste ends after `scratch memory`
    line = "Processing Prompt [BLAS] (1024 / 1301 tokens)ggml_new_tensor_impl: not enough space in the scratch memory"
    assert diagnose(line).kind == "assertion-failed"
    # look-alike: another program's scratch words
    assert diagnose("warning: not enough space in the scratch directory /tmp").kind == "unknown"
    # order: an allocation that failed first is the cause
    assert verdict((CUDA_OOM, line)).rule == "allocation-before-abort"
    assert verdict((CUDA_OOM, line), flipped("allocation-before-abort")).kind == "assertion-failed"


_OLLAMA_NO_AVX = ('time=2024-02-29T11:22:11.649+08:00 level=INFO source=gpu.go:99 msg="Nvidia GPU detected"',
                  'time=2024-02-29T11:22:11.650+08:00 level=INFO source=cpu_common.go:18 msg="CPU does not have '
                  'vector extensions"')


def test_ollama_finding_a_gpu_on_a_cpu_without_avx_leaves_the_gpu_unused_and_says_why():
    # ollama#2825: the paste loses `disabling GPU support`; the card, then the CPU, are enough
    inc = diagnose(*_OLLAMA_NO_AVX, os="windows")
    assert inc.kind == "gpu-unused" and inc.rule == "gpu-left-for-a-cpu-without-avx"
    assert "AVX" in inc.title and "0.5.4" in inc.advice
    # the full warning says the same, with the same words
    warn = 'level=WARN source=gpu.go:128 msg="CPU does not have AVX or AVX2, disabling GPU support."'
    assert diagnose(warn, os="windows").rule == "gpu-left-for-a-cpu-without-avx"
    # look-alikes: the CPU line alone (no GPU found) and the CPU line before the card
    assert diagnose(_OLLAMA_NO_AVX[1]).kind == "unknown"
    assert diagnose(_OLLAMA_NO_AVX[1], _OLLAMA_NO_AVX[0]).kind == "unknown"
    # order: a failure line says more; the fallback only speaks when nothing failed
    assert diagnose(*_OLLAMA_NO_AVX, CUDA_OOM, exit_code=1, backend="cuda").kind == "cuda-oom"


@pytest.mark.parametrize(("line", "signal"), [
    # bash on macOS: the signal's words carry its number (cocktailpeanut/dalai#191)
    ("Illegal instruction: 4", "SIGILL"),
    ("Segmentation fault: 11", "SIGSEGV"),
    ("Abort trap: 6", "SIGABRT"),
    ("/bin/sh: line 1: 81234 Killed: 9  ./main -m model.bin", "SIGKILL"),
    ("Trace/BPT trap: 5", "SIGTRAP"),
])
def test_macos_bashs_numbered_signal_words_name_the_signal(line, signal):
    assert exit_codes.exit_from_log((line,))[1] == signal


@pytest.mark.parametrize("line", ["Killed: 3 processes", "Illegal instruction: 44", "Segmentation fault: the pointer"])
def test_a_signals_words_with_another_number_are_prose(line):
    assert exit_codes.exit_from_log((line,))[1] is None


def test_macos_bashs_signal_line_is_the_exit_and_a_named_cause_still_decides():
    assert diagnose("Illegal instruction: 4", os="darwin").kind == "illegal-instruction"
    assert diagnose(CUDA_OOM, "Abort trap: 6", backend="cuda").kind == "cuda-oom"


# ---- widened after batch 71 (spent): dyld 4's quoted paths and Accelerate's new LAPACK,
# llama_model_loader's own refusal of a file, a template that needs --jinja, PyInstaller's
# bundled Python, and Ollama's client that went away mid-answer

_DYLD4 = ("dyld[12166]: Symbol not found: (_cblas_sgemm$NEWLAPACK$ILP64)",
          "  Referenced from: '/Users/me/build/bin/llama-cli'",
          "  Expected in: '/System/Library/Frameworks/Accelerate.framework/Versions/A/Accelerate'")


def test_a_symbol_missing_from_macos_is_an_older_macos_with_dyld_4s_quoted_paths():
    # llama.cpp#9973: a build binding Accelerate's $NEWLAPACK symbols (macOS 13.3 on) on an older macOS
    inc = diagnose(*_DYLD4, os="darwin")
    assert inc.kind == "system-too-old" and "newer macOS" in inc.title
    assert diagnose(_DYLD4[0], os="darwin").kind == "system-too-old"  # the symbol alone says it
    # look-alikes: a symbol expected in another build's library, quoted, is that library's
    other = (_DYLD4[0].replace("_cblas_sgemm$NEWLAPACK$ILP64", "_llama_model_load"), _DYLD4[1],
             "  Expected in: '/opt/homebrew/lib/libllama.dylib'")
    assert diagnose(*other, os="darwin").kind == "stale-library"
    # order: the versioned symbol says why the library could not be opened; reversed, `cannot open` wins
    lines = (_DYLD4[2], "dyld[1]: Library not loaded: @rpath/libggml.dylib")
    assert verdict(lines).rule == "versioned-symbol-over-cannot-open"
    assert verdict(lines, flipped("versioned-symbol-over-cannot-open")).kind == "missing-library"


def test_llama_model_loaders_own_refusal_is_the_model_file_never_memory():
    # lmstudio-bug-tracker#306: a Q4_0_4_8 file the bundled engine no longer reads, quoted by LM Studio
    line = "llama.cpp error: 'llama_model_loader: failed to load model from C:\\models\\QwQ-32B-Q4_0_4_8.gguf"
    assert diagnose("🥲 Failed to load the model", line, os="windows").kind == "bad-model"
    # look-alikes: llama_model_load's own `failed to load model` follows any cause, memory too
    assert diagnose("llama_model_load_from_file_impl: failed to load model").kind == "unknown"
    assert diagnose("llama_model_loader: failed to load model from file pointer").kind != "bad-model"
    # order: an allocation that failed is the cause of a load error after it
    lines = (CUDA_OOM, line)
    assert verdict(lines).rule == "allocation-inside-load-error"
    assert verdict(lines, flipped("allocation-inside-load-error")).kind == "bad-model"


_JINJA = ("terminate called after throwing an instance of 'std::runtime_error'",
          "  what():  this custom template is not supported, try using --jinja")


def test_a_template_that_needs_jinja_is_a_bad_argument_over_the_abort():
    # b11434's common/chat.cpp names the option the build has and the launch did not turn on
    inc = diagnose(*_JINJA)
    assert inc.kind == "bad-argument" and "--jinja" in inc.advice and not inc.candidates
    assert diagnose("srv  init: this custom template is not supported, try using --jinja").kind == "bad-argument"
    # look-alike: another runtime_error after terminate stays the abort
    assert diagnose(_JINJA[0], "  what():  vector::_M_range_check").kind == "assertion-failed"
    # order: the missing option is the cause; the abort is its echo
    assert verdict(_JINJA).rule == "argument-before-load"
    assert verdict(_JINJA, flipped("argument-before-load")).kind == "assertion-failed"


def test_the_template_words_without_the_hint_leave_the_build_open():
    # the same bare words from a build with Jinja not turned on (containers/ramalama#1212) and
    # from one with none, the model's template newer than it (gpustack#1060, llama-box on b4490)
    bare = (_JINJA[0], "  what():  this custom template is not supported")
    inc = diagnose(*bare)
    assert inc.kind == "unknown" and inc.candidates == ("bad-argument", "bad-model")
    assert inc.rule == "template-unknown-to-the-build" and "--jinja" in inc.advice
    # the order still puts the template before its abort
    assert verdict(bare).rule == "argument-before-load"


_PYI = ("Error loading Python DLL 'C:\\Users\\u\\AppData\\Local\\Temp\\_MEI41082\\python39.dll'.",
        "LoadLibrary: The specified module could not be found.")


def test_a_bundled_python_39_windows_would_not_load_is_left_open():
    # koboldcpp#147: Windows 7 (Python 3.9 dropped it), or a dependency missing: the log cannot tell
    inc = diagnose(*_PYI, os="windows")
    assert inc.kind == "unknown" and set(inc.candidates) == {"missing-library", "system-too-old"}
    # look-alike: Python 3.8's DLL still ran on Windows 7, so a dependency is what is missing
    assert diagnose(_PYI[0].replace("python39", "python38"), _PYI[1], os="windows").kind == "missing-library"
    # order: a loader failure ends the start; the abort after it is its echo
    lines = (_PYI[0], "GGML_ASSERT(ctx) failed")
    assert verdict(lines).rule == "loader-before-load"
    assert verdict(lines, flipped("loader-before-load")).kind == "assertion-failed"


_CANCELLED = ('level=ERROR source=server.go:1458 msg="post predict" error="Post \\"http://127.0.0.1:40933/'
              'completion\\": context canceled"')


def test_ollamas_client_going_away_mid_answer_is_a_stop_not_a_fault():
    # ollama#12291: a 5-minute client timeout on a 29k-token prompt
    inc = diagnose(_CANCELLED)
    assert inc.kind == "stopped" and "timeout" in inc.advice
    # look-alike: the runner itself gone (connection refused) is no client's doing
    refused = _CANCELLED.replace("context canceled", "dial tcp 127.0.0.1:40933: connect: connection refused")
    assert diagnose(refused).kind != "stopped"
    # order: a failure line says more than the stop after it (a memory error, then the cancel)
    assert verdict((CUDA_OOM, _CANCELLED)).kind == "gpu-oom"
    assert verdict((CUDA_OOM, _CANCELLED), flipped("allocation-inside-load-error")).kind == "stopped"


_DYLD2_LOAD_COMMAND = "dyld: cannot load 'gpt4all-lora-quantized-OSX-intel' (load command 0x80000034 is unknown)"


def test_a_load_command_older_dyld_does_not_know_is_an_older_macos():
    # gpt4all#70 and #1160: LC_DYLD_CHAINED_FIXUPS on OS X 10.13 and 10.14
    assert diagnose(_DYLD2_LOAD_COMMAND, "Abort trap: 6", os="darwin").kind == "system-too-old"
    wrapped = ("\t/venv/lib/libllmodel.dylib: cannot load 'libllmodel.dylib' (load command 0x80000034 "
               "is unknown)")
    assert diagnose(wrapped, os="darwin").kind == "system-too-old"
    # look-alike: dyld refusing a binary of another architecture is no older macOS
    other = "dyld: cannot load 'llama-server' (mach-o, but wrong architecture)"
    assert diagnose(other, os="darwin").kind != "system-too-old"
    # order: a binary this system cannot load ends the start; the abort after it is its echo
    lines = (_DYLD2_LOAD_COMMAND, "GGML_ASSERT(ctx) failed")
    assert verdict(lines).rule == "loader-before-load"
    assert verdict(lines, flipped("loader-before-load")).kind == "assertion-failed"


_RAMALAMA_NO_ENGINE = ('Error: RamaLama requires the "llama-run" command to be installed on the host when '
                       'running with --nocontainer.')


def test_ramalamas_engine_program_not_installed_is_the_missing_program():
    # containers/ramalama#626: no container engine found, so RamaLama execs llama-run on a bare Mac
    inc = diagnose(_RAMALAMA_NO_ENGINE, "[Errno 2] No such file or directory", os="darwin")
    assert inc.kind == "missing-library"
    inside = 'RamaLama requires the "llama-server" command to be installed inside of the container.'
    assert diagnose(inside).kind == "missing-library"
    # look-alike: RamaLama's words about a container engine are not the engine program
    assert diagnose("Error: RamaLama requires a container engine (podman or docker)").kind != "missing-library"
    # order: the program that is not there ends the start; a wrapper's load error after it is its echo
    lines = (_RAMALAMA_NO_ENGINE, "llama_model_load: error loading model: failed to open GGUF file")
    assert verdict(lines).rule == "loader-before-load"
    assert verdict(lines, flipped("loader-before-load")).kind == "bad-model"


_SD_UNKNOWN_FORMAT = (
    "[INFO ] stable-diffusion.cpp:255  - loading diffusion model from 'models\\z_image_turbo-Q3_K.gguf'",
    "[WARN ] model.cpp:379  - unknown format models\\z_image_turbo-Q3_K.gguf",
    "[ERROR] stable-diffusion.cpp:326  - get sd version from file failed: ''",
    "[INFO ] main.cpp:575  - new_sd_ctx_t failed")


@pytest.mark.parametrize("line", [
    "[WARN ] model.cpp:379  - unknown format models\\flux.bin",
    "[WARN ] model_loader.cpp:254  - file /models/sd3.safetensors not found",
    "[ERROR] stable-diffusion.cpp:715  - init model loader from file failed: '/models/x.ckpt'",
    # (`get sd version from file failed` alone is left open with a wrong flag since batches 89 and 90:
    # test_stable_diffusions_unknown_family_is_left_open_with_the_wrong_flag)
])
def test_stable_diffusion_cpps_loader_refusals_are_the_model_file(line):
    assert diagnose(line).kind == "bad-model"


def test_an_image_model_stable_diffusion_cpp_cannot_read_is_the_model_file():
    # leejet/stable-diffusion.cpp#1144: a GGUF the loader does not recognise
    assert diagnose(*_SD_UNKNOWN_FORMAT, os="windows").kind == "bad-model"
    # look-alikes: another program's `unknown format` is not stable-diffusion.cpp's loader
    assert diagnose("ValueError: unknown format code 'd' for object of type 'str'").kind != "bad-model"
    assert diagnose("[INFO ] model.cpp:373  - load models\\ae.safetensors using safetensors format").kind == "unknown"
    # order: an allocation that failed is the cause of a load error after it
    lines = (CUDA_OOM, _SD_UNKNOWN_FORMAT[2])
    assert verdict(lines).rule == "allocation-inside-load-error"
    assert verdict(lines, flipped("allocation-inside-load-error")).kind == "bad-model"


_RPC_CLIENT_BACKTRACE = (
    "#0  0x00007f341743a3c7 in wait4 () from /lib64/libc.so.6",
    "#1  0x00007f341795ead8 in ggml_abort () from /tmp/build/ggml/src/libggml.so",
    "#2  0x00007f3417adda9c in ggml_backend_rpc_graph_compute(ggml_backend*, ggml_cgraph*) () from "
    "/tmp/build/ggml/src/libggml.so")


def test_an_abort_under_the_rpc_clients_calls_is_the_worker_lost():
    # llama.cpp#9850: the client's side of an rpc-server that crashed
    assert diagnose(*_RPC_CLIENT_BACKTRACE).kind == "rpc-worker-lost"
    symbols = "./libggml-rpc.so(ggml_backend_rpc_get_tensor+0x5c) [0x7f0a1c2d3e4f]"
    assert diagnose("GGML_ABORT", symbols).kind == "rpc-worker-lost"
    # look-alike: an abort with no RPC frame stays the engine's own check
    assert diagnose(*_RPC_CLIENT_BACKTRACE[:2]).kind == "assertion-failed"
    # order: once the worker is lost every failure is its echo, the abort included
    assert verdict(_RPC_CLIENT_BACKTRACE).rule == "lost-worker-first"
    assert verdict(_RPC_CLIENT_BACKTRACE, flipped("lost-worker-first")).kind == "assertion-failed"


_SAMPLER_BACKTRACE = (
    "#5  0x00007f1e9874ca5e in llama_sampler_softmax_impl(llama_token_data_array*) () from libllama.so",
    "#8  0x00000000005e1ea2 in common_sampler_sample(common_sampler*, llama_context*, int, bool) ()",
    "#9  0x0000000000492993 in server_context::update_slots() ()",
    "Aborted (core dumped)")


def test_an_abort_inside_the_sampler_is_the_engines_own_check():
    # llama.cpp#13461: GGML_ASSERT(cur_p->size > 0), the assert line above the pasted frames
    assert diagnose(*_SAMPLER_BACKTRACE).kind == "assertion-failed"
    # look-alike: the server's own frames say nothing of which check (or which memory) failed
    assert diagnose(*_SAMPLER_BACKTRACE[2:]).kind == "unknown"
    # order: a failing allocation before the abort is the cause
    lines = (CUDA_OOM,) + _SAMPLER_BACKTRACE
    assert verdict(lines).rule == "allocation-before-abort"
    assert verdict(lines, flipped("allocation-before-abort")).kind == "assertion-failed"


@pytest.mark.parametrize("line", [
    ".ape-1.10(75705,0x1e2481000) malloc: *** error for object 0x1000806df750: pointer being freed was not "
    "allocated",
    "llama-server(8812,0x16f9f3000) malloc: *** error for object 0x600003a1c000: incorrect checksum for freed "
    "object - object was probably modified after being freed.",
    "free(): invalid pointer",
    "double free or corruption (!prev)",
    "munmap_chunk(): invalid pointer",
    "corrupted size vs. prev_size",
])
def test_the_c_librarys_heap_checks_are_the_engines_own_fault(line):
    # llamafile#206: a free() of memory the process did not own (the maintainer's fix in #191)
    assert diagnose(line, signal="SIGABRT").kind == "assertion-failed"


def test_a_heap_check_after_a_failed_allocation_is_its_echo():
    line = "double free or corruption (out)"
    assert diagnose(CUDA_OOM, line).kind == "cuda-oom"
    # look-alike: prose about a double free is no heap check
    assert diagnose("fixed a double free in the RPC server").kind != "assertion-failed"
    assert verdict((CUDA_OOM, line)).rule == "allocation-before-abort"
    assert verdict((CUDA_OOM, line), flipped("allocation-before-abort")).kind == "assertion-failed"


_CUDA_UNKNOWN_FROM_A_KERNEL = (
    "ggml_cuda_compute_forward: MUL_MAT_ID failed",
    "CUDA error: unknown error",
    "  current device: 0, in function ggml_cuda_compute_forward at D:\\a\\llama.cpp\\ggml\\src\\ggml-cuda\\"
    "ggml-cuda.cu:2267",
    "  err",
    "D:\\a\\llama.cpp\\llama.cpp\\ggml\\src\\ggml-cuda\\ggml-cuda.cu:104: CUDA error")


def test_cudas_unknown_error_from_an_ops_kernel_is_a_gpu_fault():
    # llama.cpp#25721: MUL_MAT_ID's kernel read out of bounds on the first decode
    inc = diagnose(*_CUDA_UNKNOWN_FROM_A_KERNEL, os="windows")
    assert inc.kind == "gpu-error" and not inc.candidates
    # look-alike: the same error at the first call leaves the driver open (streamlit-llama#2)
    first_call = ("WARNING: failed to allocate 0.09 MB of pinned memory: unknown error",
                  "CUDA error 999 at /ctransformers/models/ggml/ggml-cuda.cu:5067: unknown error")
    open_inc = diagnose(*first_call)
    assert open_inc.kind == "unknown" and set(open_inc.candidates) == {"gpu-error", "cuda-driver-too-old"}
    # order: ggml's CUDA_CHECK prints the error, then aborts
    lines = (_CUDA_UNKNOWN_FROM_A_KERNEL[1], "GGML_ASSERT(ok) failed")
    assert verdict(lines).rule == "gpu-error-before-its-abort"
    assert verdict(lines, flipped("gpu-error-before-its-abort")).kind == "assertion-failed"


_CUDA_UNKNOWN_IN_A_DEVICE_COPY = (
    "[NITRO]::Error: CUDA error: unknown error",
    "  current device: 2, in function ggml_backend_cuda_buffer_cpy_tensor at C:\\actions-runner\\_work\\nitro"
    "\\nitro\\llama.cpp\\ggml-cuda.cu:10951")


@pytest.mark.parametrize("function, settled", [
    ("ggml_backend_cuda_buffer_cpy_tensor", True),
    ("ggml_backend_cuda_cpy_tensor_async", True),
    # ollama#3097: results read back from the device's buffer mid-request
    ("ggml_backend_cuda_get_tensor_async", True),
    ("ggml_backend_cuda_buffer_get_tensor", True),
    ("ggml_backend_cuda_buffer_get_tensor_2d", True),
    # look-alikes: the first calls a driver the runtime cannot talk to fails in
    ("ggml_cuda_init", False),
    ("ggml_cuda_host_malloc", False),
])
def test_cudas_unknown_error_in_a_copy_between_cuda_buffers_is_a_gpu_fault(function, settled):
    # jan#2707: a tensor copy between GPU buffers failed after the first request was answered;
    # both buffers were allocated on the device, so the driver and the runtime talk
    lines = (_CUDA_UNKNOWN_IN_A_DEVICE_COPY[0],
             _CUDA_UNKNOWN_IN_A_DEVICE_COPY[1].replace("ggml_backend_cuda_buffer_cpy_tensor", function))
    inc = diagnose(*lines, os="windows")
    if settled:
        assert inc.kind == "gpu-error" and not inc.candidates
    else:
        assert inc.kind == "unknown" and set(inc.candidates) == {"gpu-error", "cuda-driver-too-old"}


_ADRENO_RPC_SERVER = (
    "ggml_opencl: using kernels optimized for Adreno (GGML_OPENCL_USE_ADRENO_KERNELS)",
    "version: 4727 (c2ea16f2)",
    "Starting RPC server on 127.0.0.1:8880, backend memory: 15160 MB",
    "create_backend: using CPU backend")


def test_an_rpc_server_of_a_gpu_build_serving_from_the_cpu_leaves_the_gpu_unused():
    # llama.cpp#11957: rpc-server's create_backend had no OpenCL branch, so it served from the CPU
    assert backend_from_log(_ADRENO_RPC_SERVER) == "opencl"
    assert silent_fallbacks.gpu_unused_from_log(_ADRENO_RPC_SERVER, "opencl", False) == _ADRENO_RPC_SERVER[-1]
    assert diagnose(*_ADRENO_RPC_SERVER).kind == "gpu-unused"
    # negative: a CPU build's rpc-server serves from the CPU by design
    cpu_only = _ADRENO_RPC_SERVER[1:]
    assert backend_from_log(cpu_only) is None
    assert diagnose(*cpu_only).kind == "unknown"
    # negative: another ggml program's own CPU choice (clip's mmproj kept off the GPU) is not the server's
    clip = (_ADRENO_RPC_SERVER[0], "clip_ctx: using CPU backend")
    assert silent_fallbacks.gpu_unused_from_log(clip, "opencl", False) is None


@pytest.mark.parametrize("line, backend", [
    ("ggml_opencl: selecting platform: 'NVIDIA CUDA'", "opencl"),
    ("load_backend: loaded OpenCL backend from /opt/llama/libggml-opencl.so", "opencl"),
    ("ggml_init_sycl: GGML_SYCL_F16: no", "sycl"),
    ("Found 1 SYCL devices:", "sycl"),
    # negative: a SYCL function named in a message is no sign of the build
    ("the sycl build is not supported here", None),
])
def test_the_opencl_and_sycl_builds_are_read_from_their_own_lines(line, backend):
    assert backend_from_log((line,)) == backend


_CANN_ABORT = "/usr/local/llama.cpp/ggml/src/ggml-cann/ggml-cann.cpp:67: CANN error"


def test_canns_error_is_the_npus_and_a_chip_it_has_no_implementation_for_is_no_kernel():
    # llama.cpp#18133: the toolkit has no implementation for the NPU the runtime found
    unsupported = ("CANN error: EZ9903: [PID: 71888] 2025-12-17-18:13:01.238.630 support for Ascend910 "
                   "is not implemented")
    assert diagnose(_CANN_ABORT, unsupported).kind == "no-kernel-image"
    # order: no code for the device outranks the runtime error it is reported as
    assert verdict((_CANN_ABORT, unsupported)).rule == "build-fault-first"
    assert verdict((_CANN_ABORT, unsupported), flipped("build-fault-first")).kind == "gpu-error"
    # look-alike: another CANN error is the runtime's, not the abort's own check
    inner = diagnose(_CANN_ABORT, "CANN error: EE9999: Inner Error! aclnnAdd failed")
    assert inner.kind == "gpu-error"


@pytest.mark.parametrize("line, kind", [
    # lemonade-sdk/llamacpp-rocm#44: the build's stub for ROCm's code-object manager found no library
    ("implib-gen: libamd_comgr.so.3: failed to load library 'libamd_comgr.so.3' via callback "
     "'amd_comgr_stub_dlopen'", "missing-library"),
    ("implib-gen: libamd_comgr.so.3: failed to load library 'libamd_comgr.so.3' via dlopen: libamd_comgr.so.3: "
     "cannot open shared object file: No such file or directory", "missing-library"),
    # look-alike: the library loaded but lacks a symbol the stub resolves: another version of it
    ("implib-gen: libamd_comgr.so.3: failed to resolve symbol 'amd_comgr_get_data' via dlsym: "
     "/opt/rocm/lib/libamd_comgr.so.3: undefined symbol: amd_comgr_get_data", "stale-library"),
])
def test_implib_sos_stub_not_loading_its_library_is_a_missing_library(line, kind):
    assert diagnose(line).kind == kind


@pytest.mark.parametrize("line, illegal", [
    # stable-diffusion.cpp#1483: a Windows build with AVX-512 code run under Wine on a CPU without it
    ("wine: Unhandled illegal instruction at address 00006FFFF6628515 (thread 012c), starting debugger...", True),
    # look-alikes: Wine's other unhandled exceptions, and prose
    ("wine: Unhandled page fault on read access to 0000000000000000 at address 00006FFFF6628515 (thread 012c), "
     "starting debugger...", False),
    ("wine: Unhandled privileged instruction at address 00006FFFF6628515 (thread 012c), starting debugger...", False),
])
def test_wines_unhandled_illegal_instruction_is_the_cpu_lacking_it(line, illegal):
    assert (diagnose(line).kind == "illegal-instruction") is illegal


@pytest.mark.parametrize("lines, kind", [
    # llama-cpp-python#127: IPython's traceback, cut inside ctypes' lookup of a function the library lacks
    (("--> 419 _lib.llama_sample_top_p_top_k.argtypes = [",
      "File C:\\Python39\\lib\\ctypes\\__init__.py:387, in CDLL.__getattr__(self, name)"), "stale-library"),
    (('  File "/app/llama_cpp/llama_cpp.py", line 419, in <module>',
      '  File "/usr/lib/python3.10/ctypes/__init__.py", line 387, in __getattr__'), "stale-library"),
    # look-alike: ctypes failing to open the library at all is a missing one
    (('  File "/usr/lib/python3.10/ctypes/__init__.py", line 374, in __init__',
      "OSError: libllama.so: cannot open shared object file: No such file or directory"), "missing-library"),
])
def test_a_traceback_inside_ctypes_function_lookup_is_a_library_of_another_version(lines, kind):
    assert diagnose(*lines).kind == kind


_CL_CHECK = ("ggml_opencl: clEnqueueNDRangeKernel(queue, kernel, 3, NULL, global_work_size, local_work_size, 0, "
             "NULL, NULL) error -5 at /llama.cpp/ggml/src/ggml-opencl/ggml-opencl.cpp:4432")


@pytest.mark.parametrize("line, gpu_error", [
    # ggml-opencl.cpp CL_CHECK (2023 to b11434): the OpenCL runtime refused a call
    (_CL_CHECK, True),
    # ggml-webgpu.cpp (b11434): the device's error callback and its device loss
    ("ggml_webgpu: Device error! Reason: 1, Message: validation error in the bind group", True),
    ("ggml_webgpu: Device lost! Reason: 2, Message: the GPU process crashed", True),
    # ggml-hexagon.cpp (b11434): the DSP session's error on a sync
    ("ggml-hex: HTP0 synchronize failed : dsp-error HTP_STATUS_INTERNAL_ERR", True),
    # look-alikes: the backends' own progress lines
    ("ggml_opencl: selecting platform: 'NVIDIA CUDA'", False),
    ("ggml_opencl: transient compile failure (err=-11) - clFinish + retry (1/3)", False),
    ("ggml-hex: HTP0 synchronize", False),
])
def test_the_opencl_webgpu_and_hexagon_backends_runtime_errors_are_the_devices(line, gpu_error):
    assert (diagnose(line).kind == "gpu-error") is gpu_error


def test_an_opencl_runtime_error_before_its_assert_is_the_runtimes():
    # b11434's CL_CHECK asserts right after the error line; the assert is its echo
    abort = "/llama.cpp/ggml/src/ggml-opencl/ggml-opencl.cpp:4432: GGML_ASSERT(0) failed"
    assert diagnose(_CL_CHECK, abort, signal="SIGABRT").kind == "gpu-error"
    assert verdict((_CL_CHECK, abort)).rule == "gpu-error-before-its-abort"
    assert verdict((_CL_CHECK, abort), flipped("gpu-error-before-its-abort")).kind == "assertion-failed"


# ---- widened after batch 77 (spent): a library of macOS's own missing, the container toolkit's
# requirement check, a wrapper's stamp on the device list; and b11434's speculative set-up errors

@pytest.mark.parametrize("lines, kind", [
    # unslothai/unsloth#9843: a prebuilt linked on macOS 26, whose /usr/lib/librdma.dylib macOS 15 lacks
    (("dyld[41694]: Library not loaded: /usr/lib/librdma.dylib",
      "  Referenced from: .../llama.cpp/build/bin/libggml-rpc.0.dylib",
      "  Reason: tried: '/usr/lib/librdma.dylib' (no such file) ..."), "system-too-old"),
    (("dyld[7]: Library not loaded: '/System/Library/Frameworks/MetalPerformancePrimitives.framework/"
      "Versions/A/MetalPerformancePrimitives'",), "system-too-old"),
    # look-alikes: a library the program brings (or Homebrew's) is missing, not macOS too old
    (("dyld[1]: Library not loaded: /usr/local/opt/libomp/lib/libomp.dylib",), "missing-library"),
    (("dyld[1]: Library not loaded: @rpath/libggml.dylib",), "missing-library"),
    (("dyld[1]: Library not loaded: /opt/homebrew/opt/openssl@3/lib/libssl.3.dylib",), "missing-library"),
])
def test_a_library_of_macos_own_that_is_not_there_is_an_older_macos(lines, kind):
    inc = diagnose(*lines, os="darwin")
    assert inc.kind == kind
    if kind == "system-too-old":
        assert "library of macOS's own" in inc.title


_OCI_REQUIREMENTS = ("failed to create shim task: OCI runtime create failed: could not apply required modification "
                     "to OCI specification: error modifying OCI spec: requirements not met:")


@pytest.mark.parametrize("line, kind", [
    # docker/model-runner#978: the paste ends where the image's `cuda>=13.3||…` condition began
    (f"unable to initialize standalone model runner: {_OCI_REQUIREMENTS} ", "cuda-driver-too-old"),
    (f"{_OCI_REQUIREMENTS} unsatisfied condition: cuda>=12.8 (cuda=12.4)", "cuda-driver-too-old"),
    # look-alikes: a condition on the GPU's architecture is not the driver's age, nor is prose
    (f"{_OCI_REQUIREMENTS} unsatisfied condition: arch>=8.0 (arch=7.5)", "unknown"),
    ("Password requirements not met:", "unknown"),
])
def test_the_container_toolkits_cuda_requirement_not_met_is_a_driver_too_old(line, kind):
    assert diagnose(line).kind == kind


_ATOMIC_CHAT_LIST = ('[03:30:12] INFO Getting devices from server at path: "C:\\Users\\me\\AppData\\Roaming\\'
                     'Atomic Chat\\data\\llamacpp\\backends\\b8892\\win-cuda-13-common_cpus-x64\\build\\bin\\'
                     'llama-server.exe"', "[03:30:13] INFO Device list output:", "[23:36:10] INFO Available devices:")


def test_a_wrappers_stamp_on_the_device_list_is_read_through():
    # AtomicBot-ai/Atomic-Chat#14: the app logs `--list-devices` line by line; the CUDA DLLs were not shipped
    empty = (*_ATOMIC_CHAT_LIST, "[23:36:10] INFO ", "[03:30:13] WARN No devices found in output")
    inc = diagnose(*empty, backend="cuda", os="windows", phase="starting")
    assert inc.kind == "gpu-unused" and inc.evidence == "Available devices: (none)"
    # look-alike: a device listed under the same stamp is a GPU found
    listed = (*_ATOMIC_CHAT_LIST, "[23:36:10] INFO   CUDA0: NVIDIA GeForce RTX 4070 (12281 MiB, 11037 MiB free)")
    assert diagnose(*listed, backend="cuda", os="windows", phase="starting").kind == "unknown"


@pytest.mark.parametrize("line, drafter", [
    # tools/server/server-context.cpp load_model (b11434) quoting what common_speculative_init threw
    ("srv  load_model: failed to initialize speculative decoding context: DSpark draft has no confidence "
     "head: please set --spec-draft-p-min 0", True),
    ("srv  load_model: synthetic acceptance requires an initialized speculative decoding context", True),
    ("spec common_specul: the target and draft vocabs are not compatible", True),
    # ... and the same throws reaching another program bare
    ("terminate called after throwing an instance of 'std::runtime_error'\n  what():  draft model is not eagle3 "
     "(expected 3 extract layers, got 1)", True),
    ("what():  the draft model number of sequences is incompatible with the speculative n_seq", True),
    # look-alike: the speculative context initialised, nothing failed
    ("srv  load_model: speculative decoding context initialized", False),
])
def test_b11434s_speculative_set_up_errors_are_the_drafter(line, drafter):
    assert (diagnose(line, exit_code=1).kind == "drafter-failure") is drafter


def test_a_drafter_the_server_dropped_and_loaded_on_without_is_not_a_later_failures_cause():
    # server-context.cpp load_model (b11434) goes on without the drafter after this line
    dropped = ("srv  load_model: failed to initialize speculative decoding context: draft model vocab type "
               "must match target model to use speculation")
    listening = "main: server is listening on http://127.0.0.1:8080"
    assert diagnose(dropped, listening, CUDA_OOM, exit_code=1).kind == "cuda-oom"
    assert diagnose(dropped, listening, signal="SIGSEGV").kind == "unknown"
    # look-alike: a launch that ends before the load is over ended on the drafter's line
    assert diagnose(dropped, exit_code=1).kind == "drafter-failure"


# ---- widened after batch 78 (spent): the 2024 cache-type refusal, the drafter-only architectures,
# Python's missing module

@pytest.mark.parametrize("line, kind", [
    # ggml-org/llama.cpp#7639: `-ctk q6_k` on a 2024 build, thrown past main
    ("libc++abi: terminating due to uncaught exception of type std::runtime_error: Invalid cache type: q6_k",
     "bad-argument"),
    # look-alike: a prompt-cache file the engine could not read is no option refused
    ("prompt cache: invalid cache file", "unknown"),
])
def test_the_2024_cache_type_refusal_is_a_bad_argument(line, kind):
    assert diagnose(line, exit_code=1).kind == kind


@pytest.mark.parametrize("line, drafter", [
    # ggml-org/llama.cpp#25116: a DFlash draft converted before the architecture needed target_layers
    ("error loading model hyperparameters: DFlash model requires 'target_layers' in GGUF metadata", True),
    ("error loading model hyperparameters: EAGLE3 model requires 'extract_layers' in GGUF metadata", True),
    ("error loading model: EAGLE3 requires exactly 3 entries in 'extract_layers'", True),
    ('GGML_ASSERT(model_other->tok_embd != nullptr && "EAGLE3 decoder requires token embeddings (own or from '
     'target model)") failed', True),
    # look-alike: the architecture's own progress line is no failure
    ("llm_build_dflash: DFlash extract_layers = [1, 12, 23]", False),
])
def test_a_load_failing_on_a_drafter_only_architecture_is_the_drafter(line, drafter):
    inc = diagnose(line, exit_code=1)
    assert (inc.kind == "drafter-failure") is drafter
    # order: the drafter's line outranks the load error and the abort it is reported in
    if drafter:
        assert diagnose(line, "llama_model_load_from_file_impl: failed to load model", exit_code=1).kind == \
            "drafter-failure"


@pytest.mark.parametrize("line, missing", [
    # containers/ramalama#1362: the image's Python was not the one its packages were installed for
    ("ModuleNotFoundError: No module named 'ramalama'", True),
    ("ImportError: No module named llama_cpp", True),  # Python 2's wording
    # look-alikes: a name the installed package lacks is another version, not a missing one; prose
    ("ImportError: cannot import name 'Llama' from 'llama_cpp'", False),
    ("Warning: No module named 'flash_attn', falling back", False),
])
def test_pythons_missing_module_is_a_missing_library(line, missing):
    inc = diagnose(line, exit_code=1)
    assert (inc.kind == "missing-library") is missing
    if missing:
        assert "Python package" in inc.title


# ---- widened after batch 79 (spent): SYCL's missing kernel, the Metal pipeline that did not compile,
# RamaLama's CUDA check, LocalAI's all-in-one image and Ollama's runner without VRAM

_SYCL_NO_KERNEL = ("No kernel named _ZTSZZL17rms_norm_f32_syclPKfPfiifPN4sycl3_V15queueEENKUlRNS3_7handlerEE0_"
                   "clES7_EUlNS3_7nd_itemILi3EEEE_ was found -46 (PI_ERROR_INVALID_KERNEL_NAME)Exception caught "
                   "at file:/home/u/ollama/llm/llama.cpp/ggml-sycl.cpp, line:12708")


@pytest.mark.parametrize("line, kind", [
    # ollama#2458: a SYCL build compiled without -fsycl's device code
    (_SYCL_NO_KERNEL, "no-kernel-image"),
    # the Unified Runtime's name for the same error (oneAPI 2024.1 on), with no wording around it
    ("Native API failed. Native API returns: 48 (UR_RESULT_ERROR_INVALID_KERNEL_NAME)", "no-kernel-image"),
    # look-alikes: the SYCL runtime's other failures are not a missing kernel
    ("Native API failed. Native API returns: -30 (PI_ERROR_INVALID_VALUE) -30 (PI_ERROR_INVALID_VALUE)"
     "Exception caught at file:/ggml-sycl.cpp, line:3021", "gpu-error"),
    ("No kernel name provided without -fsycl-unnamed-lambda enabled!", "unknown"),  # a compile error
])
def test_a_sycl_kernel_the_binary_lacks_is_no_kernel_image(line, kind):
    assert diagnose(line, exit_code=1, backend="sycl").kind == kind


def test_a_sycl_kernel_missing_outranks_the_exception_and_abort_around_it():
    # order: the missing kernel is the root; the abort the exception ends in is its echo
    inc = diagnose(_SYCL_NO_KERNEL, "/ggml-sycl.cpp:12708: SYCL error", signal="SIGABRT", backend="sycl")
    assert inc.kind == "no-kernel-image" and "No kernel named" in inc.evidence


_METAL_PIPELINE = ("ggml_metal_init: loaded kernel_mul_mm_f32_f32                         0x0 | th_max =    0 | "
                   "th_width =    0",
                   "ggml_metal_init: error: load pipeline error(2, CompilerError): SC compilation failure",
                   "There is a call to an undefined label",
                   "llama_new_context_with_model: ggml_metal_init() failed")
_CONTEXT = ("llama_init_from_gpt_params: error: failed to create context with model 'models/llama-2-7b.Q4_K_M.gguf'",
            "main: error: unable to load model")


def test_a_context_that_failed_after_metals_pipelines_did_not_compile_is_not_read_as_memory():
    # llama.cpp#3423 (an Intel Mac's AMD GPU): nothing was allocated when the context failed; the AMD
    # driver's shader compiler failing on a kernel is a build without a kernel for this GPU (since
    # batch 84), and a pipeline error without those words stays open
    inc = diagnose(*_METAL_PIPELINE, *_CONTEXT, os="darwin", backend="metal")
    assert inc.kind == "no-kernel-image"
    unsaid = tuple(x.replace("SC compilation failure", "Compiler encountered an internal error")
                   for x in _METAL_PIPELINE)
    inc = diagnose(*unsaid, *_CONTEXT, os="darwin", backend="metal")
    assert inc.kind == "unknown" and "system-too-old" in inc.candidates
    # b11434's wording of one pipeline that did not compile reads the same way
    b11434 = ("ggml_metal_library_compile_pipeline: failed to compile pipeline: base = 'kernel_mul_mm_f16_f32', "
              "name = 'kernel_mul_mm_f16_f32_bci=0_bco=1'")
    assert diagnose(b11434, *_CONTEXT, os="darwin", backend="metal").kind == "unknown"
    # the negative: the same context failure with nothing about Metal's start is read as the
    # build's device memory, as before
    assert diagnose(*_CONTEXT, os="darwin", backend="metal").kind == "metal-oom"


_RAMALAMA_CUDA = ("WARNING:ramalama:CUDA version (11, 4) is not supported. Minimum required version is 12.4.: "
                  "Falling back to default image.")


@pytest.mark.parametrize("line, kind", [
    # containers/ramalama#2078: nvidia-smi reports CUDA 11.4, under the CUDA image's 12.4
    (_RAMALAMA_CUDA, "cuda-driver-too-old"),
    # look-alike: (0, 0) is RamaLama's reading when nvidia-smi is missing, no driver age
    ("WARNING:ramalama:CUDA version (0, 0) is not supported. Minimum required version is 12.4.: "
     "Falling back to default image.", "unknown"),
])
def test_ramalamas_cuda_below_its_minimum_is_the_drivers_age(line, kind):
    assert diagnose(line, backend="cuda").kind == kind


def test_a_failure_after_ramalamas_cuda_fallback_is_that_failure():
    # order: the warning is read only when nothing failed, so the engine's own failure in the
    # fallback image wins
    inc = diagnose(_RAMALAMA_CUDA, "llama_model_load: error loading model: tensor 'blk.0.attn_q.weight' data is "
                   "not within the file bounds, model is corrupted or incomplete", exit_code=1, backend="cuda")
    assert inc.kind == "bad-model"


_LOCALAI_AIO = ("===> LocalAI All-in-One (AIO) container starting...",
                "NVIDIA GPU detected",
                "/aio/entrypoint.sh: line 52: nvidia-smi: command not found",
                "NVIDIA GPU detected, but nvidia-smi is not installed. GPU acceleration will not be available.",
                "GPU acceleration is not enabled or supported. Defaulting to CPU.",
                "10:27AM INF LocalAI API is listening! Please connect to the endpoint for API documentation. "
                "endpoint=http://0.0.0.0:8080")


def test_localais_image_finding_a_gpu_without_its_runtime_is_the_gpu_unused():
    # mudler/LocalAI#2394: the container was started without --gpus
    inc = diagnose(*_LOCALAI_AIO, backend="cuda")
    assert inc.kind == "gpu-unused" and "nvidia-smi is not installed" in inc.evidence
    assert diagnose("AMD GPU detected, but ROCm is not installed. GPU acceleration will not be available.",
                    backend="rocm").kind == "gpu-unused"
    # the negative: on a machine with no GPU the image says only its closing line, no fault
    no_gpu = tuple(x for x in _LOCALAI_AIO if "GPU detected" not in x and "nvidia-smi" not in x)
    assert diagnose(*no_gpu, backend="cuda").kind == "unknown"
    # order: a failure the log names outranks the fallback that came before it
    assert diagnose(*_LOCALAI_AIO, "llama_model_load: error loading model: unknown model architecture: 'x'",
                    exit_code=1, backend="cuda").kind == "bad-model"


def _ollama_runner(inference, vram, size='"7.9 GiB"'):
    return ('time=2025-08-15T16:00:57.524Z level=DEBUG source=sched.go:359 msg="after processing request finished '
            f'event" runner.name=registry.ollama.ai/library/deepseek-r1:8b runner.inference={inference} '
            f'runner.devices=1 runner.size={size} runner.vram={vram} runner.parallel=1 runner.pid=62')


@pytest.mark.parametrize("inference, vram, size, unused", [
    ("vulkan", '"0 B"', '"7.9 GiB"', True),  # MooreThreads/ollama-musa#22
    ('"[{ID:0 Library:CUDA}]"', '"0 B"', '"4.1 GiB"', True),  # 0.12 on: the devices listed
    # look-alikes: a CPU-only machine's runner, a runner with some VRAM, an empty runner
    ("cpu", '"0 B"', '"7.9 GiB"', False),
    ("vulkan", '"7.9 GiB"', '"7.9 GiB"', False),
    ("cuda", '"0 B"', '"0 B"', False),
])
def test_an_ollama_gpu_runner_holding_nothing_in_vram_is_the_gpu_unused(inference, vram, size, unused):
    inc = diagnose(_ollama_runner(inference, vram, size), backend="vulkan")
    assert (inc.kind == "gpu-unused") is unused


_OLLAMA_UNLOAD = ("2023/11/27 22:28:29 llama.go:435: signal: killed",
                  "2023/11/27 22:28:29 llama.go:509: llama runner stopped successfully")


def test_ollama_killing_its_own_runner_is_a_stop_not_the_oom_killer():
    # ollama#1290: the idle model unloaded a few minutes after use
    inc = diagnose(*_OLLAMA_UNLOAD)
    assert inc.kind == "stopped" and inc.rule == "wrapper-killed-its-runner"
    assert "OLLAMA_KEEP_ALIVE" in inc.advice
    # 0.3 on: the stop is asked for (debug level) before the kill it causes
    asked = ('time=2024-08-01T10:00:00.000Z level=DEBUG source=server.go:1039 msg="stopping llama server"',
             'time=2024-08-01T10:00:00.010Z level=DEBUG source=server.go:423 msg="llama runner terminated" '
             'error="signal: killed"')
    assert diagnose(*asked).kind == "stopped"
    # look-alikes: a runner the kernel killed is unloaded later, not in the same second ...
    later = (_OLLAMA_UNLOAD[0], _OLLAMA_UNLOAD[1].replace("22:28:29", "22:33:29"))
    assert diagnose(*later).kind == "host-oom"
    assert diagnose(_OLLAMA_UNLOAD[0]).kind == "host-oom"
    # ... and a stop asked for an earlier runner is not this one's
    started = ('time=2024-08-01T10:00:05.000Z level=INFO source=server.go:383 msg="starting llama server" '
               'cmd="/usr/bin/ollama_llama_server --model /m"')
    assert diagnose(asked[0], started, asked[1]).kind == "host-oom"
    # order: a failure the log names still decides over the kill
    assert diagnose(CUDA_OOM, *_OLLAMA_UNLOAD).kind == "cuda-oom"


def test_wrapper_killed_its_runner_reads_only_the_kill_and_the_stop():
    assert classify.wrapper_killed_its_runner(_OLLAMA_UNLOAD) == _OLLAMA_UNLOAD[1]
    assert classify.wrapper_killed_its_runner(_OLLAMA_UNLOAD[::-1]) is None
    assert classify.wrapper_killed_its_runner(("signal: killed", "llama runner stopped successfully")) is None
    assert classify.wrapper_killed_its_runner(()) is None


_LLAMASHARP_GGML = "LoadWeightsFailedException: Failed to load model '<PATH>\\wizardLM-7B.ggmlv3.q4_1.bin'"


def test_llamasharps_refusal_of_a_ggml_era_file_is_its_format():
    # LLamaSharp#999: a GGML v3 .bin in 2024, when every backend LLamaSharp ships reads GGUF only
    assert diagnose(_LLAMASHARP_GGML, os="windows").kind == "bad-model"
    # look-alike: the same refusal of a GGUF file may be memory as much as the file
    gguf = _LLAMASHARP_GGML.replace(".ggmlv3.q4_1.bin", ".Q4_K_M.gguf")
    assert diagnose(gguf, os="windows").kind != "bad-model"
    # order: a failing allocation before the refusal is the cause
    lines = (CUDA_OOM, _LLAMASHARP_GGML)
    assert verdict(lines).rule == "allocation-inside-load-error"
    assert verdict(lines, flipped("allocation-inside-load-error")).kind == "bad-model"


# Unsloth Studio's own explanations of a start that failed (studio/backend/core/inference/llama_cpp.py,
# 2026), as it raises them; read from its source, no batch.
_UNSLOTH_SAYS = "RuntimeError: "


@pytest.mark.parametrize("said, kind", [
    ("llama-server could not start: libggml-cuda.so is part of Unsloth's own llama.cpp runtime and is "
     "missing from the install. Run `unsloth studio update` to reinstall it, then load the model again.",
     "missing-library"),
    ("llama-server could not start: the system library libgomp.so.1 is missing. Install it with your "
     "package manager, then load the model again.", "missing-library"),
    ("llama-server could not start: libllama.so is missing from that exact location. Restore it, then "
     "load the model again.", "missing-library"),
    ("llama-server exited immediately (status 127): either the llama-server executable could not be found "
     "or run, or one of the shared libraries it needs could not be loaded.", "missing-library"),
    ("llama-server could not start: bundled libamdhip64.so.6 looked up hipMemGetInfo in a different ROCm "
     "than it was built against. That is a HIP/ROCR version mix", "stale-library"),
    ("llama-server could not start: the executable was built for a different CPU architecture than this "
     "Mac", "stale-library"),
    ("llama-server does not recognise the argument '--foo'. Check it in this model's extra arguments",
     "bad-argument"),
    ("llama-server rejected the value for '--ctx-size': the value is not a number.", "bad-argument"),
    ("Tensor parallelism is not supported for this model's architecture. Turn off Tensor Parallelism in "
     "the model settings and reload.", "bad-argument"),
    ("llama-server opened a file that is not a GGUF, loading m.gguf: it does not start with the GGUF magic.",
     "bad-model"),
    ("llama.cpp does not support this GGUF's model architecture ('foo'). The file is valid", "bad-model"),
    ("'flux' is a diffusion (image-generation) GGUF, which llama-server cannot run as a chat/completion "
     "model.", "bad-model"),
    ("Vision projector incompatible with this llama.cpp build, and the text-only retry also failed: x",
     "bad-model"),
    ("llama-server crashed at startup on both the vision and text-only attempts -- a GPU driver/runtime "
     "initialization crash, not a model or vision-projector problem.", "gpu-error"),
    ("llama-server was terminated (signal 15) before it became healthy. If you cancelled or unloaded the "
     "model this is expected", "stopped"),
    ("llama-server started but never became healthy on its local /health endpoint.", "startup-timeout"),
    ("llama-server was stopped by the operating system (signal 9), most likely out of memory.", "host-oom"),
])
def test_unsloth_studios_own_diagnosis_names_its_kind(said, kind):
    assert diagnose(_UNSLOTH_SAYS + said).kind == kind


@pytest.mark.parametrize("said", [
    # its macOS signal-9 guess names a refused code signature beside memory
    "llama-server was stopped by macOS (signal 9) before it started. This is most often out of memory",
    # the warnings before its own retries: the retry ends the start, not these
    "llama-server failed to start with speculative drafter (ngram-mod); retrying without it.",
    "llama-server crashed with a HIP kernel-image error on GPU(s) 1 -- the llama.cpp build has no kernels "
    "for that arch. Retrying on GPU(s) 0.",
    # a library it found and could not load, for a reason it passes on (too short, no permission)
    "llama-server could not start: libcudart.so.12, part of Unsloth's own llama.cpp runtime, could not be "
    "loaded (file too short). The install is incomplete or mismatched.",
])
def test_unsloth_studios_guesses_and_retries_are_not_read(said):
    assert diagnose(_UNSLOTH_SAYS + said).kind == "unknown"


def test_the_servers_own_lines_decide_over_unsloth_studios_sentence():
    model = _UNSLOTH_SAYS + "llama.cpp does not support this GGUF's model architecture ('foo')."
    assert verdict((CUDA_OOM, model)).rule == "allocation-inside-load-error"
    assert verdict((CUDA_OOM, model), flipped("allocation-inside-load-error")).kind == "bad-model"
    argument = _UNSLOTH_SAYS + "llama-server does not recognise the argument '--foo'."
    assert verdict((argument, "GGML_ASSERT(ctx) failed")).rule == "argument-before-load"
    assert verdict((argument, "GGML_ASSERT(ctx) failed"), flipped("argument-before-load")).kind == "assertion-failed"


def test_lemonades_missing_gguf_for_a_checkpoint_is_the_model_file():
    # read from Lemonade's llamacpp_server.cpp (2025-2026), no batch: the GGUF its checkpoint names is absent
    line = "[Error] (Router) Failed to load model: GGUF file not found for checkpoint: unsloth/Qwen3-8B-GGUF:Q4_K_M"
    assert diagnose(line).kind == "bad-model"
    # look-alike: its generic start failure names no cause
    assert diagnose("[Error] (Router) Failed to load model: llama-server failed to start").kind == "unknown"
    # order: a failing allocation before it is the cause
    assert verdict((CUDA_OOM, line)).rule == "allocation-inside-load-error"
    assert verdict((CUDA_OOM, line), flipped("allocation-inside-load-error")).kind == "bad-model"


@pytest.mark.parametrize("line", [
    "unable to load runner: invalid runtime flags: Unterminated double-quoted string",
    'runtime flag "--rpc" is not allowed for backend "llama.cpp"',
    'invalid runtime flag "--model=/etc/passwd": paths are not allowed (contains \'/\' or \'\\\\\')',
    'invalid flag "--temp=-x": value cannot start with \'-\' unless followed by a digit',
])
def test_docker_model_runners_refused_runtime_flags_are_a_bad_argument(line):
    # read from docker/model-runner's scheduler.go and runtime_flags.go (2025-2026), no batch
    assert diagnose(line).kind == "bad-argument"


def test_a_runner_flag_refusal_ends_the_start_before_the_load():
    line = 'runtime flag "--rpc" is not allowed for backend "llama.cpp"'
    # look-alike: the runner's own start failure names no flag
    assert diagnose("unable to load runner: error waiting for runner to be ready: inference backend quit "
                    "unexpectedly").kind == "unknown"
    assert verdict((line, "error loading model: failed to open GGUF file")).rule == "argument-before-load"
    assert verdict((line, "error loading model: failed to open GGUF file"),
                   flipped("argument-before-load")).kind == "bad-model"


@pytest.mark.parametrize("line", [
    "getting model(ai/qwen3-vllm): model(ai/qwen3-vllm) has no GGUF layer",
    "failed to get args for llama.cpp: GGUF file required by llama.cpp backend",
])
def test_docker_model_runners_model_without_a_gguf_is_the_model(line):
    # read from docker/model-runner's llama.cpp backend (2025-2026), no batch
    assert diagnose(line).kind == "bad-model"


def test_node_llama_cpps_own_estimate_and_missing_binary_are_read():
    # read from node-llama-cpp's sources (2024-2026), no batch
    ram = "InsufficientMemoryError: A context size of 131072 is too large for the available RAM (including swap)"
    assert diagnose(ram).kind == "host-oom"
    assert diagnose("NoBinaryFoundError: NoBinaryFoundError").kind == "missing-library"
    # look-alikes: its VRAM forms name no one memory here, nor does `VRAM and RAM`
    both = "InsufficientMemoryError: A context size of 4096 is too large for the available VRAM and RAM"
    assert diagnose(both).kind != "host-oom"
    assert diagnose("InsufficientMemoryError: A context size of 4096 is too large for the available "
                    "VRAM").kind != "host-oom"
    # order: the named memory is the cause of the wrapper's load error after it
    lines = (ram, "Error: Failed to load model")
    assert verdict((ram, "error loading model: failed to open GGUF file")).rule == "allocation-inside-load-error"
    assert verdict((ram, "error loading model: failed to open GGUF file"),
                   flipped("allocation-inside-load-error")).kind == "bad-model"
    assert diagnose(*lines).kind == "host-oom"


# ---- widened after batches 80 to 82 (spent): HIP's invalid image at a launch, Ollama's discovery
# that found only the CPU, llama-server's `Loading model` answer in a client's error, and SYCL's
# failed build of the device code

_HIP_LAUNCH = ("/home/runner/work/llama.cpp/ggml/src/ggml-cuda/ggml-cuda.cu:103: ROCm error",
               "ROCm error: device kernel image is invalid",
               "  current device: 0, in function ggml_cuda_kernel_launch at ggml/src/ggml-cuda/common.cuh:1639",
               "  hipGetLastError()")


@pytest.mark.parametrize("line", ["ROCm error: device kernel image is invalid",
                                  "CUDA error: hipErrorInvalidImage"])
def test_hips_invalid_image_at_a_launch_is_a_build_without_this_gfx(line):
    # HIP returns it when it holds no function for the device's ISA (inference-snaps#337: gfx1103)
    inc = diagnose(line, "  current device: 0, in function ggml_cuda_compute_forward", signal="SIGABRT")
    assert inc.kind == "no-kernel-image" and inc.candidates == ()


def test_hips_invalid_image_outranks_the_abort_it_ends_in():
    # order: ggml's abort and backtrace follow the launch error; the error is the root
    inc = diagnose(*_HIP_LAUNCH, "libggml-base.so.0(ggml_abort+0x15b)[0x7956f08dc79b]",
                   "Error: signal: aborted (core dumped)", signal="SIGABRT", backend="rocm")
    assert inc.kind == "no-kernel-image" and "device kernel image is invalid" in inc.evidence
    # negative: the same launch error worded by CUDA stays open, whatever follows it
    cuda = tuple(x.replace("ROCm error", "CUDA error").replace("hipGetLastError", "cudaGetLastError")
                 for x in _HIP_LAUNCH)
    assert diagnose(*cuda, signal="SIGABRT", backend="cuda").kind == "unknown"
    # negative: another ROCm error at the same launch is the GPU's fault, not the build's
    fault = tuple(x.replace("device kernel image is invalid", "an illegal memory access was encountered")
                  for x in _HIP_LAUNCH)
    assert diagnose(*fault, signal="SIGABRT", backend="rocm").kind == "gpu-error"


def _ollama_inference_compute(library, ident="cpu"):
    return (f'time=2026-04-30T10:00:00.000Z level=INFO source=types.go:60 msg="inference compute" id={ident} '
            f'library={library} compute="" name={library} description={library} libdirs=ollama driver="" '
            'pci_id="" type="" total="31.0 GiB" available="26.8 GiB"')


@pytest.mark.parametrize("line, backend, unused", [
    # ollama#15964: 0.23.0 with two NVIDIA GPUs found none and listed only the CPU
    (_ollama_inference_compute("cpu"), "cuda", True),
    (_ollama_inference_compute("cpu", ident="0"), "rocm", True),  # after 0.5's `no compatible GPUs`
    # look-alikes: a GPU it found, and the CPU line on a machine run without a GPU build
    (_ollama_inference_compute("cuda", ident="GPU-5d3b"), "cuda", False),
    (_ollama_inference_compute("cpu"), "cpu", False),
    (_ollama_inference_compute("cpu"), None, False),
])
def test_ollama_discovery_that_found_only_the_cpu_is_the_gpu_unused(line, backend, unused):
    inc = diagnose('level=WARN source=runner.go:536 msg="user overrode visible devices" CUDA_VISIBLE_DEVICES=0,1',
                   line, backend=backend)
    assert (inc.kind == "gpu-unused") is unused


def test_a_failure_after_ollamas_cpu_only_discovery_is_that_failure():
    # order: the fallback is read only when nothing failed
    inc = diagnose(_ollama_inference_compute("cpu"), "llama_model_load: error loading model: error loading "
                   "model architecture: unknown model architecture: 'qwen35moe'", exit_code=1, backend="cuda")
    assert inc.kind == "bad-model"


_LOADING_REPLY = ('Error: GET "http://localhost:8330/v1/models": 503 Service Unavailable '
                  '{"message":"Loading model","type":"unavailable_error","code":503}')


@pytest.mark.parametrize("line, kind", [
    # canonical/inference-snaps#234: the snap's chat command asked while the model loaded
    (_LOADING_REPLY, "startup-timeout"),
    # b11434's own key order, as a client that prints the body raw shows it
    ('requests.exceptions.HTTPError: 503: {"error":{"code":503,"message":"Loading model",'
     '"type":"unavailable_error"}}', "startup-timeout"),
    # look-alikes: another 503 of the server, and the loading line of a normal start
    ('503 Service Unavailable {"error":{"code":503,"message":"Service Unavailable","type":"unavailable_error"}}',
     "unknown"),
    ("srv  load_model: loading model '/models/nemotron.gguf'", "unknown"),
])
def test_a_client_that_ended_on_the_servers_loading_answer_gave_up_waiting(line, kind):
    inc = diagnose(line, exit_code=1)
    assert inc.kind == kind
    if kind == "startup-timeout":
        assert "/health" in inc.advice


def test_a_crash_during_the_load_outranks_the_loading_answer_before_it():
    # order: the client's early 503 does not explain a load that then died on memory
    inc = diagnose(_LOADING_REPLY, "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 9000.00 MiB on "
                   "device 0: cudaMalloc failed: out of memory", "llama_model_load: error loading model: unable "
                   "to allocate CUDA0 buffer", exit_code=1, backend="cuda")
    assert inc.kind == "cuda-oom"


_SYCL_BUILD = ("The program was built for 1 devices",
               "Build program log for 'Intel(R) Arc(TM) A770 Graphics':",
               "Exception caught at file:/home/intel/llama-cpp/ggml/src/ggml-sycl/common.cpp, line:99")


def test_a_failed_sycl_build_of_the_device_code_is_left_open():
    # intel/ipex-llm#13065: the driver's compiler or the code, and the log holds no build output
    inc = diagnose(*_SYCL_BUILD, backend="sycl")
    assert inc.kind == "unknown" and inc.candidates == ("gpu-error", "no-kernel-image")
    assert inc.rule == "sycl-program-build-failed"
    assert "driver" in inc.advice
    assert diagnose("Native API failed. Native API returns: -11 (PI_ERROR_BUILD_PROGRAM_FAILURE)",
                    backend="sycl").rule == "sycl-program-build-failed"
    # negative: the exception alone is the SYCL runtime's error, read as before
    assert diagnose(_SYCL_BUILD[-1], backend="sycl").kind == "gpu-error"


def test_a_kernel_the_sycl_binary_lacks_outranks_the_failed_build_around_it():
    # order: a kernel named as missing is the build's lack, whatever the exception's text around it
    inc = diagnose(*_SYCL_BUILD[:2], _SYCL_NO_KERNEL, backend="sycl")
    assert inc.kind == "no-kernel-image" and "No kernel named" in inc.evidence


_NON_ASCII_BLOB = "C:\\Users\\Пользователь\\.ollama\\models\\blobs\\sha256-667b0c1932bc6ffc593ed1d03"


@pytest.mark.parametrize("line", [
    f"error loading model: llama_model_loader: failed to load model from {_NON_ASCII_BLOB}",
    # continuedev/continue#12713: the user name already garbled to U+FFFD, the backslashes JSON-doubled
    '"llama-server process has terminated: exit status 1: error loading model: llama_model_loader: failed to '
    'load model from C:\\\\Users\\\\\ufffd\ufffd\ufffd\ufffd '
    '\ufffd\ufffd\ufffd\ufffd\ufffd\ufffd\\\\.ollama\\\\models"',
    # llama.cpp#5802's engine, where gguf's own reason is kept: the file never opened
    "gguf_init_from_file: failed to open GGUF file 'C:\\Users\\Željko\\mistral-7b-instruct-v0.2.Q4_K_S.gguf'",
])
def test_a_load_that_failed_on_a_non_ascii_windows_path_is_left_open(line):
    inc = diagnose(line, exit_code=1, os="windows")
    assert inc.kind == "unknown" and inc.candidates == ("bad-model", "bad-argument")
    assert inc.rule == "model-on-a-non-ascii-path" and "ASCII" in inc.advice


@pytest.mark.parametrize("line", [
    # look-alikes: a plain ASCII Windows path, and a non-ASCII path outside Windows
    "error loading model: llama_model_loader: failed to load model from C:\\Users\\bob\\.ollama\\models\\blobs\\sha",
    "error loading model: llama_model_loader: failed to load model from /home/Željko/models/m.gguf",
])
def test_a_load_that_failed_elsewhere_is_still_the_model(line):
    assert diagnose(line, exit_code=1, os="windows").kind == "bad-model"


def test_ggufs_own_reason_outranks_the_non_ascii_path_of_the_load():
    # order: gguf said why it refused the file, so the path is not in question
    inc = diagnose("gguf_init_from_file_impl: invalid magic characters: 'tjgg', expected 'GGUF'",
                   f"error loading model: llama_model_loader: failed to load model from {_NON_ASCII_BLOB}",
                   exit_code=1, os="windows")
    assert inc.kind == "bad-model" and "invalid magic" in inc.evidence


# ---- widened after batch 83 (spent): OpenCL's loader that found no driver

_OPENCL_NO_PLATFORM = ("ggml_opencl: clGetPlatformIDs(NPLAT, platform_ids, &n_platforms) error -1001 at "
                       "/home/user/llama.cpp/ggml-opencl.cpp:784")


@pytest.mark.parametrize("line, kind", [
    # llama.cpp#1561, #1979: a CLBlast build on a machine with no OpenCL driver (ICD)
    (_OPENCL_NO_PLATFORM, "missing-library"),
    ("clGetPlatformIDs failed: CL_PLATFORM_NOT_FOUND_KHR", "missing-library"),
    # look-alikes: OpenCL refusing another call, or the same call with another error, is the runtime's
    ("ggml_opencl: clCreateContext(properties, 1, &device, NULL, NULL, &err) error -6 at ggml-opencl.cpp:905",
     "gpu-error"),
    ("ggml_opencl: clGetPlatformIDs(NPLAT, platform_ids, &n_platforms) error -30 at ggml-opencl.cpp:784",
     "gpu-error"),
])
def test_opencls_loader_finding_no_driver_is_a_missing_library(line, kind):
    inc = diagnose(line, exit_code=1)
    assert inc.kind == kind
    if kind == "missing-library":
        assert "clinfo" in inc.advice  # the OpenCL driver to install, not the engine's libraries


def test_opencls_missing_driver_outranks_the_crash_after_it():
    # order: what follows the refused platform query (an abort, a segfault) is its echo
    inc = diagnose(_OPENCL_NO_PLATFORM, "GGML_ASSERT(0) failed", "Segmentation fault (core dumped)",
                   signal="SIGSEGV")
    assert inc.kind == "missing-library" and "-1001" in inc.evidence


# ---- widened after batch 84 (spent): Ollama refusing an AMD card, LocalAI's relayed lines, a crash
# inside the GPU driver, Metal kernels an AMD Mac cannot compile, and a GGML-era model file

_OLLAMA_REFUSES_GFX1031 = (
    'time=2025-01-29T21:15:25.522-03:00 level=WARN source=amd_linux.go:378 msg="amdgpu is not supported '
    '(supported types:[gfx1030 gfx1100 gfx900 gfx906])" gpu_type=gfx1031 gpu=0 library=/opt/rocm/lib')


@pytest.mark.parametrize("line, kind", [
    (_OLLAMA_REFUSES_GFX1031, "gpu-unused"),
    # Ollama 0.1.3x's wording of the same refusal, which names the build as lacking the card's code
    ('time=2024-04-01T10:00:00.000Z level=WARN source=amd_linux.go:296 msg="amdgpu [0] gfx1031 is not supported '
     'by /opt/rocm/lib [gfx1030 gfx1100]"', "no-kernel-image"),
])
def test_ollama_refusing_an_amd_card_is_read_whatever_build_the_log_shows(line, kind):
    # ollama#8679: the log names no backend, and the card found and refused still goes unused
    tail = (line, 'time=2025-01-29T21:15:25.522-03:00 level=INFO source=gpu.go:392 msg="no compatible GPUs '
            'were discovered"')
    assert diagnose(*tail).kind == kind
    # look-alike: a stated CPU build never meant to use the card
    assert diagnose(*tail, backend="cpu").kind == "unknown"


def test_localais_relay_of_its_backends_line_is_read_as_the_engines_line():
    relayed = ("2023-09-27 07:04:22 12:04AM DBG GRPC(open-llama-3b-q4_0.bin-127.0.0.1:34155): stderr "
               "SIGILL: illegal instruction")
    assert strip_log_prefix(relayed) == "SIGILL: illegal instruction"
    # mudler/LocalAI#1108: the Go runtime's banner, relayed, is the CPU lacking AVX2
    assert diagnose(relayed, "PC=0x89fedc m=3 sigcode=2", "signal arrived during cgo execution").kind \
        == "illegal-instruction"
    # look-alikes: LocalAI's own words about the process are not relayed lines
    own = "12:04AM DBG GRPC Service for open-llama-3b-q4_0.bin will be running at: '127.0.0.1:34155'"
    assert strip_log_prefix(own) == own
    assert diagnose("12:04AM ERR server error SIGILL: illegal instruction").kind != "illegal-instruction"


_GDB_IN_AMDVLK = ("Thread 1 received signal SIGSEGV, Segmentation fault.", "0x00007ffdc5fe5232 in ?? ()",
                  r"   from C:\WINDOWS\System32\DriverStore\FileRepository\u0413647.inf_amd64\amdvlk64.dll",
                  "(gdb) bt",
                  r"#1  0x00007ffdfcdc83e3 in ?? () from C:\Program Files (x86)\FPS Monitor\tools\fpsmonvk64.dll")


@pytest.mark.parametrize("lines", [
    _GDB_IN_AMDVLK,  # llama.cpp#8828: an overlay's Vulkan layer crashing AMD's driver
    ("Program received signal SIGSEGV, Segmentation fault.",
     "0x00007fffe1a2b3c4 in ?? () from /lib/x86_64-linux-gnu/libcuda.so.1"),
    ("Faulting application name: llama-server.exe, version: 0.0.0.0, time stamp: 0x674fb3c7",
     "Faulting module name: nvcuda64.dll, version: 32.0.15.6094, time stamp: 0x66f5a1c4",
     "Exception code: 0xc0000005"),
])
def test_a_crash_report_inside_the_gpu_driver_is_a_gpu_error(lines):
    inc = diagnose(*lines, os="windows")
    assert inc.kind == "gpu-error" and inc.rule == "sole-evidence"
    assert "driver" in inc.title


@pytest.mark.parametrize("lines", [
    # the first frame in the C library or in the engine's own GPU backend: the engine's crash
    ("Thread 1 received signal SIGSEGV, Segmentation fault.",
     "0x00007ffff7a3c5f0 in ?? () from /lib/x86_64-linux-gnu/libc.so.6"),
    ("Thread 1 received signal SIGSEGV, Segmentation fault.",
     r"0x00007ffdc5fe5232 in ggml_vk_build_graph () from C:\llama\ggml-vulkan.dll"),
    # the driver only further down the backtrace, past a frame of the engine's
    ("Thread 1 received signal SIGSEGV, Segmentation fault.",
     "0x0000555555a1b2c3 in llama_decode_impl (lctx=...) at src/llama.cpp:17000",
     "#1  0x00007fffe1a2b3c4 in ?? () from /lib/x86_64-linux-gnu/libcuda.so.1"),
    ("Faulting module name: ggml-cuda.dll, version: 0.0.0.0, time stamp: 0x674fb3c7",),
])
def test_a_crash_report_outside_the_gpu_driver_is_not_read_as_one(lines):
    assert crash_reports.crashed_inside_a_gpu_driver(lines) is None
    assert diagnose(*lines, os="windows").kind != "gpu-error"


def test_memory_running_out_outranks_the_driver_crash_after_it():
    oom = "ggml_vulkan: Device memory allocation of size 2147483648 failed."
    lines = (oom, "ggml_vulkan: vk::Device::allocateMemory: ErrorOutOfDeviceMemory") + _GDB_IN_AMDVLK
    assert diagnose(*lines, os="windows", backend="vulkan").kind == "vulkan-oom"
    # order: the report is read like a figure, so the stated allocation failure outranks it, and
    # so does the memory-before-the-device-error rule; with both reversed the crash would win
    pieces = draft_scoped(lines, gather(lines, strip_log_prefix))
    assert decide(pieces, ORDER, reason_over_figure=False).kind == "vulkan-oom"
    assert decide(pieces, flipped("device-lost-is-the-allocation"), reason_over_figure=False).kind == "gpu-error"


_METAL_SC_FAILURE = ("ggml_metal_init: loaded kernel_mul_mm_f16_f32                         0x0 | th_max =    0 | "
                     "th_width =    0",
                     'ggml_metal_init: load pipeline error: Error Domain=CompilerError Code=2 "SC compilation '
                     'failure',
                     "There is a call to an undefined label\" UserInfo={NSLocalizedDescription=SC compilation failure",
                     "llama_new_context_with_model: ggml_metal_init() failed",
                     "llama_init_from_gpt_params: error: failed to create context with model './m.gguf'")


def test_a_metal_kernel_an_amd_macs_gpu_cannot_compile_is_no_kernel_image():
    # llama.cpp#1730, #3423: AMD GPUs of Intel Macs and 2023's simdgroup-matrix kernels
    inc = diagnose(*_METAL_SC_FAILURE, os="darwin")
    assert inc.kind == "no-kernel-image" and "SC compilation failure" in inc.evidence
    assert "Vulkan" in inc.advice
    # look-alike: a pipeline error on Apple's own GPU without the AMD compiler's words stays a sign
    apple = ('ggml_metal_init: load pipeline error: Error Domain=AGXMetalG13X Code=3 "Compiler encountered '
             'an internal error"', "llama_new_context_with_model: ggml_metal_init() failed")
    assert diagnose(*apple, os="darwin").kind != "no-kernel-image"
    # the line's own weaker reading (a Metal library that did not compile: an older macOS) loses
    # to the compiler's words on the same line
    assert [e.name for e in catalogue.matches(_METAL_SC_FAILURE[1])][:2] == [
        "metal.kernel-not-for-this-gpu", "metal.library-compile"]


_BINDING_ASSERT = ('  File "C:\\Python311\\Lib\\site-packages\\llama_cpp\\llama.py", line 323, in __init__',
                   "    assert self.model is not None", "AssertionError")


def test_a_ggml_era_model_file_that_failed_to_load_is_the_model():
    # llama2-webui#67: a ggmlv3 .bin under a GGUF-era llama-cpp-python, which only asserts
    named = ("Use default llama.cpp model path: ./models/llama-2-7b-chat.ggmlv3.q4_0.bin",) + _BINDING_ASSERT
    inc = diagnose(*named, os="windows")
    assert inc.kind == "bad-model" and "ggmlv3" in inc.evidence and "GGUF" in inc.advice
    assert diagnose("loading model from ./models/7B/ggml-model-q4_0.bin", *_BINDING_ASSERT).kind == "bad-model"
    # look-alikes: a GGUF file, or no file named, leaves the binding's assert a sign only
    gguf = ("Use default llama.cpp model path: ./models/llama-2-7b-chat.Q4_0.gguf",) + _BINDING_ASSERT
    assert diagnose(*gguf, os="windows").kind == "unknown"
    assert diagnose(*_BINDING_ASSERT, os="windows").kind == "unknown"
    # a GGML file beside a stated cause is that cause's
    oom = ("loading model from ./models/llama-2-7b.ggmlv3.q4_0.bin",
           "ggml_cuda_host_malloc: failed to allocate 4096.00 MiB of pinned memory: out of memory",
           "CUDA error 2 at ggml-cuda.cu:6000: out of memory") + _BINDING_ASSERT
    assert diagnose(*oom, backend="cuda").kind == "cuda-oom"


_LEMONADE_REFUSED = ("Failed to load model: Failed to load model 'user.Qwen3-30B-A3B-GGUF': 'llamacpp.backend' "
                     "must be one of: auto, vulkan, cpu")


@pytest.mark.parametrize("line", [
    _LEMONADE_REFUSED,  # lemonade#1614: a forced `rocm` on a machine Lemonade offers no ROCm on
    "[Server] Failed to load model: 'llamacpp.rocm_bin' path does not exist: /opt/llama/bin/llama-server",
    "Error: 'max_loaded_models' must be -1 (unlimited) or a positive integer",
    "Error: 'ctx_size' must be >= -1",
    "Error: 'port' must be between 1 and 65535",
])
def test_a_setting_lemonade_refuses_is_a_bad_argument(line):
    inc = diagnose(line, os="linux")
    assert inc.kind == "bad-argument" and inc.evidence == line
    assert "Lemonade" in inc.title and "config.json" in inc.advice


@pytest.mark.parametrize("line", [
    # look-alikes: Python's own quoted names, a sentence that only says `must be`
    "TypeError: 'NoneType' object is not subscriptable",
    "ValueError: 'Model' must be loaded before generating",
    "warning: the 'context' must be set in the UI",
])
def test_other_quoted_must_be_lines_are_not_lemonade_settings(line):
    assert "lemonade.config-value" not in [e.name for e in catalogue.matches(line)]


def test_a_refused_setting_outranks_the_load_failure_it_causes():
    # order: the refusal ends the start before any model is read; reversed, the load error wins
    lines = (_LEMONADE_REFUSED, "llama_model_load: error loading model: failed to open ./m.gguf: No such file")
    assert diagnose(*lines).kind == "bad-argument"
    pieces = draft_scoped(lines, gather(lines, strip_log_prefix))
    assert decide(pieces, ORDER, reason_over_figure=False).kind == "bad-argument"
    assert decide(pieces, flipped("argument-before-load"), reason_over_figure=False).kind == "bad-model"


_ROUTER_KILLED_A_LOADING_MODEL = (
    "[tauri_plugin_llamacpp::router] load:   sentence-transformer-mini",
    "[tauri_plugin_llamacpp::router] unload: stopping model instance name=sentence-transformer-mini",
    "[tauri_plugin_llamacpp::router] unload: model name=sentence-transformer-mini is still loading, force-killing")


@pytest.mark.parametrize("lines", [
    _ROUTER_KILLED_A_LOADING_MODEL,  # jan#8667: Jan unloaded its embedding model while it loaded
    # b11434's router evicting for --models-max, then killing a model that did not stop in time
    ("srv  ensure_model: model name=coder is not loaded, loading...",
     "srv    unload_lru: models_max limit reached, removing LRU name=fast",
     "srv    operator(): force-killing model instance name=fast after timeout"),
])
def test_llama_server_s_router_stopping_an_instance_is_a_stop(lines):
    inc = diagnose(*lines)
    assert inc.kind == "stopped" and inc.rule == "sole-evidence"
    assert "router" in inc.title and "--models-max" in inc.advice


def test_an_instance_the_router_only_saw_exit_is_not_a_stop():
    # the router reports a child that died by itself (jan#8244: an access violation) without stopping it
    lines = ("[tauri_plugin_llamacpp::router][INFO] [llamacpp-router] 0.42.562.871 I srv   operator (): "
             "instance name=sentence-transformer-mini exited with status -1073741819",)
    assert diagnose(*lines, os="windows").kind != "stopped"


def test_memory_that_ran_out_while_loading_outranks_the_router_s_stop_after_it():
    lines = ("ggml_backend_cuda_buffer_type_alloc_buffer: allocating 20480.00 MiB on device 0: cudaMalloc "
             "failed: out of memory",
             "llama_model_load: error loading model: unable to allocate CUDA0 buffer",
             "srv        unload: stopping model instance name=big",
             "srv        unload: model name=big is still loading, force-killing")
    assert diagnose(*lines, backend="cuda").kind == "cuda-oom"
    # order: the allocation is the cause and the stop an echo; reversed, the stop would win
    pieces = draft_scoped(lines, gather(lines, strip_log_prefix))
    assert decide(pieces, ORDER, reason_over_figure=False).kind == "gpu-oom"  # the backend names the GPU later
    assert decide(pieces, flipped("allocation-inside-load-error"), reason_over_figure=False).kind == "stopped"


@pytest.mark.parametrize("lines, os", [
    # one list of the GPU vendors' libraries for the kernel's segfault line and the crash reports:
    # the CUDA runtime's cuBLAS, which the kernel's reading had and the reports' lacked ...
    (("Faulting module name: cublasLt64_12.dll, version: 12.4.5.8, time stamp: 0x65f1a2b3",
      "Exception code: 0xc0000005"), "windows"),
    # ... and AMD's Vulkan driver by its Linux file name, which the reports had and the kernel's lacked
    (("llama-server[4242]: segfault at 10 ip 00007f3a sp 00007ffc error 4 in amdvlk64.so[7f3a0000+2000000]",),
     "linux"),
    (("llama-server[4242]: segfault at 0 ip 00007f3a sp 00007ffc error 4 in libcuda.so.550.54.14[7f3a+1000]",),
     "linux"),
])
def test_a_fault_inside_a_gpu_vendor_library_is_a_gpu_error_whichever_report_names_it(lines, os):
    assert diagnose(*lines, os=os).kind == "gpu-error"


def test_a_kernel_segfault_in_the_engine_s_own_gpu_backend_is_not_the_driver_s():
    line = "llama-server[4242]: segfault at 0 ip 00007f3a sp 00007ffc error 4 in libggml-cuda.so[7f3a+1000]"
    assert "gpu.runtime-segfault" not in [e.name for e in catalogue.matches(line)]


@pytest.mark.parametrize("line, code", [
    # llama-server's router mode reports its child's end; Jan 0.8 relays it (jan#8244)
    ("[llamacpp-router] 0.42.562.871 I srv   operator (): instance name=sentence-transformer-mini exited "
     "with status -1073741819", -1073741819),
    ("srv    operator(): instance name=coder exited with status 1", 1),
])
def test_the_router_s_report_of_its_instance_s_end_is_the_exit(line, code):
    assert exit_codes.exit_from_log((line,))[:2] == (code, None)
    # the child's words are not the router's: a status in prose is not read
    assert exit_codes.exit_from_log(("the instance exited with status 1 earlier",))[:2] == (None, None)


def test_a_stop_the_router_reports_with_the_instance_s_end_is_still_a_stop():
    # the router's own stop comes before the status it then reports; the status says nothing new
    lines = _ROUTER_KILLED_A_LOADING_MODEL + (
        "srv    operator(): instance name=sentence-transformer-mini exited with status 1",)
    assert diagnose(*lines, os="darwin").kind == "stopped"


# Widened from spent batches 87 and 88 (docs/diagnosis-batches.md, "Batches 87 and 88 are spent").

_FATTN_NO_KERNEL = "D:\\a\\llama.cpp\\llama.cpp\\ggml\\src\\ggml-cuda\\fattn.cu:579: fatal error"
_SERVING = ("I slot print_timing: id  1 | task 1301 | prompt processing, n_tokens =  12498, progress = 1.00",)


@pytest.mark.parametrize("line, candidates", [
    # llama.cpp#24324: no flash-attention kernel for a shape on the first decode with an MTP head
    (_FATTN_NO_KERNEL, ("assertion-failed", "drafter-failure")),
    ("CUDA error: an illegal memory access was encountered", ("gpu-error", "drafter-failure")),
])
def test_an_abort_or_gpu_error_while_serving_with_a_drafter_stays_open(line, candidates):
    lines = _SERVING + (line,)
    inc = classify_exit(report_from_log(lines, has_drafter=True, phase="ready"))
    assert inc.kind == "unknown" and set(inc.candidates) == set(candidates)
    assert inc.recoverable_by == "drop-drafter"  # the start without the drafter tells
    # negative: without a drafter the same line is named
    assert classify_exit(report_from_log(lines, has_drafter=False, phase="ready")).kind == candidates[0]
    # negative: a crash with no telling line while serving is not blamed on the drafter
    quiet = classify_exit(report_from_log(_SERVING, signal="SIGSEGV", has_drafter=True, phase="ready"))
    assert quiet.kind != "drafter-failure"


@pytest.mark.parametrize("line", [
    "CUDA error: a PTX JIT compilation failed",  # LocalAI#8370: a V100 the CUDA 12 image has no sm_70 code for
    "CUDA error 218 at ggml-cuda.cu:1200: cudaErrorInvalidPtx",
    "ggml_cuda_compute_forward: MUL_MAT failed: CUDA_ERROR_INVALID_PTX",
])
def test_a_failed_ptx_jit_is_a_build_without_this_gpus_code(line):
    inc = diagnose(line, "  current device: 0, in function ggml_cuda_op_mul_mat at ggml-cuda.cu:1200",
                   backend="cuda")
    assert inc.kind == "no-kernel-image"
    # negative: a driver too old for the PTX says so apart, and stays the driver's
    old = diagnose("CUDA error: the provided PTX was compiled with an unsupported toolchain", backend="cuda")
    assert old.kind == "cuda-driver-too-old"


def test_a_failed_ptx_jit_outranks_the_abort_after_it():
    # order: ggml's CUDA_CHECK prints the error, then aborts; reversed, the abort wins
    lines = ("CUDA error: a PTX JIT compilation failed", "GGML_ASSERT(ok) failed")
    assert verdict(lines).kind == "no-kernel-image"
    assert verdict(lines, flipped(verdict(lines).rule)).kind == "assertion-failed"


@pytest.mark.parametrize("line", [
    # java-llama.cpp#37: no Linux-Android/aarch64 build of libjllama in the jar
    "java.lang.UnsatisfiedLinkError: No native library found for os.name=Linux-Android, os.arch=aarch64, "
    "paths=[/de/kherud/llama/Linux-Android/aarch64:/system/lib64]",
    "Exception in thread \"main\" java.lang.UnsatisfiedLinkError: no jllama in java.library.path: /usr/lib",
])
def test_a_java_binding_without_its_native_library_is_a_missing_library(line):
    inc = diagnose(line)
    assert inc.kind == "missing-library" and "Java binding" in inc.title


@pytest.mark.parametrize("line", [
    # look-alikes: the library was found and loaded, and a symbol in it is another build's
    "java.lang.UnsatisfiedLinkError: 'long de.kherud.llama.LlamaModel.loadModel(java.lang.String)'",
    "java.lang.UnsatisfiedLinkError: /tmp/libjllama.so: undefined symbol: llama_backend_free",
])
def test_other_unsatisfied_links_are_not_a_missing_java_library(line):
    assert "jvm.native-library-missing" not in [e.name for e in catalogue.matches(line)]


@pytest.mark.parametrize("line", [
    # lmstudio-bug-tracker#1903 (0.4) and #883 (0.3): a gfx1150 absent from the engine's targets
    '"message": "No ROCm GPUs detected of supported targets: gfx1030, gfx1100, gfx1101, gfx1102, gfx1151"',
    '"message": "No compatible ROCm GPUs found on device"',
])
def test_lm_studios_rocm_engine_without_this_gpus_target_is_no_kernel_image(line):
    inc = diagnose('"status": "No supported GPUs",', line)
    assert inc.kind == "no-kernel-image" and "gfx target" in inc.title


def test_lm_studios_other_survey_lines_name_nothing():
    # negative: a survey of an engine that is compatible names no kind
    lines = ('"name": "llama.cpp-win-x86_64-amd-rocm-avx2",', '"status": "ok",', '"message": ""')
    assert diagnose(*lines).kind == "unknown"


# Widened from spent batches 89 and 90 (docs/diagnosis-batches.md, "Batches 89 and 90 are spent").

_RAMALAMA_OPTION = ("Error: crun: executable file `-v/home/u/.local/share/ramalama:/var/lib/ramalama` not found in "
                    "$PATH: No such file or directory: OCI runtime attempted to invoke a command that was not found")


@pytest.mark.parametrize("line", [
    _RAMALAMA_OPTION,  # containers/ramalama#509: options after the image name
    'Error: runc: exec: "--device=/dev/dri": executable file not found in $PATH',
])
def test_an_option_where_the_containers_command_goes_is_a_bad_argument(line):
    inc = diagnose(line)
    assert inc.kind == "bad-argument" and "options came after the image name" in inc.title
    # order: the option reading outranks the program-missing one the same line also matches
    names = [e.name for e in catalogue.matches(line)]
    assert names[0] == "container.option-as-command" and "exec.program-missing" in names


def test_a_container_command_that_is_a_program_is_still_a_missing_program():
    # negative: crun naming a real program's name is the program missing from the image
    line = "Error: crun: executable file `llama-server` not found in $PATH: No such file or directory"
    assert diagnose(line).kind == "missing-library"
    assert "container.option-as-command" not in [e.name for e in catalogue.matches(line)]


def test_a_host_library_the_container_mounts_that_is_gone_is_a_missing_library():
    # containers/ramalama#899: a CDI spec written for the driver before an upgrade
    inc = diagnose("Error: crun: cannot stat `/usr/lib64/libEGL_nvidia.so.550.135`: No such file or directory: "
                   "OCI runtime attempted to invoke a command that was not found")
    assert inc.kind == "missing-library" and "nvidia-ctk cdi generate" in inc.advice
    # negative: a device node or folder that is not there is no library
    assert diagnose("Error: crun: cannot stat `/dev/dri/renderD128`: No such file or directory").kind != \
        "missing-library"


def test_a_helper_program_windows_cannot_find_is_a_missing_program():
    # docker/desktop-feedback#613: Docker Model Runner's GPU probe is not in its folder
    line = ("llama.cpp  Error  failed to install llama.cpp: failed to check CUDA 11 capability: fork/exec "
            "C:\\Users\\u\\.docker\\bin\\inference\\com.docker.nv-gpu-info.exe: "
            "The system cannot find the file specified.")
    assert diagnose(line, os="windows").kind == "missing-library"
    # negative: the program is there and Windows refused to run it
    denied = line.replace("The system cannot find the file specified.", "Access is denied.")
    assert diagnose(denied, os="windows").kind != "missing-library"


_LLAMAFILE_CUT = ("$ ./llava-v1.5-7b-q4-server.llamafile -ngl 35",
                  "building ggml-cuda with nvcc -arch=native...",
                  "nvcc fatal   : Value 'native' is not defined for option 'gpu-architecture'",
                  "/usr/bin/nvcc: returned nonzero exit status",
                  "building ggml-cuda with nvcc -arch=compute_61...",
                  "/usr/include/c++/11/bits/std_function.h:435:145: error: parameter packs not expanded with '...':")


def test_llamafiles_gpu_build_whose_compiler_refused_it_is_the_gpu_unused():
    # llamafile#121: the paste ends at the compiler's error, before nvcc's status line
    inc = classify_exit(report_from_log(_LLAMAFILE_CUT))
    assert inc.kind == "gpu-unused" and "std_function.h" in inc.evidence
    # nvcc's own refusal of the last attempt reads the same
    fatal = _LLAMAFILE_CUT[:4] + ("building ggml-cuda with nvcc -arch=compute_86...",
                                  "nvcc fatal   : Value 'compute_86' is not defined for option 'gpu-architecture'")
    assert classify_exit(report_from_log(fatal)).kind == "gpu-unused"
    # negative: the module built and linked after the error
    linked = _LLAMAFILE_CUT + ("link_cuda_dso: GPU support loaded",)
    assert classify_exit(report_from_log(linked)).kind != "gpu-unused"
    # order: a new attempt after the refused one, with nothing after it, is not a failure
    retried = _LLAMAFILE_CUT + ("building ggml-cuda with nvcc -arch=compute_52...",)
    assert classify_exit(report_from_log(retried)).kind != "gpu-unused"
    # negative: a compiler-shaped error line with no build attempt before it is not llamafile's
    assert silent_fallbacks.gpu_unused_from_log(
        ("src/x.cpp:10:3: error: expected ';'",), None, plan_wanted_gpu=False) is None


def test_the_backtrace_debuggers_own_complaint_is_not_the_engines_failure():
    # koboldcpp#888: ggml's abort runs gdb, which loads the PyInstaller bundle's older libstdc++
    lines = ("ggml_vulkan: Error: Missing op: FLASH_ATTN_EXT",
             "GGML_ASSERT: ggml-vulkan.cpp:5615: false",
             "gdb: /tmp/_MEI1NGty2/libstdc++.so.6: version `CXXABI_1.3.15' not found (required by "
             "/usr/lib/libicui18n.so.75)")
    assert diagnose(*lines, signal="SIGABRT").kind == "assertion-failed"
    # negative: the same words from the engine's own load are the bundled runtime shadowing the system's
    engine = lines[2].removeprefix("gdb: ")
    assert diagnose(engine).kind == "stale-library"


_TYPE_ASSERT = "GGML_ASSERT: ggml/src/ggml.c:20602: 0 <= info->type && info->type < GGML_TYPE_COUNT"


def test_the_readers_assert_on_an_unknown_tensor_type_is_a_bad_model():
    # microsoft/BitNet#55: an i2_s model under a plain llama.cpp of mid 2024
    assert diagnose("main: build = 3247 (911e35bb)", _TYPE_ASSERT, signal="SIGABRT").kind == "bad-model"
    # order: the file's entry outranks the assert it is written in
    names = [e.name for e in catalogue.matches(_TYPE_ASSERT)]
    assert names[0] == "gguf.tensor-type-unknown" and "abort.assert" in names
    # negative: another check in the same file is the engine's own
    assert diagnose("GGML_ASSERT: ggml/src/ggml.c:5012: ggml_nelements(a) == ne0*ne1").kind == "assertion-failed"


_SHARED_OBJECT = "CUDA error: shared object initialization failed"


@pytest.mark.parametrize("lines", [
    # openclaw-windows-node#1242: an OOM in disguise (EAGER loading turns it into cudaMalloc's)
    ("common_init_: warming up the model with an empty run - please wait ...", _SHARED_OBJECT,
     "D:\\a\\llama.cpp\\llama.cpp\\ggml\\src\\ggml-cuda\\ggml-cuda.cu:107: CUDA error"),
    # llama.cpp#26481: ggml_cuda_error's own line first, the name after it
    ("llm-engine\\llama.cpp\\ggml\\src\\ggml-cuda\\ggml-cuda.cu:106: CUDA error", _SHARED_OBJECT,
     "  current device: 0, in function launch_fattn at fattn-common.cuh:1428"),
])
def test_cuda_kernels_that_would_not_load_are_left_open_with_the_gpus_memory(lines):
    inc = diagnose(*lines, backend="cuda")
    assert inc.kind == "unknown" and set(inc.candidates) == {"gpu-error", "cuda-oom"}
    assert "CUDA_MODULE_LOADING=EAGER" in inc.advice and "shared object initialization" in inc.title


def test_other_cuda_errors_and_hips_wording_are_not_left_open_this_way():
    # negative: a named fault on the device stays the GPU's error
    assert diagnose("CUDA error: an illegal memory access was encountered", backend="cuda").kind == "gpu-error"
    # negative: HIP's own wording is the build without this gfx (catalogue hip.no-binary-for-gpu)
    assert diagnose("ROCm error: shared object initialization failed", backend="rocm").kind == "no-kernel-image"


def test_stable_diffusions_unknown_family_is_left_open_with_the_wrong_flag():
    # stable-diffusion.cpp#884: a diffusion-only file passed with --model (answered in #655)
    line = "[ERROR] stable-diffusion.cpp:273  - get sd version from file failed: <FILE_PATH> new_sd_ctx_t failed"
    inc = diagnose(line)
    assert inc.kind == "unknown" and set(inc.candidates) == {"bad-model", "bad-argument"}
    assert "--diffusion-model" in inc.advice
    # negative: the loader said first that the file is in no format it reads: the file's fault
    unreadable = "[WARN ] model.cpp:379  - unknown format D:\\models\\img\\z_img_turbo-Q4_k.gguf"
    assert diagnose(unreadable, line).kind == "bad-model"


def test_a_missing_program_is_said_to_be_a_program_not_a_library():
    inc = diagnose("Error: spawn /opt/jan/llama-server ENOENT")
    assert inc.kind == "missing-library" and "program the wrapper starts" in inc.title


def test_no_nvidia_driver_at_all_then_the_cpu_is_the_gpu_unused_not_an_old_driver():
    # ollama#719: Ollama's Docker image on a Mac; CUDA says 35 where no libcuda loads
    lines = ("2023/10/06 20:37:41 routes.go:592: Warning: GPU support may not enabled, check you have "
             "installed install GPU drivers: nvidia-smi command failed",
             "CUDA error 35 at ggml-cuda.cu:4883: CUDA driver version is insufficient for CUDA runtime version",
             "2023/10/06 20:37:57 llama.go:323: llama runner exited with error: exit status 1",
             '{"level":"WARNING","function":"server_params_parse","message":"Not compiled with GPU offload '
             'support, --n-gpu-layers option will be ignored."}')
    inc = diagnose(*lines)
    assert inc.kind == "gpu-unused" and inc.rule == "gpu-left-for-want-of-a-driver" and "--gpus" in inc.advice
    # negative: with a driver there, error 35 is the driver too old, CPU runner or not
    assert diagnose(*lines[1:]).kind == "cuda-driver-too-old"
    # negative: no driver and no run after it: nothing went on on the CPU, the start failed
    assert diagnose(*lines[:3]).kind == "cuda-driver-too-old"


_OLLAMA_0120 = ("2024/01/19 21:25:41 shim_ext_server.go:142: Dynamic LLM variants [cuda]",
                "2024/01/19 21:25:41 gpu.go:248: Discovered GPU libraries: []",
                "**2024/01/19 21:25:41 routes.go:953: no GPU detected**")


def test_ollama_finding_no_gpu_for_the_gpu_runners_it_carries_is_the_gpu_unused():
    # ollama#1979: a Jetson whose NVML library 0.1.20 did not find
    inc = diagnose(*_OLLAMA_0120)
    assert inc.kind == "gpu-unused" and "no GPU detected" in inc.evidence
    later = ("time=2024-03-09T14:52:46Z level=INFO source=payload_common.go:146 msg=\"Dynamic LLM libraries "
             "[cpu_avx rocm_v60000 cpu_avx2 cuda_v11 cpu]\"", "time=2024-03-09T14:52:47Z level=INFO "
             "source=routes.go:1044 msg=\"no GPU detected\"")
    assert diagnose(*later).kind == "gpu-unused"
    # negative: a build that carries only CPU runners found none, as it should
    cpu_only = ("2024/01/19 21:25:41 shim_ext_server.go:142: Dynamic LLM variants [cpu cpu_avx2]",
                _OLLAMA_0120[2])
    assert diagnose(*cpu_only).kind == "unknown"
    # negative: GPU runners and no `no GPU detected`: discovery found one
    assert diagnose(*_OLLAMA_0120[:2]).kind == "unknown"


def test_a_short_line_ending_in_a_blank_is_read_joined_with_the_next():
    # llm-gpt4all#6: a window's soft wrap kept as a break, at 63 columns
    lines = ("OSError: /lib64/libstdc++.so.6: version `GLIBCXX_3.4.26' not ",
             "found (required by ~/miniconda3/envs/play/lib/python3.11/site-packages/gpt4all/libllmodel.so)")
    assert diagnose(*lines).kind == "system-too-old"
    # negative: the same short line without its blank is a line of its own
    assert diagnose(lines[0].rstrip(), lines[1]).kind == "unknown"
    # negative: a next line that begins as a log line of its own is not a tail
    own = (lines[0], "llama_model_loader: found (required by nothing)")
    assert diagnose(*own).kind == "unknown"
