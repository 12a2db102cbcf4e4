"""Wordings of memory running out: the GPU runtimes' allocations (with the SYCL runtime's device
and build failures beside its allocation's), the host's, the kernel's, systemd's and the
containers' out-of-memory killers, and the wrappers' own words for it.

Pure data: no files, no clock, nothing run.
"""

from __future__ import annotations

from stoker.diagnosis.wordings.entry import B11434 as _B
from stoker.diagnosis.wordings.entry import Strength, Wordings

_D, _S, _W = Strength.DECISIVE, Strength.STRONG, Strength.WEAK
_wordings = Wordings()
_e = _wordings.add

# ------------------------------------------------------------------------------ memory
# The first allocation that fails is the root cause; the abort, device loss or `error
# loading model:` that follows it is its echo (evidence.py's order).

_e("cuda.oom", "gpu-oom", 80, _D,
   "ggml-cuda CUDA_CHECK (`CUDA error: out of memory`), ggml_backend_cuda_buffer_type_alloc_buffer "
   "(`cudaMalloc failed: out of memory`), ggml-cuda VMM pool (CU_CHECK); hip.h maps them for ROCm",
   "a CUDA (or HIP speaking CUDA's words) device ran out of memory",
   r"(CUDA|ROCm|MUSA) error:\s*(out of memory|memory allocation)",
   r"(cuda|hip)Malloc(Managed|Host|Async)? failed:\s*out of memory", r"hipErrorOutOfMemory",
   r"cudaErrorMemoryAllocation", r"ggml-cuda\.cu:\d+: out of memory", r"CUDA_ERROR_OUT_OF_MEMORY",
   r"failed to allocate (CUDA|ROCm|MUSA)\d+ buffer", r"unable to allocate (CUDA|ROCm|MUSA)\d+ buffer",
   r"CUDA out of memory\. Tried to allocate",
   # PyTorch's caching allocator (c10/cuda/CUDACachingAllocator.cpp), in the wrappers that run
   # transformers beside llama.cpp; hipified on ROCm builds (`HIP out of memory`), and the
   # exception's own name when the message is on another line
   r"HIP out of memory\. Tried to allocate", r"\btorch\.(cuda\.)?OutOfMemoryError\b",
   r"cublas(Create|_v2)?.{0,40}CUBLAS_STATUS_ALLOC_FAILED", r"CUBLAS_STATUS_ALLOC_FAILED",
   r"hipblas.{0,40}HIPBLAS_STATUS_ALLOC_FAILED",
   # CUDA 12 builds print cuBLAS failures through cublasGetStatusString (ggml-cuda/common.cuh
   # cublas_get_error_str, b11434): CUBLAS_STATUS_ALLOC_FAILED reads `the resource allocation
   # failed` (cuBLAS: "usually caused by a cudaMalloc() failure"); before CUDA 12 the enum name
   r"(CUDA|MUSA) error:\s*the resource allocation failed")
# ggml-cuda/vendors/hip.h maps CU_CHECK to `GGML_ABORT("HipVMM Failure: %s\n",
# hipGetErrorString(err))`; CU_CHECK wraps only the virtual-memory pool's driver calls
# (ggml_cuda_pool_vmm::alloc: hipMemCreate, hipMemAddressReserve, hipMemMap, hipMemSetAccess),
# so the line exists only in HIP builds with VMM on: llama.cpp from 5f0db95 (#11362's VMM
# support, 2025-01-22) until #11420 (2025-01-25) turned it off by default (GGML_HIP_NO_VMM=ON:
# it "doesn't work on some configurations and we have no way of telling which", after #11405),
# forks that took that window (koboldcpp-rocm), and builds with GGML_HIP_NO_VMM=OFF.
# `out of memory` there is hipErrorOutOfMemory, which ROCm's VMM also returns with the memory
# free (llama.cpp#11405: every model however small on an RX 5700 XT, an 8B on a 12 GB RX 6700
# XT, all fine with VMM off; koboldcpp-rocm#105, spent batch 19: every model after a ROCm
# upgrade, ROCR-Runtime#287; llama.cpp#18650: HipVMM broken on ROCm 7.1; rocm-systems#10604:
# hipMemCreate spends a file descriptor per handle, so VMM stops near 2 GiB at the stock
# ulimit), while the same pool on CUDA runs out for real (ollama#3237, koboldcpp#612 and #1711:
# cuMemCreate/cuMemSetAccess out of memory, cuda-oom). So the line is a ROCm allocation that
# may be the runtime's fault: read as rocm-oom, then left open between rocm-oom and gpu-error
# (open_readings.left_open), since only the same load with VMM off tells them apart. It ranks
# above the generic `hipErrorOutOfMemory`/`out of memory` readings of the same line so that
# this one is the line's reading. Any other HipVMM error (`invalid argument` from
# hipMemSetAccess: llama.cpp#26054, ROCm/rocm-systems#2516) is the VMM API refusing, no
# memory figure at all: a GPU runtime error.
_e("hip.vmm-oom", "rocm-oom", 81, _S,
   f"ggml/src/ggml-cuda/vendors/hip.h CU_CHECK (`HipVMM Failure: %s`, hipGetErrorString), {_B}; "
   "HIP VMM on from llama.cpp 5f0db95 (#11362) until #11420 made GGML_HIP_NO_VMM=ON the default",
   "ROCm's virtual-memory pool got hipErrorOutOfMemory: the GPU's memory ran out, or ROCm's VMM "
   "failed with memory free (llama.cpp#11405, koboldcpp-rocm#105); the line cannot tell which",
   r"HipVMM Failure: (out of memory|hipErrorOutOfMemory)\b")
_e("hip.vmm", "gpu-error", 40, _S, f"ggml/src/ggml-cuda/vendors/hip.h CU_CHECK, {_B}",
   "ROCm's virtual-memory pool call failed with an error that is not out-of-memory (hipMemSetAccess's "
   "`invalid argument`, llama.cpp#26054): the runtime's VMM refused, a GPU runtime error",
   r"HipVMM Failure: (?!out of memory|hipErrorOutOfMemory\b)")
_e("vulkan.oom", "vulkan-oom", 80, _D,
   f"ggml/src/ggml-vulkan/ggml-vulkan.cpp and ggml-vulkan-buffers.cpp, {_B}; VkResult -2/-1/-1000069000",
   "a Vulkan allocation failed (device or driver memory)",
   r"ErrorOutOfDeviceMemory", r"OutOfDeviceMemoryError", r"VK_ERROR_OUT_OF_DEVICE_MEMORY",
   r"ErrorOutOfHostMemory", r"VK_ERROR_OUT_OF_HOST_MEMORY", r"ErrorOutOfPoolMemory",
   r"ggml_vulkan:.*(allocation|memory).*failed", r"unable to allocate Vulkan\d+ buffer",
   r"failed to allocate Vulkan\d+ buffer", r"Requested buffer size exceeds device buffer size limit",
   r"No suitable memory type found", r"^Device memory allocation of size \d+ failed",
   r"vk::Device::allocateMemory: Error")
_e("vulkan.driver-oom", "vulkan-oom", 80, _D, "Mesa RADV/ANV, NVIDIA and AMDVLK Vulkan drivers",
   "the Vulkan driver itself reports memory exhausted (a device loss usually follows)",
   r"radv/amdgpu: Not enough memory for command submission", r"radv: Not enough memory",
   r"amdgpu: (failed to allocate|not enough memory)", r"anv: .{0,40}out of (device )?memory",
   r"radv/amdgpu: Failed to allocate a buffer", r"DRM_IOCTL_I915_GEM_EXECBUFFER2 failed.*ENOSPC")
_e("metal.oom", "metal-oom", 80, _D,
   f"ggml/src/ggml-metal/ggml-metal-device.m and ggml-metal.cpp, {_B}; older ggml-metal.m "
   "(ggml_metal_add_buffer); MTLCommandBufferErrorOutOfMemory (8)",
   "Metal could not allocate (or map) the buffer, or a command buffer ran out of memory",
   r"failed to allocate Metal buffer", r"ggml_metal_buffer_(init|map|from_ptr): error: failed to",
   r"ggml_metal_add_buffer: error: failed to allocate", r"failed to allocate MTL\d+ buffer",
   r"kIOGPUCommandBufferCallbackErrorOutOfMemory", r"MTLCommandBufferErrorOutOfMemory",
   r"Insufficient Memory \(0+8", r"ggml_metal_add_buffer: buffer '\w+' size \d+ is larger than buffer maximum",
   # ggml-metal-context.m (b11434) after `command buffer N failed with status 5`: `error: %s` with
   # the error's localizedDescription, `Insufficient Memory (00000008:kIOGPUCommandBufferCallback…)`;
   # read from its title-case first words, as a paste may cut the code (llama.cpp#27309: `(...)`)
   r"(?-i:error: Insufficient Memory\b)",
   r"ggml_backend_metal_buffer_\w*: error: failed to allocate buffer",
   r"ggml_metal\w*: error: (vm_allocate|posix_memalign) failed",
   r"ggml_metal\w*: error: failed to allocate buffer, size =",
   r"ggml_metal_graph_compute: command buffer \d+ failed with status 5\b.{0,40}(memory|Insufficient)",
   # Metal API validation: a buffer longer than the device allows
   r"newBuffer\w*:length:.{0,120}failed assertion.{0,80}(length|size)",
   r"Buffer Validation.{0,80}(length|size).{0,40}(must be|exceeds|<=)",
   # MTLDebugDevice's own assertion (the validation layer); in llama.cpp's threads a buffer
   # longer than the device's maxBufferLength
   r"failed assertion `Buffer Validation",
   r"exceeds (the )?(max(imum)?(BufferLength| buffer length)|recommendedMaxWorkingSetSize)")
_e("sycl.no-device", "gpu-error", 65, _S,
   "the SYCL runtime (DPC++ `sycl::exception`, PI/UR error PI_ERROR_INVALID_VALUE -30) as ggml-sycl "
   "and Intel's ipex-llm builds print it, often inside `error loading model:`",
   "the SYCL runtime has no usable device for the context it was asked to make (a GPU driver "
   "it cannot use, or none): the runtime's failure, not the model file's",
   r"DeviceList is empty")
# DPC++'s program manager (sycl/source/detail/program_manager, 2020 to 2026) when the GPU driver's
# compiler could not build the binary's device code for this device at run time: the exception's
# text opens `The program was built for N devices` and `Build program log for '<device>':` with
# the driver compiler's log (PI_ERROR_BUILD_PROGRAM_FAILURE -11, UR_RESULT_ERROR_PROGRAM_BUILD_FAILURE).
# The driver's compiler failing, or code this device cannot take (double precision on Arc): which,
# only the build log tells, so classify.py leaves it open (intel/ipex-llm#13065: an empty log, the
# maintainers found no cause).
_e("sycl.program-build-failed", "gpu-error", 45, _S,
   "DPC++ SYCL runtime program manager (`The program was built for %d devices`, `Build program log "
   "for '%s':`; PI_ERROR_BUILD_PROGRAM_FAILURE, UR_RESULT_ERROR_PROGRAM_BUILD_FAILURE), as ggml-sycl's "
   "`Exception caught at file` follows it",
   "the GPU driver could not compile the binary's device code for this device at run time",
   r"The program was built for \d+ devices?\b", r"Build program log for '",
   r"\b(PI_ERROR_BUILD_PROGRAM_FAILURE|UR_RESULT_ERROR_PROGRAM_BUILD_FAILURE)\b")
_e("sycl.oom", "device-oom", 80, _D, f"ggml/src/ggml-sycl/ggml-sycl.cpp, {_B}; Level Zero",
   "a SYCL device allocation failed (read as the device memory of the build)",
   r"ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY", r"UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY",
   r"PI_ERROR_OUT_OF_RESOURCES", r"ggml_backend_sycl_buffer_type_alloc_buffer: can't allocate",
   r"SYCL\d* buffer.{0,30}failed to allocate",
   # ggml-sycl dpct helpers (b11434): the device's virtual memory pool is exhausted
   r"dpct_malloc: out of memory",
   # ggml-sycl (b11434) `%s: can't allocate %zu Bytes of memory on device` (its Flash Attention
   # half buffers, `on device/GPU` for the host-pinned buffer type)
   r"can't allocate \d+ Bytes of memory on device")
_e("os.oom-killer", "host-oom", 79, _D,
   "Linux kernel mm/oom_kill.c; systemd unit results; docker inspect; Kubernetes",
   "the kernel's OOM killer ended the process",
   r"Failed with result 'oom-kill'", r"killed by the OOM killer", r"invoked oom-killer",
   r"Out of memory: Kill(ed)? process", r"Memory cgroup out of memory", r"oom-kill:constraint",
   r"\"OOMKilled\":\s*true", r"Reason:\s*OOMKilled", r"\bOOMKilled\s*$", r"oom_reaper: reaped process",
   r"oom-kill event", r"systemd-oomd.{0,40}Killed", r"Killed process \d+ \(\S+\) total-vm",
   r"earlyoom.{0,40}(sending SIG|killing)", r"was killed due to (memory pressure|running out of memory)",
   r"container .{0,40}exceeded (its )?memory limit", r"exit code 137.{0,40}(OOM|out of memory)")
_e("host.mlock-warning", "host-oom", 79, _W,
   f"src/llama-mmap.cpp llama_mlock, {_B}: `warning: failed to mlock %zu-byte buffer ...: %s` "
   "(RLIMIT_MEMLOCK) and `failed to VirtualLock`",
   "--mlock could not pin the model (a lock limit, not memory running out): the engine goes on "
   "unlocked, so the line outranks host.alloc's `Cannot allocate memory` only to be a sign",
   # VirtualLock's own refusal is the working-set quota (ERROR_WORKING_SET_QUOTA 1453, `Insufficient
   # quota …`); the commit limit (ERROR_COMMITMENT_LIMIT 1455, `The paging file is too small …`) is
   # the system's memory itself running out, which host.alloc reads (h2ogpt#620)
   r"failed to mlock \d+-byte buffer", r"failed to VirtualLock \d+-byte buffer(?!.*paging file is too small)",
   r"Try increasing RLIMIT_MEMLOCK")
_e("host.pinned-warning", "host-oom", 79, _W,
   f"ggml/src/ggml-cuda/ggml-cuda.cu ggml_cuda_host_malloc, {_B}: `WARNING: failed to allocate "
   "%.2f MB of pinned memory: %s`",
   "pinned (page-locked) host memory was refused: the engine goes on with pageable memory, so a "
   "sign of memory pressure only",
   r"failed to allocate [\d.]+ MB of pinned memory",
   # ggml-vulkan.cpp (b11434) `ggml_vulkan: Failed to allocate pinned memory (%s)`
   r"ggml_vulkan: Failed to allocate pinned memory")
_e("host.alloc", "host-oom", 78, _D,
   f"ggml/src/ggml.c ggml_aligned_malloc, ggml-cpu buffers, src/llama-mmap.cpp, {_B}; C++ std::bad_alloc",
   "system memory ran out inside the engine",
   r"failed to allocate CPU\w* buffer", r"ggml_aligned_malloc: insufficient memory",
   r"ggml_backend_cpu_buffer_type_alloc_buffer: failed to allocate", r"std::bad_alloc",
   r"Cannot allocate memory", r"out of host memory", r"mmap failed.*ENOMEM",
   r"paging file is too small", r"os error 1455", r"Not enough memory resources are available",
   r"STATUS_NO_MEMORY", r"STATUS_COMMITMENT_LIMIT", r"\b0xc0000017\b", r"\b0xc000012d\b",
   r"\b3221225495\b", r"\b3221225773\b", r"-1073741801\b", r"-1073741523\b",
   # Python's MemoryError, not PyTorch's OutOfMemoryError (the GPU's: cuda.oom)
   r"\bMemoryError\b", r"not enough (system )?memory to load",
   # (not Metal's `Insufficient Memory`, the command buffer's description in title case: metal.oom)
   r"(?!(?-i:Insufficient Memory))insufficient (system )?memory",
   r"model requires more system memory \([^)]*\) than is available",
   # its WARN just before that error (llm/server.go 0.1.3x to 0.2x), which a log cut there keeps
   r"model request too large for system",
   # Unsloth Studio's check before it starts llama-server (2026: `Failed to load model: About N GB of
   # this model does not fit in GPU memory and would run from system RAM. Only about M GB is
   # available …`, unsloth#9482): the wrapper's estimate of the system memory, like Ollama's above
   r"does not fit in GPU memory and would run from system RAM\. Only about [\d.]+ ?GB is available",
   # ggml-sycl (b11434) `%s: can't allocate %zu Bytes of memory on host`
   r"can't allocate \d+ Bytes of memory on host")
# ggml_init mallocs the context's own memory pool unless the caller hands it one:
# `.mem_buffer = params.mem_buffer ? params.mem_buffer : GGML_ALIGNED_MALLOC(mem_size)` (ggml.c,
# spring 2023; ggml_aligned_malloc in ggml/src/ggml.c since), then checks it with
# `GGML_ASSERT(ctx->mem_buffer != NULL)`. Before ggml_aligned_malloc printed `insufficient
# memory` (mid-2023) the assertion was the only line a failed malloc left, so it is the host's
# allocation failing, not an internal check (llama.cpp#1813, spent batch 16: gpt4all's
# llama.cpp of 2023-05-11 on a 1.9 GB machine). The pool is host memory whatever the backend.
_e("ggml.context-malloc", "host-oom", 78, _D,
   "ggml.c ggml_init (2023: `GGML_ASSERT: ggml.c:N: ctx->mem_buffer != NULL`; ggml/src/ggml.c, "
   f"{_B}: `GGML_ASSERT(ctx->mem_buffer != NULL) failed`) after its own malloc of the context pool",
   "ggml's malloc of a context's memory pool returned NULL: the host's memory (or the process's "
   "commit limit) ran out",
   r"GGML_ASSERT: \S*:\d+: ctx->mem_buffer != NULL", r"GGML_ASSERT\(ctx->mem_buffer != NULL\) failed")
# llama.cpp's llama_buffer::resize (llama.cpp and llama-util.h, mid to late 2023, and the copies
# ctransformers, gpt4all and koboldcpp vendored): `data = llama_host_malloc(n)`, then plain malloc
# as a fallback, then `GGML_ASSERT(data)`: both allocations of the host buffer returned NULL.
# Only llama.cpp's own file: other `GGML_ASSERT(data)` checks guard device or mapped memory.
_e("llama.host-buffer-malloc", "host-oom", 78, _S,
   "llama.cpp llama_buffer::resize (2023: `GGML_ASSERT: <dir>/llama.cpp:N: data`), in the bindings "
   "that vendored it (ctransformers, gpt4all, koboldcpp)",
   "llama.cpp could not allocate a host buffer (pinned, then plain malloc): the host's memory or "
   "the process's commit limit ran out",
   r"GGML_ASSERT: \S*\bllama\.cpp:\d+: data\s*$")
# tabby crates/llama-cpp-server supervisor.rs analyze_error_message: said when the engine's
# output contained `cudaMalloc` (ggml-cuda's `cudaMalloc failed: out of memory`), which tabby keeps
# to itself and replaces with this advice.
_e("wrapper.cuda-malloc-seen", "cuda-oom", 80, _S,
   "tabby crates/llama-cpp-server/src/supervisor.rs analyze_error_message (2025): `CUDA memory "
   "allocation error detected` when llama-server's output held `cudaMalloc`",
   "the wrapper saw the engine's cudaMalloc fail: the GPU's memory ran out",
   r"CUDA memory allocation error detected")
_e("wrapper.host-too-small", "host-oom", 78, _S,
   "Ollama llm/server.go (0.12 to 0.20: `model is too large for system memory`) and node-llama-cpp "
   "resolveContextContextSizeOption.ts (InsufficientMemoryError, `… too large for the available "
   "RAM`): the wrapper's estimate against the system memory, before the engine starts",
   "the wrapper found the model (or its context) larger than the system memory it could use",
   r"model is too large for system memory",
   # node-llama-cpp's own estimate before it creates a context (src/gguf/insights/utils/
   # resolveContextContextSizeOption.ts, 2024-2026: InsufficientMemoryError `A context size of N is
   # too large for the available RAM`); its VRAM and `VRAM and RAM` forms name no one memory here
   r"InsufficientMemoryError: A context size of \d+( with \d+ sequences)? is too large for the "
   r"available RAM\b")
_e("wrapper.oom-guess", "device-oom", 65, _S,
   "Ollama llm/server.go (2026, llama-server runner: `llama-server reported out-of-memory during "
   "startup: %s`, from llm/status.go's memory substrings); Jan tauri-plugin-llamacpp error.rs "
   "(`Out of memory. The model requires more RAM or VRAM than available.`, ErrorCode OutOfMemory)",
   "the wrapper read an out-of-memory in the engine's output; the build's device decides which "
   "memory (the engine's own line, when present, names it and outranks this)",
   r"llama-server reported out-of-memory during startup",
   r"Out of memory\. The model requires more RAM or VRAM than available",
   r"LlamacppError \{ code: OutOfMemory", r"\bOUT_OF_MEMORY\b.{0,40}model requires more RAM")


ENTRIES = _wordings.entries()
