"""Wordings of a build that cannot run here (a driver older than its CUDA, no code for this GPU,
an instruction this CPU lacks, two OpenMP runtimes or a DLL that failed to start) and of a lost RPC
worker and a speculative drafter that broke the launch.

Pure data: no files, no clock, nothing run.
"""

from __future__ import annotations

import re

from stoker.diagnosis.wordings.entry import B11434 as _B
from stoker.diagnosis.wordings.entry import Strength, Wordings

_D, _S, _W = Strength.DECISIVE, Strength.STRONG, Strength.WEAK
_wordings = Wordings()
_e = _wordings.add

# ---------------------------------------------------------------------------- build faults

_e("cuda.driver-insufficient", "cuda-driver-too-old", 90, _D,
   "cudaErrorInsufficientDriver (35) via ggml-cuda CUDA_CHECK, ggml_cuda_init; all releases",
   "the NVIDIA driver is older than the CUDA runtime the build was made with",
   r"driver version is insufficient for (CUDA )?runtime version", r"cudaErrorInsufficientDriver",
   r"CUDA_ERROR_INSUFFICIENT_DRIVER", r"CUDA (error|driver)\D{0,12}\b35\b.{0,40}insufficient",
   r"\bcode=35\(cudaErrorInsufficientDriver\)")
_e("cuda.ptx-toolchain", "cuda-driver-too-old", 90, _D,
   "cudaErrorUnsupportedPtxVersion (222); ggml-cuda CUDA_CHECK",
   "the build's PTX needs a newer driver JIT than installed",
   r"provided PTX was compiled with an unsupported toolchain", r"cudaErrorUnsupportedPtxVersion",
   r"CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
   # cudaErrorCallRequiresNewerDriver (36): a runtime call the installed driver does not have
   r"API call is not supported in the installed CUDA driver", r"cudaErrorCallRequiresNewerDriver")
# 803 (cudaErrorSystemDriverMismatch, `system has unsupported display driver / cuda driver
# combination`) is NOT here: it means the kernel module and libcuda disagree (an update
# without a reboot), and ggml_cuda_init then runs on the CPU: gpu-unused, read from the log.
_e("cuda.forward-compat", "cuda-driver-too-old", 90, _D,
   "cudaErrorCompatNotSupportedOnDevice (804)",
   "the driver is older than the CUDA toolkit and forward compatibility is unavailable",
   r"forward compatibility was attempted on non supported HW", r"cudaErrorCompatNotSupportedOnDevice",
   r"CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE")
_e("wrapper.cuda-driver-old", "cuda-driver-too-old", 90, _D,
   "Ollama discover/gpu.go; LM Studio runtime check; koboldcpp; libnvidia-container",
   "the wrapper found a driver older than its CUDA runtime needs",
   r"CUDA driver version (is )?too old", r"nvidia driver (is )?too old", r"driver does not support CUDA \d",
   r"please update your (NVIDIA |GPU )?driver.{0,40}CUDA \d", r"cudart init failure: 35",
   r"cuda driver library init failure: 35", r"requires (a )?(NVIDIA )?driver version (>=|of at least)",
   # Ollama discover/gpu_info_cudart.c: `cudaSetDevice err: %d`, `cudart vram init failure: %d`
   # with the cudaError_t number; 35 is cudaErrorInsufficientDriver
   r"\b(cudaSetDevice|cudaGetDeviceCount|cudaDriverGetVersion|cuInit) err:? 35\b",
   r"cudart vram init failure: 35\b",
   # libnvidia-container (nvidia-container-cli, the container runtime's prestart hook): the
   # image's NVIDIA_REQUIRE_CUDA asks for a CUDA the host driver does not reach (RamaLama's
   # CUDA image, ramalama#1234). Other unsatisfied conditions (brand, arch) are not this.
   r"requirement error: unsatisfied condition: cuda\s*>=?\s*\d",
   # ... and the NVIDIA Container Toolkit's own check of the same NVIDIA_REQUIRE_* variables
   # (internal/modifier/csv.go, 2022 to 2026: `requirements not met: %v`, wrapped by the OCI
   # runtime as `error modifying OCI spec: requirements not met: …`). The CUDA images' requirement
   # is `cuda>=X brand=…,driver>=…`, every alternative a driver version; a condition on `arch` (the
   # GPU's compute capability) is not this, so the line counts when it names cuda or stops there
   # (a paste that cut the condition, docker/model-runner#978)
   r"OCI spec: requirements not met:\s*(unsatisfied condition:\s*)?(cuda\s*>=?\s*\d|$)",
   r"requirements not met: unsatisfied condition: cuda\s*>=?\s*\d",
   # libcuda.so IS the installed driver: a driver API entry point it lacks (Ollama's
   # discover/gpu_info_nvcuda.c dlsyms cuCtxCreate_v3, cuDeviceGetUuid_v2 … and logs
   # `symbol lookup for %s failed: <dlerror>`) is one that driver predates
   r"libcuda\.so[.\d]*: undefined symbol: cu[A-Z]\w*", r"symbol lookup for cu[A-Z]\w* failed")
# Ollama 0.9.x-0.12.x discover/cuda_common.go (`old CUDA driver detected - please upgrade to a newer
# driver`, `… for best performance` from 0.11) is a WARN on the way to choosing the runner built for
# that driver (cuda_v11 below driver 12.1, cuda_v12 below 13): Ollama adapted to the driver, so the
# line is shown but never decides, and an OOM or a load error after it is that failure.
_e("ollama.old-driver-warning", "cuda-driver-too-old", 20, _W,
   "Ollama 0.9-0.12 discover/cuda_common.go (cudaJetpack/cudaVariant)",
   "Ollama found a driver older than its newest CUDA runner and chose an older runner",
   r"old CUDA driver detected - please upgrade")
_e("cuda.no-kernel-image", "no-kernel-image", 90, _D,
   "cudaErrorNoKernelImageForDevice (209) / cudaErrorInvalidDeviceFunction (98); ggml-cuda",
   "the build has no GPU code for this device's architecture",
   r"no kernel image is available for execution on the device", r"invalid device function",
   r"cudaErrorNoKernelImageForDevice", r"CUDA_ERROR_NO_BINARY_FOR_GPU",
   r"has no device code compatible with CUDA arch", r"ggml was not compiled with any CUDA arch",
   # ggml-cuda.cu's bad_arch() of late 2023 (before no_device_code named the arch), still in
   # the koboldcpp and llama-cpp-python builds of that time
   r"ggml-cuda was compiled without support for the current GPU architecture",
   # cudaErrorInvalidPtx (218) / CUDA_ERROR_INVALID_PTX, `a PTX JIT compilation failed`: the
   # runtime JIT-compiles a build's PTX only when the build holds no binary for this device
   # (CUDA runtime API: "may fall back to compiling PTX if an application does not contain a
   # suitable binary for the current device"), and that fallback failed; a driver too old for
   # the PTX says so apart, cudaErrorUnsupportedPtxVersion (222, cuda.ptx-toolchain). Its enum names
   # are read by runtime_tables' entries.
   r"a PTX JIT compilation failed")
_e("hip.no-kernels-for-gfx", "no-kernel-image", 90, _D,
   "hipErrorNoBinaryForGpu (209), hipErrorSharedObjectInitFailed (303); HIP runtime, rocBLAS/Tensile",
   "ROCm has no kernels for this gfx architecture (an unsupported GPU without an override)",
   r"hipErrorNoBinaryForGpu", r"hipErrorInvalidDeviceFunction", r"hipErrorSharedObjectInitFailed",
   r"Unable to find code object for all current devices", r"No compatible code objects? found",
   r"(ROCm|HIP) error: shared object initialization failed",
   r"rocBLAS error: Cannot read .*TensileLibrary", r"for GPU arch\s*:\s*gfx\w+\s*$",
   r"rocBLAS error: Could not initialize Tensile", r"HSA_STATUS_ERROR_INVALID_ISA",
   # the same rocBLAS line as Ollama's runner status keeps it (the `rocBLAS` prefix dropped)
   # (Ollama writes rocBLAS's message after its own `error:`; older rocBLAS said `library`)
   r"error:\s*Could not initialize Tensile (host|library)",
   r"Cannot find (the )?(Tensile|code object|kernel).{0,40}gfx\d", r"hipBLASLt error: .*gfx\d+ is not supported",
   r"(device|GPU|gfx\w*).{0,30}is not supported by this (ROCm|HIP) build",
   r"no ROCm kernels? for gfx\d+",
   # rocBLAS tensile_host.cpp: after `Cannot read …TensileLibrary.dat … for GPU arch : gfxN` it
   # lists the files it has, each path quoted on a line of its own; it prints them on that path
   # only, so the list shows the missing arch when a paste keeps only the list
   r"List of available TensileLibrary Files", r"\"[^\"\s]*[/\\]TensileLibrary_(lazy_)?gfx\w+\.dat\"\s*$")
_e("hip.no-code-object-for-isa", "no-kernel-image", 90, _D,
   "HIP runtime (clr hip_fatbin.cpp `Cannot find CO in the bundle %s for ISA: %s`); Lemonade's "
   "backend installer (`Cannot install llamacpp:rocm on this system: Unsupported GPU: gfxN`, 2026)",
   "the build (or the wrapper's set of builds) has no code for this GPU's architecture",
   # HIP: the fat binary of a ROCm library has no code object for the device's ISA
   r"Cannot find CO in the bundle",
   # Lemonade: no llama.cpp ROCm build exists for this gfx target, so none is installed
   r"Unsupported GPU: gfx[0-9a-f]+\b")
# Huawei's CANN runtime (the Ascend NPUs' toolkit; ggml-cann.cpp ggml_cann_error, b11434: `CANN error:
# %s` with aclGetRecentErrMsg()) saying the NPU it found is one its installed operator packages have
# no implementation for (`EZ9903: ... support for Ascend910 is not implemented`, llama.cpp#18133, on a
# card its reporter calls a 910B): no code for this device.
_e("cann.soc-not-supported", "no-kernel-image", 90, _S,
   "Huawei CANN's error message as ggml-cann.cpp ggml_cann_error prints it (`CANN error: EZ9903: "
   "... support for <SoC> is not implemented`), ggml-cann from 2024 to b11434",
   "the Ascend toolkit installed has no implementation for the NPU this process runs on",
   r"CANN error: .{0,200}\bsupport for Ascend\w* is not implemented")
# hipErrorInvalidImage / cudaErrorInvalidKernelImage (200), `device kernel image is invalid`: the
# runtime holds no loadable code for the device. From HIP it is a launch with no function for the
# device's ISA (no code object for it in the fat binary); from CUDA a build without this GPU's
# code or a driver that cannot read the code objects, so classify.py leaves CUDA's open between
# this and gpu-error.
_e("gpu.invalid-kernel-image", "no-kernel-image", 90, _S,
   "hipErrorInvalidImage (200) and cudaErrorInvalidKernelImage (200), as ggml's CUDA_CHECK prints "
   "their strings (`ROCm error: device kernel image is invalid`)",
   "the build's GPU code for this device would not load",
   r"device kernel image is invalid", r"\b(hipErrorInvalidImage|cudaErrorInvalidKernelImage)\b")
# The Metal driver of a Mac's AMD (or Intel) GPU compiles each of ggml's kernels for it at start;
# its shader compiler (`SC`) fails on the simdgroup-matrix kernels (kernel_mul_mm_*), which only
# Apple's own GPUs run: ggml-metal.m of 2023 loaded them for every device, printed the kernel with a
# null pipeline and `load pipeline error … SC compilation failure`, and gave up (llama.cpp#3423,
# #1730). The build has no kernel this GPU can run; later builds skip the kernel on such devices.
_e("metal.kernel-not-for-this-gpu", "no-kernel-image", 90, _S,
   "the macOS Metal driver's shader compiler for AMD/Intel GPUs (`SC compilation failure`), as "
   "ggml-metal.m's ggml_metal_init (2023) prints it after `load pipeline error`",
   "one of ggml's Metal kernels cannot be compiled for this (non-Apple) GPU",
   r"\bSC compilation failure\b")
# DPC++'s program manager (sycl/source/detail/program_manager, 2020 to 2026) when the kernel a SYCL
# call launches is in none of the device images the binary carries: a build compiled without SYCL's
# device code (`-fsycl` missing from the compile, ollama#2458) or for other devices only.
_e("sycl.no-kernel-named", "no-kernel-image", 90, _S,
   "DPC++ SYCL runtime program manager (`No kernel named %s was found`, with PI_ERROR_INVALID_KERNEL_NAME "
   "-46 or UR_RESULT_ERROR_INVALID_KERNEL_NAME), as ggml-sycl's `Exception caught at file` prints it",
   "the SYCL binary carries no device code for a kernel it launches",
   r"No kernel named \S+ was found")
_e("cpu.illegal-instruction", "illegal-instruction", 89, _D,
   "the kernel (SIGILL, traps: invalid opcode); Windows STATUS_ILLEGAL_INSTRUCTION 0xC000001D",
   "the build uses an instruction this CPU lacks",
   r"STATUS_ILLEGAL_INSTRUCTION", r"\b0xc000001d\b", r"\b3221225501\b", r"-1073741795\b",
   r"CPU does not support (AVX|AVX2|AVX512|F16C|FMA|SSE)", r"your CPU (does not|doesn't) support (AVX|the required)",
   r"requires (an? )?(AVX2?|AVX-?512) (capable )?CPU",
   # the Go runtime's fatal-signal banner (runtime/signal_unix.go) in a Go wrapper's own log; it
   # begins a line, or ends one that C code left unterminated on the same stderr (LocalAI#288:
   # `failed unexpectedly reached end of fileSIGILL: illegal instruction`), never after a space
   r"(?<!\s)SIGILL: illegal instruction\s*$",
   # llamafile's cpucheck.c (and cosmopolitan's, which it copies): its start-up check for the
   # x86 features the build was compiled for, printed before any instruction can fault
   r"fatal error: the cpu feature \S+ was required at build time but isn't available",
   # HotSpot's fatal error report (vmError.cpp print_error_report: `#  SIGILL (0x4) at pc=…`) when
   # the Java bindings' native library (java-llama.cpp's libjllama) faults; the JVM then aborts, so
   # the exit says SIGABRT
   r"^#\s+SIGILL \(0x4\) at pc=",
   # Wine's report of an unhandled EXCEPTION_ILLEGAL_INSTRUCTION (dlls/kernelbase/debug.c
   # format_exception_msg: `Unhandled illegal instruction at address %p (thread %04x), starting
   # debugger...`), a Windows build run under Wine (stable-diffusion.cpp#1483: AVX-512 code on a
   # CPU without it)
   r"\bUnhandled illegal instruction at address\b")

# The LLVM/Intel OpenMP runtime (kmp_runtime.cpp __kmp_check_mic_type … `OMP: Error #15:
# Initializing %s, but found %s already initialized.`): a second OpenMP runtime was loaded into a
# process that already had one (Intel's libiomp5md.dll from PyTorch or numpy's MKL beside the
# engine's libomp140, JamePeng/llama-cpp-python#163), and the runtime aborts. Another program's
# library is what breaks the engine's, so stale-library ("wrong DLL loaded").
_e("omp.duplicate-runtime", "stale-library", 72, _S,
   "LLVM/Intel OpenMP runtime (`OMP: Error #15: Initializing %s, but found %s already initialized.`)",
   "two OpenMP runtimes were loaded into one process: another program's library clashes with the "
   "engine's",
   r"OMP: Error #15: Initializing \S+, but found \S+ already initialized")

# The Windows loader's ERROR_DLL_INIT_FAILED (1114; Python's ctypes says `[WinError 1114]`, node's
# process.dlopen and LoadLibrary callers its text): the library's own initializers failed while it
# loaded. A llama.cpp library has no DllMain of its own; what runs then is the C++ static
# initializers, compiled for the build's CPU level (AVX2 in koboldcpp's default and CUDA DLLs, every
# LM Studio runtime), so on a CPU without it (or with AVX2 off in the BIOS) the first such
# instruction faults inside the loader and is reported as this, not as an illegal instruction
# (koboldcpp#599 and #1555, where KoboldCpp's team named the CPU; lmstudio-bug-tracker#1981, where
# AVX2 back on fixed it). PyTorch's own DLLs fail the same way for other reasons (c10.dll on hybrid
# graphics), so a line naming torch is not read.
_e("win.dll-init-failed", "illegal-instruction", 70, _S,
   "Windows ERROR_DLL_INIT_FAILED 1114 (`[WinError 1114]`, `A dynamic link library (DLL) "
   "initialization routine failed`) loading a llama.cpp library (koboldcpp, LM Studio)",
   "the engine library's start-up code failed inside the loader: most often its instructions are "
   "newer than this CPU (AVX/AVX2)",
   r"^(?!.*torch).*\[WinError 1114\]", r"^(?!.*torch).*A dynamic link library \(DLL\) initialization routine failed")

# -------------------------------------------------------------------------- RPC, drafter

_e("rpc.lost", "rpc-worker-lost", 88, _D, f"ggml/src/ggml-rpc/ggml-rpc.cpp, {_B}",
   "an RPC worker crashed, vanished or speaks another protocol version",
   r"Remote RPC server crashed or returned malformed response",
   # GGML_ABORT prints `<file>:<line>: Failed to connect to <endpoint>`; the bare words are
   # also any client's (a wrapper's health check, curl), so only ggml-rpc's own line decides
   r"ggml-rpc\.cpp:\d+: Failed to connect to", r"Failed to connect to RPC server",
   # ... and the same words with no file:line before them, as llama.cpp#12385's log of early 2025
   # has them, once per RPC worker: only a host and a port on the line, which a client's own
   # words (curl's `port N`, a sentence) never are
   r"^Failed to connect to [\w.\-\[\]]*:\d+\s*$",
   r"RPC handshake failed for", r"RPC server version mismatch", r"failed to connect to rpc server",
   # ggml-rpc.cpp before RPC_STATUS_ASSERT named the crash (2024 to early 2025, and the forks
   # built from then: llama-box): every command's `bool status = send_rpc_cmd(...)` was
   # checked by a bare GGML_ASSERT(status), false only when the socket send/recv failed
   # (the worker crashed, restarted or dropped the connection); older ggml.c printed it as
   # `GGML_ASSERT: <file>:<line>: status`. `GGML_ASSERT(status == GGML_STATUS_SUCCESS && ...)`
   # is a graph the worker could not compute, not a lost worker, and is not matched.
   r"ggml-rpc\.cpp:\d+: GGML_ASSERT\(status\) failed", r"GGML_ASSERT: \S*ggml-rpc\.cpp:\d+: status\s*$",
   # ... and the same abort seen only in a backtrace (gdb's `#2 0x… in
   # ggml_backend_rpc_graph_compute(…) ()`, backtrace_symbols' `(ggml_backend_rpc_get_tensor+0x…)`):
   # every ggml_backend_rpc_* function on the client only sends a command and checks that the
   # socket answered (RPC_STATUS_ASSERT, GGML_ASSERT(status) before it), so an abort under one of
   # them is the worker gone (llama.cpp#9850, the client's side of a crashed rpc-server)
   r"#\d+\s+0x[0-9a-fA-F]+ in ggml_backend_rpc_\w+", r"\(ggml_backend_rpc_\w+\+0x[0-9a-fA-F]+\)")
# The line llama-server's load_model (server-context.cpp, b11434) prints when common_speculative_init
# threw: it drops the drafter and loads on without it. Read by silent_fallbacks (a ready engine serving
# without its drafter) and by evidence.draft_scoped (a later failure is not the dropped drafter's).
DRAFTER_DROPPED = re.compile(r"failed to initialize speculative decoding context:?\s*(.*)")
_e("drafter.load", "drafter-failure", 85, _D,
   f"common/speculative.cpp, tools/server/server-context.cpp, {_B}; older server.cpp "
   "(`unable to load draft model`), speculative example (`failed to load draft model`)",
   "the draft model (or MTP head) could not be loaded or initialised",
   r"failed to load draft model", r"unable to load draft model", r"failed to create MTP context",
   r"common_speculative_init\w*: failed", r"failed to (create|initialize) (the )?draft (model )?context",
   r"error loading draft model", r"draft model .{0,40}failed to load", r"failed to load the draft",
   r"Failed to create draft context", r"loading draft model failed",
   # server-context.cpp load_model (b11434) catches what common_speculative_init threw and says
   # `failed to initialize speculative decoding context: <what>`, then serves without the drafter
   # (or stops, `synthetic acceptance requires an initialized speculative decoding context`); the
   # implementations' own throws (common/speculative.cpp) reach other programs bare
   r"failed to initiali[sz]e speculative decoding context",
   r"synthetic acceptance requires an initiali[sz]ed speculative decoding context",
   r"draft-simple requires a draft context", r"DSpark draft has no confidence head",
   r"draft model is not eagle3", r"draft model number of sequences is incompatible")
# KoboldCpp's speculative_decoding_setup (gpttype_adapter.cpp; in use by 1.82, koboldcpp#1330,
# and still so at 0027a47): after `Attempting to load draft model for speculative decoding.`
# it loads the draft with llama_model_load_from_file and, when that (or its context) returns NULL, prints `Error: failed
# to load speculative decoding draft model '%s'` and `Speculative Decoding will not be used!`;
# a draft whose vocabulary is more than 256 tokens off the target's is refused with `Draft model
# vocab of (%d) is too different from base vocab of (%d)`, a recurrent draft with `Speculative
# decoding cannot be used with Recurrent draft models!`. Each names the draft, never the target
# (the target has loaded by then); the engine then serves without speculation (koboldcpp#2262).
_e("koboldcpp.draft", "drafter-failure", 85, _D,
   "KoboldCpp gpttype_adapter.cpp speculative_decoding_setup (by 1.82, koboldcpp#1330; 0027a47)",
   "the draft model given to KoboldCpp could not be loaded or used, so it serves without it",
   r"failed to load speculative decoding draft model",
   r"Draft model vocab of \(\d+\) is too different from base vocab",
   r"Speculative decoding cannot be used with Recurrent draft models")
# Architectures that exist only as drafters (src/models/dflash.cpp, eagle3.cpp, b11434): their
# hyperparameter and decoder checks name the architecture, so a load that fails on them is the
# draft's whatever the log says of whose load it was (llama.cpp#25116: `error loading model
# hyperparameters: DFlash model requires 'target_layers' in GGUF metadata`).
_e("drafter.architecture", "drafter-failure", 85, _D, f"src/models/dflash.cpp, src/models/eagle3.cpp, {_B}",
   "the draft model (a DFlash or EAGLE3 head) lacks what its architecture needs: a conversion "
   "for another build, or no draft model at all",
   r"DFlash model requires '\w+' in GGUF metadata", r"unsupported DFlash hidden activation",
   r"EAGLE3 model requires '\w+' in GGUF metadata", r"EAGLE3 requires exactly \d+ entries in '\w+'",
   r"EAGLE3 decoder requires (token embeddings|an output projection)")
_e("drafter.vocab", "drafter-failure", 85, _D,
   f"common/speculative.cpp common_speculative_are_compatible, {_B}; older examples/speculative",
   "the draft model does not fit the target (vocabulary differs)",
   r"draft model vocab (type )?must match target model", r"draft vocab vocab must match",
   r"draft model .{0,60}(is )?not compatible with (the )?target model",
   r"(tgt|target) vocab size .{0,40}(dft|draft) vocab size", r"draft model .{0,30}special tokens must match",
   r"the draft model '[^']*' is not compatible",
   # common/speculative.cpp draft-simple (b11434): SPC_ERR's line before its throw
   r"the target and draft vocabs are not compatible")
_e("drafter.batch", "drafter-failure", 85, _D, f"tools/server/server-context.cpp, {_B}",
   "the drafter failed while decoding", r"failed to process speculative batch",
   r"llama_process\(ctx_dft\) failed", r"llama_decode\(ctx_dft\) failed",
   r"EAGLE3: target layer", r"DFlash: target layer",
   # ik_llama.cpp's DFlash drafter (common/speculative.cpp, llama-dflash.cpp, 2026): the draft's
   # own scheduler could not be set up, and every draft decode then fails; an allocation failure
   # before these lines was the draft context's (order: drafter-before-its-echoes)
   r"DFlash draft decode failed", r"failed to initialize DFlash K/V scheduler")


ENTRIES = _wordings.entries()
