"""Wordings of GPU runtime errors (a fault, a lost device, a runtime's segfault) and of the engine's
own aborts (GGML_ASSERT, GGML_ABORT), the weak signs that follow most failures, with Ollama's own
lines around them.

Pure data: no files, no clock, nothing run.
"""

from __future__ import annotations

import re

from stoker.diagnosis.wordings.entry import B11434 as _B
from stoker.diagnosis.wordings.entry import Strength, Wordings
from stoker.diagnosis.wordings.runtime_tables import CUDA_ERROR_STRINGS, GPU_RUNTIME_LIBRARY

_D, _S = Strength.DECISIVE, Strength.STRONG
_wordings = Wordings()
_e = _wordings.add

# ------------------------------------------------------------------- GPU errors, aborts

# Ollama on Windows, 0.1.33 to 0.3 (gpu/assets.go PayloadsDir, "incomplete distribution"): no
# runner folder beside ollama.exe (removed by antivirus software, or a partial install), so no
# llama.cpp server can be started at all.
_e("ollama.runners-missing", "missing-library", 75, _D,
   "ollama gpu/assets.go PayloadsDir (058f6cd, April 2024, to 0.3.x); llm/payload.go "
   "errPayloadMissing (0.1.2x to 0.1.3x: `expected payloads not included in this build of ollama`, "
   "a build from source without `go generate`)",
   "the wrapper's own engine binaries are missing from its install",
   r"unable to locate llm runner directory\.\s+Set OLLAMA_RUNNERS_DIR",
   r"expected payloads not included in this build of ollama")
# The kernel's segfault report (arch/x86/mm/fault.c show_signal_msg: `<comm>[<pid>]: segfault
# at <addr> ip <ip> sp <sp> error <n> in <file>[...]`) naming a GPU runtime's own library as the
# place of the fault: the driver stack crashed (ROCm's code-object compiler comgr on gfx1030,
# ROCm/legacy-rocm-build#6619), not ggml. Strong: an allocation that failed first outranks it.
_e("gpu.runtime-segfault", "gpu-error", 40, _S,
   "the Linux kernel (show_signal_msg + print_vma_addr); the GPU runtimes' library names",
   "the process crashed inside the GPU vendor's runtime or driver library",
   rf"segfault at \S+ ip \S+ (sp \S+ )?error \d+ in {GPU_RUNTIME_LIBRARY}(\[|\s|$)")
# The same fault in the reports a user pastes when the engine said nothing: gdb's stop in a frame of
# the driver's library, Windows' faulting module (crash_reports.crashed_inside_a_gpu_driver reads
# the two lines together; llama.cpp#8828, a SIGSEGV in amdvlk64.dll).
_e("gpu.driver-crash-report", "gpu-error", 40, _S,
   "gdb's stop report (`received signal SIGSEGV`, then the frame's ` from <library>`); Windows Error "
   "Reporting and the Application log's event 1000 (`Faulting module name`, `Sig[3].Value`); the GPU "
   "vendors' driver library names",
   "the process crashed inside the GPU vendor's driver or runtime library",
   r"(?!)")
_e("gpu.device-lost", "gpu-error", 41, _S,
   f"ggml/src/ggml-vulkan/ggml-vulkan.cpp, {_B} (`device lost`); VK_ERROR_DEVICE_LOST (-4); "
   "Level Zero ZE_RESULT_ERROR_DEVICE_LOST",
   "the GPU stopped answering (a reset, a hang, or the echo of an allocation failure)",
   r"ggml_vulkan: device lost", r"ErrorDeviceLost", r"VK_ERROR_DEVICE_LOST", r"ZE_RESULT_ERROR_DEVICE_LOST",
   r"GPU (has )?(hung|fallen off the bus)", r"NVRM: Xid",
   # Mesa's amdgpu winsys (radv and radeonsi) after a GPU reset: the context was lost
   r"The CS has been cancelled because the context is lost",
   # ggml-vulkan.cpp (b11434) after a device loss, from VK_EXT_device_fault
   r"ggml_vulkan: device fault on",
   # ggml-webgpu.cpp (b11434) DeviceLostCallback: `ggml_webgpu: Device lost! Reason: %d, Message: %s`
   r"ggml_webgpu: Device lost!",
   # Mesa's Venus driver (src/virtio/vulkan/vn_ring.c), Vulkan forwarded to the host's GPU in a
   # VM (krunkit, crosvm): the host side set the ring's fatal bit, and the driver aborts
   r"vn_ring_submit abort on fatal")
_e("gpu.error", "gpu-error", 40, _S,
   f"ggml-cuda/common.cuh CUDA_CHECK (`CUDA error`), ggml-vulkan (vk::), ggml-metal "
   f"(`command buffer %d failed with status %d`), ggml-sycl (`Exception caught at file`), ggml-cann "
   f"(`CANN error`), ggml-opencl CL_CHECK, ggml-webgpu and ggml-hexagon, {_B}",
   # (CANN: ggml-cann.cpp ggml_cann_error, b11434, `CANN error: %s` then GGML_ABORT("CANN error"))
   "the GPU runtime reported an error", r"\b(CUDA|ROCm|MUSA|HIP|CANN) error\b", r"vk::\w+.*Error",
   r"ggml_metal_synchronize: error", r"Exception caught at file", r"an illegal memory access was encountered",
   # ggml-vulkan.cpp (b11434): the driver could not build a shader or pipeline
   r"ggml_vulkan: (compute pipeline|pipeline layout|shader module) creation failed for",
   r"unspecified launch failure", r"command buffer \d+ failed with status \d+",
   r"backend is in error state from a previous command buffer failure",
   # ROCr (rocr-runtime core/runtime/runtime.cpp): the GPU faulted on an address, and the HSA
   # status names of a queue aborted by a fault (hsa.h, hsa_ext_amd.h)
   r"Memory access fault by GPU node-\d+",
   # ... and its memory-error event (`Memory critical error by agent node-%d (Agent handle: %p) on
   # address %p. Reason: Memory in use.`): ROCr could not register or release memory for an agent
   # (a container denied mmap of /dev/kfd by SELinux, an APU's shared memory, a teardown with
   # memory still mapped; llama.cpp#14999). A runtime fault, not memory running out; after a
   # ROCm error it is that error's echo, which the order keeps (ollama#11123, ramalama#732)
   r"Memory critical error by agent node-\d+",
   # the kernel's amdgpu driver (drivers/gpu/drm/amd/amdgpu gmc_v9_0.c, gmc_v10_0.c, gmc_v11_0.c:
   # `[%s] page fault (src_id:%u ring:%u vmid:%u pasid:%u)`; gfxhub_*.c: the L2 protection fault
   # status): the GPU faulted on an address the process's page tables do not allow
   r"amdgpu: \[(gfxhub|mmhub)\w*\] page fault", r"GCVM_L2_PROTECTION_FAULT_STATUS",
   r"HSA_STATUS_ERROR_(MEMORY_APERTURE_VIOLATION|MEMORY_FAULT|EXCEPTION|ILLEGAL_INSTRUCTION)\b",
   # ggml-opencl.cpp CL_CHECK (CLBlast's of 2023, which exits, to b11434's, which asserts next:
   # `ggml_opencl: <call> error <cl_int> at <file>:<line>`): the OpenCL runtime refused a call
   r"ggml_opencl: \S.* error -?\d+ at \S+:\d+\s*$",
   # ggml-webgpu.cpp (b11434): the device's error callback and a failed wait aborting
   # (`ggml_webgpu: Device error! Reason: %d`, `... failed with status %d: %s`)
   r"ggml_webgpu: (Device error! Reason|\S.* failed with status -?\d+)",
   # ggml-hexagon.cpp (b11434): Qualcomm's DSP session reporting an error on a sync or a copy
   r"ggml-hex: \S+ [\w-]+ failed : dsp-error\b",
   r"kIOGPUCommandBufferCallbackError(Timeout|PageFault|InvalidResource)", r"SYCL error:",
   # ggml-cuda.cu's CUDA_CHECK before 2024 printed `CUDA error %d at %s:%d: %s`; a quoted
   # tail keeps only `ggml-cuda.cu:<line>: <cudaGetErrorString>` (llama.cpp#3930)
   r"ggml-cuda(\.cu|/\w+\.cuh?):\d+: (" + "|".join(
       re.escape(t) for t, k in CUDA_ERROR_STRINGS.items() if k == "gpu-error") + r")\b")
# Ollama's runner (llama/llama.go ErrKvCacheFull, 0.4 on; kvcache/cache.go in its own engine, 0.6
# on): llama_decode found no KV cache slot for a batch the runner's own cache accounting had
# placed, and after a defrag the runner gives up with `failed to decode batch: could not find a
# kv cache slot`, as a Go panic. The cache was allocated; the runner's bookkeeping of it broke
# (ollama#7930: parallel requests with a prompt truncated to the full context).
_e("ollama.kv-slot-miscount", "assertion-failed", 30, _S,
   "Ollama llama/llama.go and kvcache/cache.go (`could not find a kv cache slot`), runner.go's "
   "`failed to decode batch: %w`",
   "the runner placed a batch its KV cache had no slot for: its own accounting failed",
   r"failed to decode batch: could not find a kv cache slot")
# What ggml_abort prints after `__FILE__`: `:<line>: <message>`; not a compiler's `warning:`/
# `error:`/`note:` after a line number, nor the linker's words about a symbol.
_ABORT_AFTER_FILE = r":\d+: (?!(warning|error|note):|undefined reference to|multiple definition of)\S"
_e("abort.assert", "assertion-failed", 30, _S,
   f"ggml/src/ggml.c ggml_abort (`GGML_ASSERT(%s) failed`, `GGML_ABORT`), {_B}; older "
   "`GGML_ASSERT: file:line: cond`; the C and C++ runtimes",
   # (a compiler's `static_assert failed`, as Metal's runtime compiler prints it for the shaders,
   # is a build that did not compile, not an engine that stopped on a check)
   "the engine stopped on an internal check", r"GGML_ASSERT", r"GGML_ABORT", r"(?<!static_)assert(ion)? failed",
   r"Assertion .{1,200} failed", r"terminate called", r"failed assertion `",
   # the Microsoft C runtime's abort(): `R6010 - abort() has been called` / debug-build dialog
   r"abort\(\) has been called",
   # Go's runtime (runtime/panic.go printpanics: `panic: <value>`, then `goroutine N [running]:`)
   # for a panic the program raised on its own check (Ollama's ollamarunner: `caching disabled
   # but unable to fit entire input in a batch`). Not the runtime's `panic: runtime error: …` (a
   # nil pointer, an index: a crash), nor a panic relaying an error it was handed (`panic:
   # unable to load model: …`, `failed to decode batch: …`), which says nothing of which cause
   r"^panic: (?!runtime error:|unable to |failed to |could not |cannot |error)\S",
   # llama.cpp's own assert macro before GGML_ASSERT took over (llama-util.h, spring 2023:
   # `LLAMA_ASSERT: %s:%d: %s`), and whisper.cpp's twin in the bindings that bundle both
   r"\b(LLAMA|WHISPER)_ASSERT: \S+:\d+: ",
   # the C libraries' heap checks (glibc malloc.c malloc_printerr: `free(): invalid pointer`,
   # `double free or corruption (…)`, `munmap_chunk(): invalid pointer`, `corrupted size vs.
   # prev_size`; macOS libmalloc: `pointer being freed was not allocated`, `incorrect checksum for
   # freed object`): the process freed memory it did not own and the library aborted it. The
   # engine's own bookkeeping broke (llamafile#206 and #191: a free() in a logging function); after
   # a failed allocation the allocation's line is in the log too and outranks this one
   r"\bfree\(\): invalid (pointer|size)", r"\bdouble free or corruption\b",
   r"\bmunmap_chunk\(\): invalid pointer", r"\bcorrupted size vs\. prev_size",
   r"malloc: \*\*\* error for object 0x[0-9a-fA-F]+: (pointer being freed was not allocated"
   r"|incorrect checksum for freed object)",
   # a backtrace inside the sampler (gdb's `#5 0x… in llama_sampler_softmax_impl(…)`, or common's
   # `common_sampler_sample`): it runs on the CPU over logits the decode already produced and
   # allocates nothing of size, so an abort there is one of its own checks (llama.cpp#13461:
   # `GGML_ASSERT(cur_p->size > 0)`, an empty candidate list after an engine change)
   r"#\d+\s+0x[0-9a-fA-F]+ in (llama_sampler_\w+|common_sampler_sample\w*)\b",
   # ggml-backend.cpp ggml_backend_sched_backend_id_from_cur (b11434 line 1081, GGML_ABORT):
   # a tensor placed in a buffer whose backend has no kernel for its op (a fork's cache type
   # on Vulkan, llama.cpp#13684). Quoted without the `file:line:` the abort prints, it is still
   # this abort; koboldcpp prints the same words as a warning it carries on past (`Caution: …`).
   r"(?<!Caution: )pre-allocated tensor \(.+\) in a buffer \(.+\) that cannot run the operation \(\w+\)",
   # ggml.c ggml_new_object (2023 to b11434): the context's metadata pool, sized by the engine
   # for the graph it builds, is too small: a miscount in the engine, not the machine's memory
   # (the pool was allocated; an allocation that failed is `ctx->mem_buffer != NULL`). Its 2023
   # twin, ggml_new_tensor_impl's scratch buffer (ggml.c until ggml-alloc replaced scratch
   # buffers; koboldcpp's ggml.c and otherarch/ggml_v3.c keep it), prints `not enough space in
   # the scratch memory pool (needed %zu, available %zu)`, then `assert(false)` (compiled out
   # in a release) and returns NULL, so the crash that follows is this miscount's (a paste
   # may cut the line after `scratch memory`, koboldcpp#50)
   r"not enough space in the (context's memory pool|scratch memory\b)",
   # ggml.c ggml_abort prints `<__FILE__>:<__LINE__>: <message>` for every GGML_ABORT in the
   # tree (b11434: `fatal error`, `unsupported op`, `CUDA error` ...); a message no other entry
   # names is still an abort. The path runs through the tree's own folders and ends in a
   # source suffix; a compiler's `file:line:col:` and its `warning:`/`error:`/`note:`, and the
   # linker's `file:line: undefined reference to …` / `multiple definition of …`, are not aborts.
   r"(^|[\s\"'(/\\])(ggml|src|common|tools|examples|llama\.cpp)[/\\][\w./\\-]*\.(c|cc|cpp|cu|cuh|m|mm|h|hpp)"
   + _ABORT_AFTER_FILE,
   # the same abort from a flat tree whose compiler was handed bare file names: Ollama 0.4-0.5
   # vendored llama.cpp and ggml into one folder (llama/) that cgo compiles, so __FILE__ is
   # `llama.cpp`, `ggml.c`, `ggml-cuda.cu` … (v0.5.7 llama/llama.cpp:11968 `GGML_ABORT("The current
   # context does not support K-shift")` prints `llama.cpp:11968: The current context …`)
   r"(^|[\s\"'(])(llama|ggml|common|sampling|unicode|clip|llava|mllama|sgemm|amx|gguf)([-_][\w-]+)?"
   r"\.(c|cc|cpp|cu|cuh|m|mm)" + _ABORT_AFTER_FILE)


ENTRIES = _wordings.entries()
