"""Single cases from real users' logs (tests/data/wild) that the reference never showed.

Each issue-12 example is here on its own, with no exit given unless the user gave one, so
the evidence has to be read from where it is: the engine's line, a wrapper's exit line, a
systemd or kernel OOM line. The priority rules between them are tested at the end.
"""

from __future__ import annotations

from stoker.diagnosis.classify import classify_exit, exit_from_log, report_from_log


def diagnose(*lines, exit_code=None, signal=None, os="linux", phase=None):
    return classify_exit(report_from_log(lines, exit_code=exit_code, signal=signal, os=os, phase=phase))


# ------------------------------------------------------------------ the examples

def test_a_stale_shared_library_shadowing_the_build_is_named():
    inc = diagnose("./llama-server: symbol lookup error: ./llama-server: undefined symbol: mtmd_get_cap_from_file")
    assert inc.kind == "stale-library"
    assert "mtmd_get_cap_from_file" in inc.evidence
    assert "another llama.cpp build" in inc.title and "ldd" in inc.advice
    assert inc.counts_as_strike and inc.recoverable_by == "next-build"


def test_a_systemd_oom_kill_after_a_normal_last_engine_line_is_host_oom():
    inc = diagnose(
        "srv   prompt_save:  - saving prompt with length 28960, total state size = 3462.850 MiB",
        "A process of this unit has been killed by the OOM killer.",
        "Control process exited, code=exited, status=1/FAILURE",
        "Failed with result 'oom-kill'.",
        phase="ready")
    assert inc.kind == "host-oom"
    assert "OOM killer" in inc.evidence
    assert inc.recoverable_by == "smaller-plan" and not inc.counts_as_strike


def test_an_old_engines_unknown_argument_is_a_bad_argument():
    inc = diagnose("error: unknown argument: -hf")
    assert inc.kind == "bad-argument" and inc.evidence == "error: unknown argument: -hf"
    assert "older build" in inc.title
    assert not inc.counts_as_strike


def test_ptx_from_a_newer_toolkit_is_a_driver_too_old():
    inc = diagnose("CUDA error: the provided PTX was compiled with an unsupported toolchain.",
                   "  current device: 0, in function ggml_cuda_op_flatten at ggml-cuda.cu:10011",
                   'GGML_ASSERT: ggml-cuda.cu:255: !"CUDA error"')
    assert inc.kind == "cuda-driver-too-old"
    assert "PTX" in inc.evidence


def test_rocm_out_of_memory_in_cuda_words_is_rocm_oom():
    inc = diagnose("ggml_cuda_init: found 1 ROCm devices:",
                   "  Device 0: AMD Radeon(TM) Graphics, gfx1151 (0x1151), VMM: no, Wave Size: 32",
                   "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 98988.40 MiB on device 0: "
                   "cudaMalloc failed: out of memory", os="windows")
    assert inc.kind == "rocm-oom"
    assert "AMD (ROCm)" in inc.title


def test_hipmalloc_under_a_cuda_error_is_rocm_oom():
    inc = diagnose("CUDA error: out of memory",
                   "  current device: 0, in function alloc at ggml-cuda.cu:233",
                   "  hipMalloc((void **) &ptr, look_ahead_size)",
                   'GGML_ASSERT: ggml-cuda.cu:60: !"CUDA error"')
    assert inc.kind == "rocm-oom"


def test_a_cuda_oom_without_rocm_signs_stays_cuda():
    inc = diagnose("ggml_cuda_init: found 1 CUDA devices:",
                   "E ggml_backend_cuda_buffer_type_alloc_buffer: allocating 4480.00 MiB on device 3: "
                   "cudaMalloc failed: out of memory")
    assert inc.kind == "cuda-oom"


def test_drafter_failures_in_other_words_than_b11434s():
    vocab = diagnose("draft model vocab type must match target model to use speculation "
                     "(speculative implementation 'draft-simple')")
    assert vocab.kind == "drafter-failure"
    old = diagnose("main: error: draft model vocab must match target model to use speculation but "
                   "target vocab size 152064 does not match draft vocab size 32002", exit_code=1)
    assert old.kind == "drafter-failure"
    mtp = diagnose("E common_speculative_init_result: failed to create MTP context",
                   "E srv  llama_server: exiting due to model loading error", exit_code=1)
    assert mtp.kind == "drafter-failure" and mtp.recoverable_by == "drop-drafter"


# ----------------------------------------------------- evidence written by the wrappers

def test_ollamas_exit_status_inside_its_message_is_read():
    inc = diagnose("Error: llama runner process has terminated: exit status 0xc0000135")
    assert inc.kind == "missing-library"
    assert "0xC0000135" in inc.exit_description
    assert "Visual C++" in inc.advice


def test_ollamas_entry_point_not_found_is_a_stale_library():
    inc = diagnose("Error: llama runner process has terminated: exit status 0xc0000139")
    assert inc.kind == "stale-library" and "PATH" in inc.advice


def test_a_dll_of_the_wrong_architecture_is_a_stale_library():
    inc = diagnose(exit_code=0xC000007B, os="windows")
    assert inc.kind == "stale-library" and "STATUS_INVALID_IMAGE_FORMAT" in inc.exit_description


def test_ollamas_signal_killed_is_a_host_oom_with_a_hedged_title():
    inc = diagnose('Error: Post "http://127.0.0.1:11434/api/chat": EOF',
                   "Error: llama runner process has terminated: signal: killed")
    assert inc.kind == "host-oom"
    assert "most likely" in inc.title  # a bare SIGKILL is evidence, not proof


def test_docker_exit_137_is_a_kill():
    inc = diagnose("scalellm exited with code 137")
    assert inc.kind == "host-oom" and "SIGKILL" in inc.exit_description
    assert diagnose(exit_code=137).kind == "host-oom"


def test_lm_studios_float_rounded_exit_code_is_a_fast_fail():
    inc = diagnose("The model has crashed without additional information. (Exit code: 18446744072635812000)")
    assert inc.kind == "unknown" and "0xC0000409" in inc.exit_description


def test_lm_studios_generic_error_loading_model_is_not_a_bad_model():
    inc = diagnose("Error loading model.", "(Exit code: 18446744073709515000). Unknown error.", os="windows")
    assert inc.kind == "unknown"


def test_llama_swap_terminating_the_engine_is_a_stop_not_a_crash():
    inc = diagnose("[DEBUG] <qwen> cmd.Wait() returned error: signal: terminated")
    assert inc.kind == "stopped" and not inc.counts_as_strike
    assert "something other than Stoker" in inc.title


def test_a_wrappers_health_check_timeout_is_a_startup_timeout():
    assert diagnose("unable to start process: health check failed after 15s").kind == "startup-timeout"
    assert diagnose("Error: timed out waiting for llama runner to start:").kind == "startup-timeout"


def test_a_shells_illegal_instruction_line_is_the_exit():
    inc = diagnose("llama.cpp: loading model from models/ggml-model-q4_0.bin", "Illegal instruction (core dumped)")
    assert inc.kind == "illegal-instruction" and "SIGILL" in inc.exit_description


def test_loader_messages():
    glibc = diagnose("./llm_demo: /lib/aarch64-linux-gnu/libc.so.6: version `GLIBC_2.34' not found "
                     "(required by ./llm_demo)")
    assert glibc.kind == "system-too-old" and "stoker setup" in glibc.advice
    dyld = diagnose("dyld[90496]: Library not loaded: @rpath/libllama.dylib",
                    "  Referenced from: <653E6B29> /Users/x/llama-cli", os="darwin")
    assert dyld.kind == "missing-library"
    dll = diagnose("FileNotFoundError: Could not find module 'D:\\x\\llama_cpp\\lib\\ggml.dll' "
                   "(or one of its dependencies).", os="windows")
    assert dll.kind == "missing-library"


def test_an_ambiguous_gpu_oom_says_so_in_the_title():
    inc = diagnose("ggml-cuda.cu:5048: out of memory")
    assert inc.kind == "cuda-oom" and "does not say which" in inc.title


def test_exit_from_log_takes_the_last_exit_line():
    assert exit_from_log(["exit status 2", "Error: llama runner process has terminated: exit status 0xc0000409"]) \
        == (0xC0000409, None, "Error: llama runner process has terminated: exit status 0xc0000409")
    assert exit_from_log(["Main process exited, code=killed, status=9/KILL"])[1] == "SIGKILL"
    assert exit_from_log(["nothing here"]) == (None, None, None)


def test_a_given_exit_beats_one_written_in_the_log():
    inc = diagnose("Error: llama runner process has terminated: exit status 0xc0000135", exit_code=1)
    assert inc.exit_description.startswith("exit code 1")


# ----------------------------------------------------------------------- priority rules

def test_priority_a_build_that_cannot_run_beats_its_echo():
    inc = diagnose("CUDA error: no kernel image is available for execution on the device",
                   'GGML_ASSERT: ggml-cuda.cu:75: !"CUDA error"', "Aborted (core dumped)")
    assert inc.kind == "no-kernel-image"


def test_priority_a_device_oom_beats_the_oom_killer_and_the_oom_killer_beats_a_gpu_error():
    assert diagnose("ggml_vulkan: vk::Device::allocateMemory: ErrorOutOfDeviceMemory",
                    "Failed with result 'oom-kill'.").kind == "vulkan-oom"
    assert diagnose("CUDA error: an illegal memory access was encountered",
                    "Failed with result 'oom-kill'.").kind == "host-oom"


def test_priority_a_gpu_error_beats_the_assertion_it_triggers():
    inc = diagnose("CUDA error: an illegal memory access was encountered",
                   'GGML_ASSERT: ggml-cuda.cu:244: !"CUDA error"')
    assert inc.kind == "gpu-error"
    assert diagnose("terminate called after throwing an instance of 'vk::DeviceLostError'").kind == "gpu-error"


def test_priority_a_telling_line_beats_the_exit_code():
    inc = diagnose("llama_model_load: error loading model: error loading model architecture: "
                   "unknown model architecture: 'phi3'",
                   'msg="error loading llama server" error="llama runner process no longer running: 3221226505 "')
    assert inc.kind == "bad-model" and "0xC0000409" in inc.exit_description


def test_priority_c_library_assertion_wording_is_an_assertion():
    assert diagnose("Assertion `status == LLAMA_MEMORY_STATUS_SUCCESS' failed.").kind == "assertion-failed"


def test_a_context_that_could_not_be_created_without_a_reason_is_read_as_memory_and_says_so():
    line = ('msg="error loading llama server" error="llama runner process has terminated: '
            "error:failed to create context with model '/m.gguf'\"")
    vk = classify_exit(report_from_log([line], backend="vulkan"))
    assert vk.kind == "vulkan-oom" and "most likely" in vk.title
    assert diagnose(line).kind == "host-oom"
    # A stated reason wins over the reading.
    assert diagnose("E llama_init_from_model: quantized V cache requires flash_attn to be enabled",
                    "common_init_from_params: failed to create context with model '/m.gguf'").kind == "bad-argument"


def test_a_build_without_gpu_offload_asked_for_layers_is_gpu_unused():
    inc = diagnose('{"level":"WARNING","function":"server_params_parse","message":"Not compiled with GPU '
                   'offload support, --n-gpu-layers option will be ignored."}')
    assert inc.kind == "gpu-unused"


def test_a_ttl_unload_then_sigkill_is_a_stop():
    inc = diagnose("llama-swap: <m> Unloading model, TTL of 300s reached",
                   "llama-swap: <m> ExitError >> signal: killed, exit code: -1")
    assert inc.kind == "stopped" and not inc.counts_as_strike


# ------------------------------------------------- wordings read from the wrappers' and engine's sources

def test_start_timeouts_in_other_wrappers_words_while_starting():
    # llama-swap's current wording, systemd's start timeout, a Kubernetes startup probe, a
    # launcher's own sentence: each while the engine had not yet said it was listening.
    for line in ("unable to start process: health check timed out after 120s",
                 "llama.service: start operation timed out. Terminating.",
                 "Warning  Unhealthy  kubelet  Startup probe failed: Get \"http://10.0.0.5:8080/health\"",
                 "Error: Timed out waiting for llama-server to become healthy after 60s"):
        inc = diagnose("srv    load_model: loading model '/m.gguf'", line)
        assert inc.kind == "startup-timeout", (line, inc)


def test_a_timeout_after_the_engine_was_ready_or_a_timeout_flag_is_not_a_start_timeout():
    ready = diagnose("main: server is listening on http://127.0.0.1:8080 - starting the main loop",
                     "httpx.ReadTimeout: timed out waiting for the model to start streaming", signal="SIGSEGV")
    assert ready.kind != "startup-timeout"
    flag = diagnose("main: launching ./llama-server --timeout 600 --model /m.gguf (start)", exit_code=1)
    assert flag.kind != "startup-timeout"


def test_a_wrapper_stopping_a_still_starting_engine_says_it_is_a_reading():
    inc = diagnose("cmdStopUpstreamProcess() initiating graceful stop of upstream process")
    assert inc.kind == "startup-timeout"
    assert "most likely" in inc.title and "swap" in inc.title


def test_an_allocation_on_an_unnamed_device_is_memory_on_the_builds_device():
    # llama-model.cpp wraps the failure in `error loading model:`; it is memory, not the file.
    # The weights' buffer with no type named: on a build with a GPU of its own the offload
    # splits the weights, so GPU or host memory is left open (both candidates, smaller plan).
    line = "llama_model_load: error loading model: unable to allocate backend buffer"
    for backend in ("rocm", "vulkan"):
        inc = classify_exit(report_from_log([line], backend=backend))
        assert inc.kind == "unknown" and inc.candidates == (f"{backend}-oom", "host-oom")
    assert classify_exit(report_from_log([line], backend="metal")).kind == "metal-oom"
    kv = "llama_kv_cache_init: failed to allocate buffer for kv cache"
    assert classify_exit(report_from_log([kv], backend="vulkan")).kind == "vulkan-oom"
    unnamed = classify_exit(report_from_log([line]))
    assert unnamed.kind == "host-oom" and "does not say on which device" in unnamed.title
    # b11434 names the buffer type, and that decides before the backend does
    named = "llama_model_load: error loading model: unable to allocate CUDA_Host buffer"
    assert classify_exit(report_from_log([named], backend="cuda")).kind == "host-oom"


def test_rocblas_without_kernels_for_this_gpu_is_no_kernel_image():
    inc = diagnose("rocBLAS error: Cannot read /opt/rocm/lib/rocblas/library/TensileLibrary.dat: "
                   "Illegal seek for GPU arch : gfx1103", signal="SIGABRT")
    assert inc.kind == "no-kernel-image"


def test_windows_and_macos_loader_wordings():
    assert diagnose("OSError: [WinError 193] %1 is not a valid Win32 application", os="windows").kind \
        == "stale-library"
    assert diagnose("FileNotFoundError: [WinError 126] The specified module could not be found",
                    os="windows").kind == "missing-library"
    assert diagnose("dyld[812]: Symbol not found: __ZNSt3__117bad_function_callD1Ev",
                    "  Expected in:     /usr/lib/libc++.1.dylib", os="darwin").kind == "system-too-old"
    assert diagnose("error: Only one usage of each socket address (protocol/network address/port) "
                    "is normally permitted.", os="windows").kind == "port-in-use"
    assert diagnose("RuntimeError: The paging file is too small for this operation to complete. "
                    "(os error 1455)", os="windows").kind == "host-oom"


def test_priority_an_unnamed_allocation_beats_the_bad_model_wrapper_and_the_abort_after_it():
    inc = classify_exit(report_from_log([
        "llama_model_load: error loading model: unable to allocate backend buffer",
        "llama_load_model_from_file: failed to load model",
        "terminate called after throwing an instance of 'std::runtime_error'"], signal="SIGABRT",
        backend="cuda"))
    # memory, not the file or the abort; which memory the nameless line leaves open
    assert inc.kind == "unknown" and inc.candidates == ("cuda-oom", "host-oom")
    assert inc.recoverable_by == "smaller-plan"


def test_batch_six_wordings_an_old_metal_buffer_limit_a_spaced_rocblas_path_and_windows_126():
    assert diagnose("ggml_metal_add_buffer: buffer 'data' size 18300780544 is larger than buffer "
                    "maximum of 17179869184", os="darwin").kind == "metal-oom"
    assert diagnose("rocBLAS error: Cannot read C:\\Program Files\\AMD\\ROCm\\5.7\\bin\\rocblas\\library\\"
                    "/TensileLibrary.dat: No such file or directory for GPU arch : gfx1032",
                    os="windows").kind == "no-kernel-image"
    assert diagnose("E:\\llama-b7966-bin-win-cpu-x64\\ggml.dll: error loading library: The specified "
                    "module could not be found.", os="windows").kind == "missing-library"
