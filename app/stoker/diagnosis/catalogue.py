"""The catalogue of failure wordings: what engines, GPU runtimes, loaders, kernels and wrappers print.

Each entry is one wording (or a family of wordings of one message across releases) with
the kind of failure it proves, where it comes from (the file and release of llama.cpp/ggml
that prints it, the runtime's error name, or the wrapper's project), what it proves, a
strength, and a rank in the root-cause order (stoker/diagnosis/evidence.py): a higher rank
is nearer the root cause, so an allocation failure (80) outranks the GGML_ABORT that follows
it (30). The catalogue was written from the sources, not from users' threads, so that a
wording no thread showed yet is still read: b11434's tree (ggml/src, src, common, tools),
older wordings from llama.cpp's history as the rules before this catalogue recorded them,
the runtimes' error enums (cudaError_t, hipError_t, VkResult, MTLCommandBufferError,
SYCL/Level Zero), glibc's ld.so, dyld, the Windows loader (NTSTATUS), the Linux kernel,
systemd and docker, and the wrappers' own Go/Python/JS sources (Ollama, LM Studio, Jan,
koboldcpp, llama-swap, llama-cpp-python, text-generation-webui, LocalAI).

Kinds are those of classify.KINDS, plus two the verdict resolves from the rest of the log:
"gpu-oom" (ggml-cuda's words, spoken by CUDA and HIP builds alike: the ROCm signs decide)
and "device-oom" (an allocation whose line names no device: the buffer or backend decides).

Pure data: no files, no clock, nothing run. Frozen before each fresh benchmark batch at the
commit bench/diagnose.py FRESH_BATCHES names; a change after a batch's score spends that
batch, and the README says so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # typeshed stubs these modules under their old public names only
    import sre_constants as _sre
    import sre_parse as _sre_parse
else:
    import re._constants as _sre  # the parsed-pattern opcodes, to find each pattern's literals
    import re._parser as _sre_parse


class Strength(Enum):
    """How much one matching line proves on its own."""

    DECISIVE = 3  # the line names the cause itself (an OOM, a missing library, a bad argument)
    STRONG = 2  # names a cause, but the same words also follow other causes (a CUDA error)
    WEAK = 1  # a sign only (an abort, a generic failure): never decides a kind alone


@dataclass(frozen=True)
class Entry:
    name: str  # stable id; the verdict and `stoker diagnose --json` cite it
    kind: str
    rank: int  # root-cause order: higher is nearer the cause
    strength: Strength
    source: str  # where the wording comes from
    proves: str  # what the line shows
    pattern: re.Pattern[str]


_D, _S, _W = Strength.DECISIVE, Strength.STRONG, Strength.WEAK
_ENTRIES: list[Entry] = []


def _e(name: str, kind: str, rank: int, strength: Strength, source: str, proves: str,
       *patterns: str, case: bool = False) -> None:
    flags = 0 if case else re.IGNORECASE
    _ENTRIES.append(Entry(name, kind, rank, strength, source, proves,
                          re.compile("|".join(f"(?:{p})" for p in patterns), flags)))


_B = "llama.cpp b11434"
_OLD = "llama.cpp before b11434 (history)"

# ----------------------------------------------------------------- GPU runtime tables
# The error names and numbers each GPU runtime reports, with the kind they prove. ggml's
# backends print them as `CUDA error: <cudaGetErrorString>` (ggml-cuda/common.cuh), with
# `ROCm error:` for HIP builds (vendors/hip.h), `ggml_vulkan: ... vk::<call>: Error<Name>`,
# Metal's `command buffer N failed with status S` and `error: <localizedDescription>`, and
# SYCL's `Exception caught at file ... <what>` with Level Zero's `ZE_RESULT_*`.
CUDA_ERRORS = {  # cudaError_t (CUDA 12 runtime API), name -> (number, kind)
    "cudaErrorMemoryAllocation": (2, "gpu-oom"),
    "cudaErrorInitializationError": (3, "gpu-error"),
    "cudaErrorInsufficientDriver": (35, "cuda-driver-too-old"),
    "cudaErrorNoDevice": (100, "gpu-unused"),
    "cudaErrorInvalidDevice": (101, "bad-argument"),
    "cudaErrorStubLibrary": (34, "missing-library"),
    "cudaErrorNoKernelImageForDevice": (209, "no-kernel-image"),
    "cudaErrorInvalidDeviceFunction": (98, "no-kernel-image"),
    "cudaErrorUnsupportedPtxVersion": (222, "cuda-driver-too-old"),
    "cudaErrorJitCompilerNotFound": (223, "missing-library"),
    "cudaErrorUnsupportedExecAffinity": (224, "gpu-error"),
    "cudaErrorSystemDriverMismatch": (803, "gpu-unused"),
    "cudaErrorCompatNotSupportedOnDevice": (804, "cuda-driver-too-old"),
    "cudaErrorIllegalAddress": (700, "gpu-error"),
    "cudaErrorLaunchFailure": (719, "gpu-error"),
    "cudaErrorECCUncorrectable": (214, "gpu-error"),
    "cudaErrorDevicesUnavailable": (46, "gpu-error"),
    "cudaErrorLaunchTimeout": (702, "gpu-error"),
    "cudaErrorIllegalInstruction": (715, "gpu-error"),
    "cudaErrorUnknown": (999, "gpu-error"),
    "cudaErrorInvalidValue": (1, "gpu-error"),
    "cudaErrorInvalidResourceHandle": (400, "gpu-error"),
    "cudaErrorLaunchOutOfResources": (701, "gpu-error"),
    "cudaErrorAssert": (710, "gpu-error"),
    "cudaErrorHardwareStackError": (714, "gpu-error"),
    "cudaErrorMisalignedAddress": (716, "gpu-error"),
    "cudaErrorNotSupported": (801, "gpu-error"),
    "cudaErrorCallRequiresNewerDriver": (36, "cuda-driver-too-old"),
    "cudaErrorOperatingSystem": (304, "gpu-error"),
}
CUDA_DRIVER_ERRORS = {  # CUresult (driver API, ggml-cuda's VMM pool: CU_CHECK)
    "CUDA_ERROR_OUT_OF_MEMORY": (2, "gpu-oom"),
    "CUDA_ERROR_NO_DEVICE": (100, "gpu-unused"),
    "CUDA_ERROR_INSUFFICIENT_DRIVER": (35, "cuda-driver-too-old"),
    "CUDA_ERROR_UNSUPPORTED_PTX_VERSION": (222, "cuda-driver-too-old"),
    "CUDA_ERROR_NO_BINARY_FOR_GPU": (209, "no-kernel-image"),
    "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH": (803, "gpu-unused"),
    "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE": (804, "cuda-driver-too-old"),
    "CUDA_ERROR_ILLEGAL_ADDRESS": (700, "gpu-error"),
    "CUDA_ERROR_LAUNCH_FAILED": (719, "gpu-error"),
}
CUDA_ERROR_STRINGS = {  # cudaGetErrorString texts ggml prints after `CUDA error: `
    "out of memory": "gpu-oom",
    "CUDA driver version is insufficient for CUDA runtime version": "cuda-driver-too-old",
    "the provided PTX was compiled with an unsupported toolchain": "cuda-driver-too-old",
    "system has unsupported display driver / cuda driver combination": "gpu-unused",
    "forward compatibility was attempted on non supported HW": "cuda-driver-too-old",
    "no kernel image is available for execution on the device": "no-kernel-image",
    "invalid device function": "no-kernel-image",
    "no CUDA-capable device is detected": "gpu-unused",
    "CUDA driver is a stub library": "missing-library",
    "an illegal memory access was encountered": "gpu-error",
    "unspecified launch failure": "gpu-error",
    "uncorrectable ECC error encountered": "gpu-error",
    "invalid argument": "gpu-error",  # cudaErrorInvalidValue (1)
    "invalid resource handle": "gpu-error",
    "too many resources requested for launch": "gpu-error",
    "device-side assert triggered": "gpu-error",
    "misaligned address": "gpu-error",
    "an illegal instruction was encountered": "gpu-error",
    "operation not supported": "gpu-error",
    "the launch timed out and was terminated": "gpu-error",
    "all CUDA-capable devices are busy or unavailable": "gpu-error",
    # cudaErrorDevicesUnavailable (46) as CUDA 11/12 words it (the line above is CUDA 10's)
    "CUDA-capable device(s) is/are busy or unavailable": "gpu-error",
    "initialization error": "gpu-error",  # cudaErrorInitializationError (3)
    "OS call failed or operation not supported on this OS": "gpu-error",  # cudaErrorOperatingSystem (304)
    "API call is not supported in the installed CUDA driver": "cuda-driver-too-old",  # (36)
}
HIP_ERRORS = {  # hipError_t (ROCm 6), name -> (number, kind)
    "hipErrorOutOfMemory": (2, "rocm-oom"),
    "hipErrorNoDevice": (100, "gpu-unused"),
    "hipErrorInvalidDevice": (101, "bad-argument"),
    "hipErrorNoBinaryForGpu": (209, "no-kernel-image"),
    "hipErrorInvalidDeviceFunction": (98, "no-kernel-image"),
    "hipErrorSharedObjectInitFailed": (303, "no-kernel-image"),
    "hipErrorInsufficientDriver": (35, "gpu-error"),
    "hipErrorIllegalAddress": (700, "gpu-error"),
    "hipErrorLaunchFailure": (719, "gpu-error"),
    "hipErrorUnknown": (999, "gpu-error"),
}
VK_RESULTS = {  # VkResult, name -> (number, kind); vulkan.hpp names them Error<CamelCase>
    "VK_ERROR_OUT_OF_HOST_MEMORY": (-1, "vulkan-oom"),
    "VK_ERROR_OUT_OF_DEVICE_MEMORY": (-2, "vulkan-oom"),
    "VK_ERROR_INITIALIZATION_FAILED": (-3, "gpu-error"),
    "VK_ERROR_DEVICE_LOST": (-4, "gpu-error"),
    "VK_ERROR_MEMORY_MAP_FAILED": (-5, "vulkan-oom"),
    "VK_ERROR_INCOMPATIBLE_DRIVER": (-9, "gpu-unused"),
    "VK_ERROR_TOO_MANY_OBJECTS": (-10, "gpu-error"),
    "VK_ERROR_FRAGMENTED_POOL": (-12, "vulkan-oom"),
    "VK_ERROR_OUT_OF_POOL_MEMORY": (-1000069000, "vulkan-oom"),
}
METAL_ERRORS = {  # MTLCommandBufferError (IOGPU callback names) -> kind
    "kIOGPUCommandBufferCallbackErrorOutOfMemory": "metal-oom",  # MTLCommandBufferErrorOutOfMemory = 8
    "MTLCommandBufferErrorOutOfMemory": "metal-oom",
    "kIOGPUCommandBufferCallbackErrorTimeout": "gpu-error",  # = 2
    "kIOGPUCommandBufferCallbackErrorPageFault": "gpu-error",  # = 3
    "kIOGPUCommandBufferCallbackErrorInvalidResource": "gpu-error",  # = 9
    "kIOGPUCommandBufferCallbackErrorImpactingInteractivity": "gpu-error",
    "kIOGPUCommandBufferCallbackErrorSubmissionsIgnored": "gpu-error",
}
SYCL_ERRORS = {  # Level Zero / SYCL runtime names ggml-sycl surfaces
    "ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY": "device-oom",
    "ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY": "host-oom",
    "UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY": "device-oom",
    "PI_ERROR_OUT_OF_RESOURCES": "device-oom",
    "ZE_RESULT_ERROR_DEVICE_LOST": "gpu-error",
    "PI_ERROR_DEVICE_NOT_FOUND": "gpu-unused",
    # OpenCL's CL_INVALID_KERNEL_NAME (-46) under SYCL's two names for it (sycl.no-kernel-named)
    "PI_ERROR_INVALID_KERNEL_NAME": "no-kernel-image",
    "UR_RESULT_ERROR_INVALID_KERNEL_NAME": "no-kernel-image",
}

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
   r"ggml-cuda was compiled without support for the current GPU architecture")
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
# (classify.py _left_open), since only the same load with VMM off tells them apart. It ranks
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

# ----------------------------------------------------------------------------- loaders

# glibc's version nodes (elf/Versions, sysdeps/*/Versions): its releases' (GLIBC_2.xx) and its
# ABI markers, empty nodes named for a loader feature that a linker adds as a dependency so a
# libc without the feature refuses the file at load instead of failing at random:
# GLIBC_ABI_DT_RELR (elf/Versions, 57292f5, glibc 2.36: DT_RELR relocations, `ld -z
# pack-relative-relocs`), GLIBC_ABI_DT_X86_64_PLT (sysdeps/x86_64/Versions, 399384e, BZ #33212:
# `ld -z mark-plt`), GLIBC_ABI_GNU2_TLS (sysdeps/x86/Versions, 9df8fa3, BZ #33129: the working
# GNU2 TLS run-time) and i386's GLIBC_ABI_GNU_TLS (ed1b7a5, BZ #33221); the last three were
# added after 2.42 (2025, on the way to 2.43) and backported to the release branches (2.33 to
# 2.42 for the PLT marker, 2.38 to 2.42 for the TLS ones), so a marker names no release: it
# says, as a GLIBC_2.xx does, that the libc lacking it is older than the glibc the requiring
# file was linked on. Which libc that is decides the kind, as for a release.
_GLIBC_NODE = r"GLIBC_(?:[\d.]+|ABI_[A-Z0-9_]+)"
_QUOTED = r"[`'‘]?{}[`'’]?"
_SYSTEM_DIR = r"/(?:usr/)?lib(?:32|64)?/"
# The same multiarch directory with its leading slash lost in a paste (`lib/x86_64-linux-gnu/
# libc.so.6: version …` at the start of a line, gpt4all#1438): a Debian triplet directory is the
# system's, not a bundle's.
_SYSTEM_DIR_SLASH_LOST = r"(?:usr/)?lib/[a-z0-9_]+-linux-gnu\w*/"
# glibc's own libraries: one glibc build installs them and libc.so.6 together
_GLIBC_OWN = (r"(?:libc|libm|libmvec|libpthread|libdl|librt|libresolv|libutil|libanl|libnsl"
              r"|libBrokenLocale)\.so\.\d+|ld-linux[\w.-]*?\.so\.\d+")
# `version `GLIBC_x' not found (required by `: the two glibc-mixing entries below differ only
# in which side of it is the system's
_GLIBC_MISSING_FOR = r"version " + _QUOTED.format(_GLIBC_NODE) + r" not found \(required by "
_e("ld.versioned-symbol", "system-too-old", 77, _D,
   "glibc ld.so (dl-version.c): `version `GLIBC_2.xx' not found (required by ...)`, and glibc's "
   "ABI markers (`GLIBC_ABI_DT_RELR`, 2.36; `GLIBC_ABI_DT_X86_64_PLT`, `GLIBC_ABI_GNU2_TLS`, "
   "2025, backported) in the same words",
   "the system's C or C++ runtime is older than the build needs",
   r"version " + _QUOTED.format(rf"(?:{_GLIBC_NODE}|GLIBCXX_[\d.]+|CXXABI_[\d.]+)") + r" not found")
_e("ld.versioned-symbol-bundled", "stale-library", 78, _D,
   "glibc ld.so (dl-version.c) `<library>: version `X' not found`: the library named is the one "
   "lacking the version; outside /lib and /usr/lib it is a bundled or environment copy (conda, "
   "a venv, an app folder) found before the system's",
   "an older copy of the C/C++ runtime shipped beside the program shadows the system's, which "
   "may well be new enough: the copy is stale, the system is not too old",
   rf"(?<![\w/.~-])(?!{_SYSTEM_DIR}|{_SYSTEM_DIR_SLASH_LOST})(?:[A-Za-z]:)?[\w./~+-]*/lib(?:stdc\+\+|gcc_s|c|m|pthread|dl)"
   r"\.so\.\d+: version " + _QUOTED.format(rf"(?:{_GLIBC_NODE}|GLIBCXX_[\d.]+|CXXABI_[\d.]+|GCC_[\d.]+)")
   + " not found")
# LocalAI#9093 (spent batch 21): the cuda13 backend's bundled libc.so.6 lacked
# GLIBC_ABI_DT_X86_64_PLT, which Debian sid's own libpthread.so.0 needs; fixed by bundling
# libpthread, libdl and librt too (LocalAI#9099). A system's glibc libraries and its libc come
# from one build, so one of them requiring a version the libc loaded lacks proves another libc
# was loaded beside them, whatever path (if any) the line gives the libc.
_e("ld.glibc-own-requirer", "stale-library", 79, _D,
   "glibc ld.so (dl-version.c) `version `GLIBC_x' not found (required by /usr/lib/.../libpthread.so.0)`: "
   "the file requiring the version is one of glibc's own libraries in /lib or /usr/lib "
   "(LocalAI#9093, fixed by LocalAI#9099)",
   "the system's own glibc library needs a version the libc loaded beside it lacks: that libc is "
   "another (bundled, older) glibc's, mixed with the system's; the system is not too old",
   _GLIBC_MISSING_FOR + rf"{_SYSTEM_DIR}(?:[\w.+-]+/)*(?:{_GLIBC_OWN})\)")
# The reverse mix: a bundle carries part of glibc (its libpthread, libdl...) and the system's
# libc lacks a version it needs. The system is older than the bundle's glibc, or the bundle
# lacks the libc (and ld.so) that go with its parts; the line cannot tell, so classify's
# _left_open leaves it open between system-too-old and stale-library.
_e("ld.glibc-part-bundled", "system-too-old", 79, _D,
   "glibc ld.so (dl-version.c) `/lib/.../libc.so.6: version `GLIBC_x' not found (required by "
   "<glibc's own library outside /lib and /usr/lib>)`",
   "a bundled piece of a newer glibc needs a version the system's libc lacks: the system is "
   "older than the bundle, or the bundle is incomplete; left open",
   rf"(?<![\w/.~-]){_SYSTEM_DIR}(?:[\w.+-]+/)*libc\.so\.6: " + _GLIBC_MISSING_FOR
   + rf"(?!{_SYSTEM_DIR})[^)]*/(?:{_GLIBC_OWN})\)")
# A library outside the system's directories lacking a version that a library of the system's
# own needs (`/tmp/.mount_Jan-x/usr/lib/libcrypto.so.3: version `OPENSSL_3.3.0' not found
# (required by /lib64/libssl.so.3)`, janhq/jan#7831): the system's library was built against the
# system's copy, which the bundle's older copy (an AppImage mount, an app or conda folder on the
# library path) shadows. The system is not too old and nothing is missing: the copy is stale. Ranked
# above the two entries below, which read the same words without knowing who required what; the C
# and C++ runtimes' own nodes (GLIBC_, GLIBCXX_, CXXABI_, GCC_) are the glibc entries' above.
_e("ld.bundled-copy-under-system-requirer", "stale-library", 79, _D,
   "glibc ld.so (dl-version.c) `<library>: version `<node>' not found (required by <library in /lib "
   "or /usr/lib>)` where the library lacking the node is outside /lib and /usr/lib",
   "a bundled copy of a library shadows the system's, whose own libraries need the newer one",
   rf"(?<![\w/.~-])(?!{_SYSTEM_DIR}|{_SYSTEM_DIR_SLASH_LOST})(?:[A-Za-z]:)?[\w./~+-]*/lib[\w+-]*\.so[\w.]*: "
   rf"version [`'‘](?!GLIBC|GLIBCXX|CXXABI|GCC_)[^`'’]+[`'’] not found \(required by {_SYSTEM_DIR}[^)]*\)")
# The same message with the file's own name as the missing node (`libcublas.so.11: version
# `libcublas.so.11' not found`): the library the loader opened has the right name and major, yet
# is not the build the program was linked against (an older point release, a stub, a copy from
# another toolkit), so it shadows the right one. Ranked above the entry below, which reads the
# same line when the node names another major: then that major is what is missing.
_e("ld.library-version-same-name", "stale-library", 78, _D,
   "glibc ld.so (dl-version.c): `<file>: version `<node>' not found (required by …)` where the "
   "node is the file's own soname",
   "a library with the right name was found but is another build of it (it lacks its own version node)",
   r"(?:^|[/\\\s])(lib[\w+-]+\.so\.\d+)[\w.]*: version [`'‘]\1[`'’] not found")
_e("ld.library-version", "missing-library", 77, _D,
   "glibc ld.so (dl-version.c) for a library's own version node (libcudart.so.12, LIBCUDA)",
   "the library found is another major version than the one the build needs: the right one is missing",
   r"version [`'‘]?(?!GLIBC|GLIBCXX|CXXABI)(lib\w[\w.+-]*|[A-Z][A-Z0-9_]+)[\w.]*[`'’]? not found \(required by")
# The Windows loader's STATUS_ENTRYPOINT_NOT_FOUND message (`The procedure entry point %s could not
# be located in the dynamic link library %s`, which users also retell in their own words) naming
# one of Windows' own DLLs: a function this Windows does not have yet (gpt4all#2223: Windows 7's
# user32.dll without SkipPointerFrameMessages, Windows 8's). Another DLL there is another
# build's (ld.stale-symbol).
_WINDOWS_OWN_DLL = (r"(?:kernel32|kernelbase|user32|gdi32|advapi32|ntdll|shell32|shlwapi|ole32|oleaut32"
                    r"|combase|ws2_32|bcrypt|bcryptprimitives|crypt32|dxgi|d3d11|d3d12|dwmapi|shcore"
                    r"|api-ms-win-[\w-]+)\.dll")
_e("win.entry-point-in-windows", "system-too-old", 77, _D,
   "the Windows loader (STATUS_ENTRYPOINT_NOT_FOUND 0xC0000139 and its dialog text)",
   "a function the program needs is missing from Windows' own DLL: this Windows is older than the "
   "program supports",
   r"entry point\b.{1,160}?\bin (?:the )?dynamic link library \(?\"?(?:[A-Za-z]:)?(?:[^\s\\]*\\)*"
   + _WINDOWS_OWN_DLL)
_e("dyld.system-too-old", "system-too-old", 77, _D, "macOS dyld",
   "a symbol the build expects in macOS's own libraries: an older macOS",
   # (dyld 4, macOS 12 on, quotes the paths: `Expected in: '/System/Library/Frameworks/…'`)
   r"Expected in:?\s*(<[\w-]+>\s*)?'?/usr/lib/", r"Expected in:?\s*(<[\w-]+>\s*)?'?/System/Library/",
   # Accelerate's new LAPACK interface (`$NEWLAPACK`, `$NEWLAPACK$ILP64` symbols, macOS 13.3 on),
   # which ggml's Accelerate build binds to (ACCELERATE_NEW_LAPACK, ACCELERATE_LAPACK_ILP64): only
   # an older macOS lacks them (llama.cpp#9973)
   r"Symbol not found: \(?_\w+\$NEWLAPACK\b",
   # symbols only macOS itself provides: libc++'s std::__1 (/usr/lib/libc++.1.dylib) and the
   # Objective-C classes of its frameworks (Metal, Foundation, QuartzCore)
   r"Symbol not found: \(?__Z\w*NSt3__1", r"Symbol not found: \(?_OBJC_CLASS_\$_(MTL|NS|CA)\w+",
   r"built for (newer )?macOS( version)? [\d.]+ which is newer than running OS",
   r"was built for newer macOS version",
   # dyld 2 (ImageLoaderMachO.cpp, macOS 10.14 and before: `load command 0x%08X is unknown`): the
   # binary carries a Mach-O load command newer than this dyld, such as LC_DYLD_CHAINED_FIXUPS
   # (0x80000034) that linkers emit for newer deployment targets; only a newer macOS loads it
   # (nomic-ai/gpt4all PR #1511 raised the wheels' minimum macOS for it)
   r"\(load command 0x[0-9a-fA-F]+ is unknown\)")
# A library of macOS's own that this macOS does not have (`Library not loaded: /usr/lib/…`, `Reason:
# tried: '/usr/lib/…' (no such file)`): nothing installs into /usr/lib or /System/Library but macOS,
# so the build was linked against a newer one (libggml-rpc linked to macOS 26's
# /usr/lib/librdma.dylib, unslothai/unsloth#9843, llama.cpp PR #27815). Its rank over ld.missing's
# makes it the reading. A library a newer macOS dropped would read the same; none is known in the
# corpus or the engines' histories.
_e("dyld.system-library-missing", "system-too-old", 77, _D,
   "macOS dyld `Library not loaded: <path>` for a path under /usr/lib or /System/Library",
   "a library of macOS's own that the build links to is not in this macOS: an older macOS",
   r"Library not loaded:\s*'?/usr/lib/", r"Library not loaded:\s*'?/System/Library/")
_e("dyld.stale-symbol", "stale-library", 76, _D,
   "macOS dyld `Symbol not found: _sym` / `Referenced from:` / `Expected in: <library>`",
   "the library dyld found lacks the symbol: outside macOS's own /usr/lib and /System it is "
   "another build's copy",
   r"Expected in:?\s*(<[\w-]+>\s*)?'?(?!/usr/lib/|/System/)[/@~]\S*\.dylib")
_e("dyld.symbol-missing", "stale-library", 20, _W,
   "macOS dyld `Symbol not found: _sym` and a crash report's `DYLD, [0x4] Symbol missing`",
   "a symbol is missing: the `Expected in:` line says whether from macOS (too old) or from "
   "another build's library; without it, a sign only",
   r"Symbol not found: \(?_", r"DYLD, \[0x4\] Symbol missing")
# src/llama-model-loader.h llama_tensor_weight (2024 to b11434): every tensor the loader weighs
# was made by gguf.cpp from this file's own tensor list, then looked up in that list by the name
# ggml_get_name gives it, so in one build the lookup cannot fail. A tensor with no name at all
# (`tensor '' not found in the model`) is the caller reading ggml's tensor through another ggml
# build's layout: two ggml copies in one program (llama-cpp-rs beside whisper-rs's older ggml,
# llama-cpp-rs#731), not the file.
_e("ggml.tensor-name-empty", "stale-library", 76, _S,
   f"src/llama-model-loader.h llama_tensor_weight, {_B}: `tensor '%s' not found in the model` "
   "with an empty name",
   "the program and the ggml library it loaded disagree on ggml's tensor layout: a ggml from "
   "another build",
   r"tensor '' not found in the model")
# Ollama 0.1.2x-0.1.4x gpu/gpu.go took the first cudart64_*.dll on PATH; NVIDIA PhysX installs
# CUDA 3.0's and 6.5's there (`...\PhysX\Common\cudart64_65.dll`), which cannot drive any card
# of Ollama's time and report compute capability 1.0, so Ollama left a working GPU for the CPU.
# The maintainer's diagnosis in ollama#4008 and #4117: the PhysX runtime answered, remove it from
# PATH. A compute capability of 1.x is that reading, whatever the path: no CUDA runtime of
# Ollama's time drives such a card (silent_fallbacks.py leaves it out of a build's own lack).
_e("ollama.foreign-cudart", "stale-library", 74, _S,
   "Ollama 0.1.2x-0.1.4x gpu/gpu.go (`detected GPUs` library=<cudart>, `CUDA GPU is too old. "
   "Compute Capability detected: 1.0`); ollama#4008, #4117",
   "Ollama's GPU discovery loaded an ancient CUDA runtime from PATH (PhysX's) instead of its own, "
   "which misread the card",
   r"library=\"?[^\"]*PhysX[\\/]+Common[\\/]+cudart64_\w+\.dll",
   r"CUDA GPU is too old\. Compute Capability detected: 1\.\d")
# ggml.c's ggml_get_unary_op (b11434 and every release since the unary ops were folded into
# GGML_OP_UNARY) asserts the op it is handed is GGML_OP_UNARY; every caller in a backend checks
# exactly that first, so in one build it cannot fail. It fails when the backend library and
# ggml-base come from different builds whose `enum ggml_op` numbers differ: a foreign ggml DLL
# or .so loaded in place of the program's own. Strong, not decisive: a bug would read the same.
_e("ggml.op-enum-mismatch", "stale-library", 76, _S,
   f"ggml/src/ggml.c ggml_get_unary_op, {_B}: `GGML_ASSERT(tensor->op == GGML_OP_UNARY)`",
   "ggml's parts disagree on the operation numbers: a ggml library from another build was loaded",
   r"GGML_ASSERT\(tensor->op == GGML_OP_UNARY\)")
_e("ggml.backend-abi", "stale-library", 76, _D,
   f"ggml/src/ggml-backend-reg.cpp load_backend, {_B}: a backend library without "
   "`ggml_backend_init`, or built against another ggml API version",
   "a backend library (libggml-*.so / ggml-*.dll) found on the path is another build's",
   r"failed to find ggml_backend_init in", r"failed to initialize backend from .{0,300}incompatible API version")
# Functions only glibc itself provides, with the release that added each (glibc's own
# Versions files: sysdeps/unix/sysv/linux, stdlib, string, malloc). A library that lacks one of
# these at load was linked on a newer glibc than this system's: glibc 2.17 (CentOS 7) has no
# getcpu (2.29), gettid (2.30) or close_range (2.34). ld.so then says `undefined symbol: getcpu`
# (no version node when the reference carries none), the same words as a libllama/ggml of
# another build missing one of its own symbols; only the symbol's owner tells the two apart
# (koboldcpp#705, spent batch 16: koboldcpp 1.58 on CentOS 7). Only names added after 2.17 are
# listed: older ones are in every glibc a build runs on, so missing them means something else.
GLIBC_ONLY_SYMBOLS = {
    "__cxa_thread_atexit_impl": "2.18",
    "getrandom": "2.25", "getentropy": "2.25", "explicit_bzero": "2.25",
    "strfromd": "2.25", "strfromf": "2.25", "strfroml": "2.25",
    "reallocarray": "2.26",
    "memfd_create": "2.27", "mlock2": "2.27", "pkey_alloc": "2.27", "pkey_free": "2.27",
    "pkey_set": "2.27", "pkey_get": "2.27", "pkey_mprotect": "2.27",
    "getcpu": "2.29",
    "gettid": "2.30", "tgkill": "2.30", "getdents64": "2.30",
    "sigdescr_np": "2.32", "sigabbrev_np": "2.32", "strerrordesc_np": "2.32", "strerrorname_np": "2.32",
    "mallinfo2": "2.33",
    "close_range": "2.34",
    "__memcmpeq": "2.35",
    "arc4random": "2.36", "arc4random_buf": "2.36", "arc4random_uniform": "2.36",
    "strlcpy": "2.38", "strlcat": "2.38",
    "__isoc23_strtol": "2.38", "__isoc23_strtoll": "2.38", "__isoc23_strtoul": "2.38",
    "__isoc23_strtoull": "2.38", "__isoc23_strtoimax": "2.38", "__isoc23_strtoumax": "2.38",
}
_e("ld.glibc-symbol-undefined", "system-too-old", 77, _D,
   "glibc ld.so (dl-lookup.c) `undefined symbol: %s` for a function glibc itself added after 2.17 "
   "(GLIBC_ONLY_SYMBOLS, from glibc's Versions files)",
   "the library was built against a newer glibc than the system's: the system is too old, no "
   "library of another build is to blame",
   r"undefined symbol: (?:" + "|".join(re.escape(s) for s in sorted(GLIBC_ONLY_SYMBOLS, key=len, reverse=True))
   + r")(?!\w)", case=True)
# Inside WSL 2 the NVIDIA libraries are WSL's own, under /usr/lib/wsl/lib (libcuda.so.1,
# libnvidia-ml.so.1, passed through from the Windows driver). A Linux driver package installed in
# the distribution adds libcuda.so.<version> and libnvidia-ml.so.<version> under /usr/lib, which
# are found first and fail there (NVML error 9, CUDA error 100 `no CUDA-capable device`): NVIDIA's
# CUDA on WSL guide says never to install one. A line listing such a versioned library beside
# WSL's path (Ollama gpu.go's `Discovered GPU libraries: [...]`, ollama#1940) shows the shadowing.
_e("wsl.linux-driver-libraries", "stale-library", 72, _S,
   "NVIDIA CUDA on WSL User Guide (a Linux display driver must not be installed inside WSL 2); "
   "Ollama gpu/gpu.go 0.1.x `Discovered GPU libraries: [...]`",
   "a Linux NVIDIA driver's libraries installed inside WSL 2 are found before WSL's own and cannot "
   "reach the GPU: remove the distribution's NVIDIA driver packages and use /usr/lib/wsl/lib",
   r"/usr/lib/[\w-]*/?lib(?:nvidia-ml|cuda)\.so\.\d{3}\.\d+\S*.*?/usr/lib/wsl/(?:lib|drivers)/",
   r"/usr/lib/wsl/(?:lib|drivers)/\S*.*?/usr/lib/[\w-]*/?lib(?:nvidia-ml|cuda)\.so\.\d{3}\.\d+")
_e("ld.stale-symbol", "stale-library", 76, _D,
   "glibc ld.so `symbol lookup error`/`undefined symbol`; dyld `Symbol not found`; Windows "
   "STATUS_ENTRYPOINT_NOT_FOUND 0xC0000139 / ERROR_PROC_NOT_FOUND 127, STATUS_INVALID_IMAGE_FORMAT 0xC000007B",
   "a library of the same name from another build (or another architecture) shadows the build's own",
   r"symbol lookup error", r"undefined symbol", r"could not be located in the dynamic link library",
   r"wrong ELF class", r"\[WinError 193\]", r"is not a valid Win32 application",
   r"\[WinError 127\]", r"The specified procedure could not be found", r"incompatible architecture \(have",
   r"STATUS_ENTRYPOINT_NOT_FOUND", r"STATUS_INVALID_IMAGE_FORMAT", r"\b0xc0000139\b", r"\b0xc000007b\b",
   r"\b3221225785\b", r"\b3221225595\b", r"-1073741511\b", r"-1073741701\b",
   r"ELFCLASS32", r"mach-o file, but is an incompatible architecture",
   # Android's bionic linker (linker/linker_relocate.cpp): `cannot locate symbol "%s" referenced
   # by "%s"`: the library found is not the one the program was built against
   r"cannot locate symbol \"[^\"]+\" referenced by",
   r"LoadLibrary\w* failed (with error|:)\s*(127|193)\b", r"\bERROR_BAD_EXE_FORMAT\b")
# rpc-server (ggml/src/ggml-rpc/ggml-rpc.cpp ggml_backend_rpc_start_server and transport.cpp
# socket_t::create_server, b11434): the socket takes SO_REUSEADDR, so a port in TIME_WAIT binds;
# a failed bind or listen is another listener on the port (or an address not this machine's).
# A host that is no IPv4 address is refused first, in words of its own (a bad argument).
_e("rpc.server-port", "port-in-use", 75, _S,
   f"ggml/src/ggml-rpc/ggml-rpc.cpp (`Failed to create server socket`), {_B}",
   "the RPC worker could not listen on its port: another program holds it",
   r"^Failed to create server socket$", case=True)
_e("rpc.server-host", "bad-argument", 76, _D,
   f"ggml/src/ggml-rpc/transport.cpp (`Invalid host address: %s`), {_B}",
   "the RPC worker was given a host that is not an IPv4 address (`-H`)",
   r"^Invalid host address: \S+", case=True)
_e("net.port-in-use", "port-in-use", 75, _D,
   f"tools/server/server-http.cpp, {_B} (`couldn't bind HTTP server socket`); older server.cpp; "
   "errno EADDRINUSE 98/48, WSAEADDRINUSE 10048; wrappers' Go/Node/Python listeners",
   "another program holds the port (or the address is not this machine's)",
   r"couldn't bind (HTTP server|to server) socket", r"exiting due to HTTP server error",
   r"address already in use", r"EADDRINUSE", r"error while attempting to bind on address",
   r"\[Errno (48|98|99)\]", r"cannot assign requested address", r"only one usage of each socket address",
   r"WSAEADDRINUSE", r"\[WinError 10048\]", r"bind: An attempt was made to access a socket",
   # Docker's daemon (moby libnetwork portallocator ErrPortAlreadyAllocated): `docker run -p`
   # asked for a host port another container or program holds
   r"Bind for \S+ failed: port is already allocated",
   # WSAEACCES 10013: the port is in a range Windows reserves (Hyper-V/WinNAT) or held exclusively
   r"\[(WinError|Errno) 10013\]", r"WSAEACCES",
   r"port \d+ is (already )?(in use|taken|occupied)",
   # koboldcpp.py RunServerMultiThreaded: its own connect test before it binds
   r"Port \d+ already appears to be in use by another program",
   # Qt's QAbstractSocket::AddressInUseError text (gpt4all's API server)
   r"The bound address is already in use", r"failed to (start|bind).{0,40}port \d+.{0,20}in use",
   # Node's listen error object (LM Studio, Jan, OpenHands' servers), printed by util.inspect
   # or JSON.stringify: EADDRINUSE anywhere; EACCES with libuv's Windows errno -4092 is a port
   # Windows reserves (Hyper-V/WinNAT exclusions) or another program holds exclusively
   r"\"code\":\s*\"EACCES\",\s*\"errno\":\s*-4092,\s*\"syscall\":\s*\"listen\"",
   r"code: 'EACCES',\s*errno: -4092,\s*syscall: 'listen'",
   # ... and the same error as its message (libuv's uvException: `listen EACCES: permission
   # denied <addr>:<port>`): on a port of 1024 and up no privilege is missing, so the port is one
   # Windows reserves or another program holds exclusively; under 1024 it may be the privilege
   r"listen EACCES: permission denied \S*:[1-9]\d{3,4}\b",
   # Lemonade's lemond (its cpp-httplib server, 2026: `Failed to bind IPv4 HTTP server to %s:%d`, and
   # the IPv6 twin): bind_to_port gives no reason, as llama-server's own wording above does not
   r"Failed to bind (IPv4 |IPv6 )?HTTP server to \S+:\d+")
_e("net.bind-localized", "port-in-use", 75, _S,
   "Go's net package: `listen tcp <addr>: bind: <the OS's reason>`, the reason localized by "
   "Windows' FormatMessage (Turkish, Chinese, …) where the English words are not there",
   "the listener could not bind its address: another program holds it (or it is reserved)",
   r"\blisten (tcp|tcp4|tcp6) \S+: bind: \S")
# Go's net package: net.Listen splits the address first (ipsock.go SplitHostPort), and a value
# that is not host:port never reaches bind: `listen tcp: address 8000: missing port in address`
# (llama-swap's `--listen 8000`, Ollama's OLLAMA_HOST with a bare port in older releases).
_e("net.listen-address-invalid", "bad-argument", 70, _S,
   "Go net/ipsock.go SplitHostPort (`missing port in address`, `too many colons in address`), "
   "wrapped by net.Listen as `listen tcp: address %s: %s` (llama-swap, Ollama, Docker Model Runner)",
   "the listen address the wrapper was given is not host:port: the value is wrong, not the port taken",
   r"\blisten (tcp|tcp4|tcp6): address \S+: (missing port in address|too many colons in address)")
# PyInstaller's bootloader on Windows (bootloader/src/pyi_pythonlib.c, 2015 to 2026: `Error loading
# Python DLL '%s'.` then `LoadLibrary: <Windows' message>`): the Python DLL it just extracted, or one
# of its dependencies, did not load (koboldcpp.exe, koboldcpp#147). The DLL is in the bundle, so a
# dependency is what is missing; for Python 3.9 and later that may be Windows 8's API sets on
# Windows 7 (classify.py leaves that open).
_e("pyinstaller.python-dll-load-failed", "missing-library", 76, _D,
   "PyInstaller bootloader pyi_pythonlib.c (`Error loading Python DLL '%s'.`, `LoadLibrary: %s`)",
   "the Python DLL a PyInstaller bundle carries could not be loaded: a dependency of it is missing",
   r"Error loading Python DLL '[^']*python3\d+\.dll'")
# Python's import system (Lib/importlib/_bootstrap.py, 3.6 on: `ModuleNotFoundError: No module
# named '%s'`; Python 2's `ImportError: No module named %s`): a package the program imports is not
# installed where this interpreter looks (containers/ramalama#1362: the image's Python was another
# version than the one its packages were installed for). Only the exception's own line, not a
# program's prose about an optional module.
_e("python.module-missing", "missing-library", 72, _D,
   "CPython importlib (`ModuleNotFoundError: No module named '%s'`), Python 2 (`ImportError: No module named %s`)",
   "a Python package the program imports is not installed for the interpreter that runs it",
   r"ModuleNotFoundError: No module named '[^']+'", r"ImportError: No module named '?[\w.]+")
_e("ld.missing", "missing-library", 75, _D,
   "glibc ld.so `error while loading shared libraries`; dlopen; dyld `Library not loaded`; "
   "Windows STATUS_DLL_NOT_FOUND 0xC0000135 / ERROR_MOD_NOT_FOUND 126, STATUS_DLL_INIT_FAILED 0xC0000142",
   "a library the engine needs is not installed or not on the loader's path",
   r"error while loading shared libraries", r"cannot open shared object file",
   r"dyld(\[\d+\])?: Library not loaded", r"The code execution cannot proceed because .*\.dll",
   r"\.dll was not found", r"Could not find module .*\.dll", r"\[WinError 126\]",
   # the JDK's Windows library loader (linker_md.c, os_windows.cpp) for ERROR_MOD_NOT_FOUND on a
   # DLL that exists: `<path>.dll: Can't find dependent libraries` (java-llama.cpp's jllama.dll)
   r"Can't find dependent libraries",
   # the same STATUS_DLL_NOT_FOUND dialog in the system's language (Windows 8 on; the names as
   # users paste them: Chinese, Japanese, German, Portuguese), and Windows 7's older wording
   r"由于找不到\s*\S+?\.dll\s*[，,]?\s*无法继续执行代码",
   r"\S+\.dll\s*が見つからないため、コードの実行を続行できません",
   r"Ausführung des Codes kann nicht fortgesetzt werden, da \S+\.dll nicht gefunden wurde",
   r"execução de código não pode continuar porque \S+\.dll não foi encontrad",
   r"The program can't start because \S+\.dll is missing from your computer",
   # (not Ollama's probe for an AMD GPU, gpu/ and discover/amd_hip_windows.go, logged at DEBUG
   # by amd_windows.go on every Windows machine without AMD's HIP runtime, whatever GPU it has:
   # 0.1.29-0.2 `unable to load amdhip64.dll: The specified module could not be found.`, 0.3-0.12
   # `unable to load amdhip64_6.dll, please make sure to upgrade to the latest amd driver: The
   # specified module could not be found.`)
   r"(?<!amdhip64\.dll: )(?<!to the latest amd driver: )The specified module could not be found",
   r"dyld(\[\d+\])?: image not found", r"Library not loaded: @rpath",
   r"LoadLibrary\w* failed (with error|:)\s*126\b", r"\bERROR_MOD_NOT_FOUND\b",
   r"STATUS_DLL_NOT_FOUND", r"STATUS_DLL_INIT_FAILED", r"\b0xc0000135\b", r"\b0xc0000142\b",
   r"\b3221225781\b", r"\b3221225794\b", r"-1073741515\b", r"-1073741502\b",
   r"CUDA driver is a stub library", r"cudaErrorStubLibrary", r"failed to load (the )?(CUDA|ROCm|HIP|Vulkan) backend",
   r"libcuda\.so\.1: cannot open", r"nvcuda\.dll.{0,30}not found",
   # the runtime DLLs only when said missing: a crash report names them as the faulting module
   r"(vcruntime140|msvcp140|libomp)\w*\.(dll|dylib).{0,60}(not found|missing|could not be (found|loaded))",
   r"(missing|not find|not found|cannot find|could not load).{0,60}\b(vcruntime140|msvcp140|libomp)\w*\.(dll|dylib)",
   r"Failed to load shared library '[^']+'",
   # Implib.so's lazy-loading stubs (arch/common/init.c.tpl, 2022 to 2026: `implib-gen: <lib>:
   # failed to load library '<lib>' via callback '<fn>'` or `via dlopen: <dlerror>`), which
   # lemonade-sdk/llamacpp-rocm's builds use for ROCm's libraries (llamacpp-rocm#44: libamd_comgr.so.3)
   r"implib-gen: \S+: failed to load library '[^']+' via (callback|dlopen)",
   # Android's bionic linker (linker/linker.cpp), quoted by dlerror: `dlopen failed: library
   # "%s" not found` (Termux, the mobile bindings)
   r"dlopen failed: library \"[^\"]+\" not found",
   # ... and the same linker starting a program: `CANNOT LINK EXECUTABLE "%s": library "%s" not
   # found: needed by main executable` (or by another library of the program)
   r"library \"[^\"]+\" not found: needed by",
   r"OSError: .{0,80}\.(so|dll|dylib)[\w.]*: cannot open",
   # llama-cpp-python llama_cpp.py _load_shared_library; LocalAI's backend loader
   r"Shared library with base name '[^']+' not found", r"backend not found: \S+",
   # src/llama.cpp llama_model_load_from_file_impl, b11434: the ggml backend libraries are absent
   r"no backends are loaded\. hint: use ggml_backend_load",
   r"Backend not found backend=",
   # LocalAI pkg/model/initializers.go: the backend's gRPC binary is not on disk (os.IsNotExist)
   r"grpc process not found(: | in assetdir)", r"\bFails: grpc process not found\b",
   # glibc's ldd (elf/ldd.bash.in via ld.so --list): a needed library the loader cannot find
   r"^\s*\S+\.so[\w.]*\s+=>\s+not found\s*$",
   # the wrappers that launch llama-server as a program: Ollama 0.12+ llm/server.go
   # (`llama-server binary not found (checked: ...)`, an install without its lib/ollama
   # payload), and the launchers' own checks of the same words
   r"llama-server binary not found", r"llama-server(\.exe)? (executable|binary) (was )?not found",
   r"could not find (the )?llama-server (binary|executable)",
   # koboldcpp.py (`KoboldCPP couldn't locate any backends to use`): none of its backend
   # libraries (koboldcpp_default/_cublas/_vulkan/_clblast) is beside it
   r"KoboldCPP couldn'?t locate any backends to use",
   # Unsloth Studio studio/backend core/inference (2026, LLAMA_SERVER_NOT_FOUND_DETAIL, raised as
   # LlamaServerNotFoundError): `This is a GGUF model, but the llama.cpp runtime (llama-server)
   # is not installed. Run `unsloth studio setup` ...`; the same words in other launchers
   # (`the built-in runtime (llama-server) is not installed`, `llama.cpp (llama-server) is not
   # installed`): the program the wrapper launches is not on disk (unsloth#8184: an antivirus
   # had removed it)
   r"\(llama-server\) is not installed", r"\bLlamaServerNotFoundError\b",
   # node-llama-cpp src/bindings/getLlama.ts (2024-2026): no prebuilt binary fits this machine and
   # none could be built (NoBinaryFoundError, its default message the class name)
   r"\bNoBinaryFoundError\b")
# A program whose ELF interpreter (its PT_INTERP, glibc's /lib64/ld-linux-x86-64.so.2) is absent:
# execve fails with ENOENT on a file that exists. bash 5.2 (execute_cmd.c) says `cannot execute:
# required file not found`; older shells and kernels `bad ELF interpreter: No such file or
# directory`. A glibc build on a musl system (Alpine, Void musl) or a 32-bit loader not installed.
# A script (`.sh`, `.py`) names its #! interpreter the same way, a line ending or a shell, not a
# library, so a script's path is left out.
_e("ld.interpreter-missing", "missing-library", 75, _D,
   "bash 5.2 execute_cmd.c (`cannot execute: required file not found`); the kernel's ENOENT for a "
   "missing PT_INTERP as older shells word it (`bad ELF interpreter: No such file or directory`)",
   "the program's loader (its ELF interpreter) is not on this system",
   r"(?<!\.sh)(?<!\.bash)(?<!\.py): cannot execute: required file not found",
   r"bad ELF interpreter: No such file or directory")
# The AppImage runtime (AppImageKit squashfuse_dlopen.h, the type-2 runtime LM Studio's and Jan's
# Linux AppImages start with): it dlopens libfuse.so.2 to mount itself, and on a system without
# FUSE 2 (Ubuntu 22.04 on, Kubuntu, Fedora: only fuse3) stops before the program runs
# (lmstudio-ai/docs#247; installing libfuse2 fixed it).
_e("appimage.fuse-missing", "missing-library", 75, _D,
   "AppImageKit squashfuse_dlopen.h / .c (`dlopen(): error loading libfuse.so.2`, then `AppImages "
   "require FUSE to run.`), 2017 to the static runtime",
   "the AppImage's runtime cannot load FUSE 2 (libfuse.so.2), so the program never starts",
   r"dlopen\(\): error loading libfuse\.so", r"AppImages require FUSE to run")
# .NET bindings (LLamaSharp, and any P/Invoke binding over libllama): the CLR's own exceptions.
_e("dotnet.dll-not-found", "missing-library", 75, _D,
   "the .NET runtime's System.DllNotFoundException (`Unable to load DLL 'llama'` on .NET "
   "Framework, `Unable to load shared library 'llama' or one of its dependencies` on .NET Core)",
   "the binding's native library (or one it depends on) could not be loaded: not installed, not "
   "beside the program, or a dependency missing",
   r"DllNotFoundException: Unable to load (DLL|shared library) '[^']*(llama|ggml|mtmd)[^']*'")
# LLamaSharp's NativeApi static constructor (LLama/Native/NativeApi.cs, then NativeApi.Load.cs,
# 0.5 to 0.2x) calls llama_empty_call() and turns ANY DllNotFoundException into
# `RuntimeError: The native library cannot be correctly loaded. It could be one of the
# following reasons: 1. No LLamaSharp backend was installed ... 3. One of the dependency of
# the native library is missed ... 4. Try to compile llama.cpp yourself`, dropping the inner
# exception and with it the loader's reason. On Linux .NET throws DllNotFoundException for
# every dlopen failure: the file or a dependency absent, but also a libllama built on a newer
# glibc (`version GLIBC_2.33 not found`: LLamaSharp#285, spent batch 19, a Docker image older
# than the prebuilt library). The line alone therefore names no kind: read as missing-library,
# then left open between missing-library and system-too-old (classify.py _left_open); a line
# that gives the loader's reason (a GLIBC version, `cannot open shared object file`, the
# DllNotFoundException's own text) decides over it.
_e("llamasharp.native-load-failed", "missing-library", 75, _S,
   "LLamaSharp LLama/Native/NativeApi.cs / NativeApi.Load.cs (0.5 to 0.2x) static constructor: "
   "`catch (DllNotFoundException) { throw new RuntimeError(\"The native library cannot be correctly "
   "loaded. ...\") }`, the inner exception dropped; LLama/Native/Load/NativeLibraryUtils.cs "
   "TryLoadLibrary (0.13 to 0.27, `Failed to load the native library. Please check the log for more "
   "information.`) when no candidate loads",
   "LLamaSharp could not load its native library and dropped the loader's reason: a library or "
   "dependency missing, or one built for a newer system (glibc) than this one",
   r"The native library cannot be correctly loaded\. It could be one of the following reasons",
   # NativeLibraryUtils.TryLoadLibrary (LLama/Native/Load, 0.13 to 0.27): every candidate's
   # NativeLibrary.TryLoad failed with fallback off; its log's `Failed Loading '%s'` lines carry no
   # reason either (LLamaSharp#1275)
   r"Failed to load the native library\. Please check the log for more information")
_e("dotnet.entry-point", "stale-library", 76, _D,
   "the .NET runtime's System.EntryPointNotFoundException (`Unable to find an entry point named "
   "'llama_x' in DLL 'llama'` / `in shared library`), thrown when a P/Invoke is first bound",
   "the binding found a libllama, but one of another llama.cpp version: a function the binding "
   "declares is missing or changed (LLamaSharp supports exactly one llama.cpp commit per release)",
   r"Unable to find an entry point named '(llama|ggml|mtmd|llava|clip)_\w+'")
_e("python.ctypes-missing-export", "stale-library", 76, _D,
   "CPython Modules/_ctypes/_ctypes.c (`function '%s' not found` on Windows, where GetProcAddress "
   "fails; elsewhere dlerror's words: macOS's `dlsym(0x…, name): symbol not found`, Linux's "
   "`undefined symbol`, read by ld.stale-symbol)",
   "the Python binding (llama-cpp-python and its kin) loaded a llama.cpp library that lacks a "
   "function it declares: a library from another llama.cpp version than the binding's",
   r"AttributeError: function '(llama|ggml|gguf|mtmd|llava|clip|whisper)_\w+' not found",
   # macOS: ctypes raises AttributeError with dlerror's own words, `dlsym(<handle>, <name>):
   # symbol not found` (libdyld), where Linux's dlerror says `undefined symbol`
   r"dlsym\(0x[0-9a-fA-F]+, _?(llama|ggml|gguf|mtmd|llava|clip|whisper)_\w+\): symbol not found",
   # a traceback cut before that last line, still inside ctypes' CDLL.__getattr__ (Lib/ctypes/
   # __init__.py): it runs only for a name not yet bound, and a traceback passes through it only
   # when the library had no such export; IPython's frame (`…\ctypes\__init__.py:387, in
   # CDLL.__getattr__(self, name)`) and Python's (`…ctypes/__init__.py", line 387, in __getattr__`)
   # (llama-cpp-python#127)
   r"ctypes[/\\]__init__\.py(\"?, line |:)\d+, in (CDLL\.)?__getattr__\b")
# The CLR's TypeLoadException IDS_CLASSLOAD_MISSINGMETHODRVA (`Could not load type 'T' from
# assembly 'A' because the method 'M' has no implementation (no RVA).`, dotnet/runtime
# src/coreclr/dlls/mscorrc/mscorrc.rc, .NET Framework 4.x and .NET 5 to 9): thrown while the
# managed TYPE loads, before any native library is opened, for a method with neither a body nor
# a [DllImport]. So the wording proves the binding's assembly declares a native method it does
# not bind: LLamaSharp's own slip (LLamaSharp#863, 0.14.0's llama_encode without DllImport,
# fixed in #864) or a binding built against another llama.cpp than the one it ships with
# (LLamaSharp#1119). A sign only: unknown with it as the candidate unless a line such as the
# EntryPointNotFoundException above corroborates a library of another version.
_e("dotnet.type-load-no-implementation", "stale-library", 30, _W,
   "dotnet/runtime (CoreCLR) and .NET Framework: System.TypeLoadException, resource "
   "IDS_CLASSLOAD_MISSINGMETHODRVA; seen over LLamaSharp 0.14 to 0.2x (LLamaSharp#863, #1119)",
   "the binding's managed type declares a llama.cpp function it does not bind: the binding's own "
   "build slip or a binding/library version mix; the native library was not read yet",
   r"TypeLoadException\b.{0,300}\bmethod '(llama|ggml|mtmd|llava|clip)_\w+' has no implementation",
   r"Could not load type '[^']+' from assembly '[^']+' because the method '(llama|ggml|mtmd|llava|clip)_\w+' "
   r"has no implementation")
# The CLR's fatal `System.AccessViolationException: Attempted to read or write protected
# memory` (dotnet/runtime, .NET Core 2 on: not catchable, `Fatal error.` and the managed stack)
# with a frame that is a binding's native llama.cpp call (LLamaSharp `at
# LLama.Native.SafeLlamaModelHandle.llama_model_load_from_file(...)`). It proves only that
# native code faulted inside that call: a parameter struct of another llama.cpp version
# (LLamaSharp#1174: LLamaSharp 0.22 over a newer libllama), a null model used after a failed
# load, or a driver's fault alike. A sign only: never a kind alone.
_e("dotnet.access-violation-in-native-call", "stale-library", 25, _W,
   "dotnet/runtime: System.AccessViolationException (`Attempted to read or write protected memory`) "
   "with a LLama.Native.* frame of a llama_/ggml_ P/Invoke (LLamaSharp 0.1x to 0.2x, LLamaSharp#1174)",
   "native code faulted inside a llama.cpp call the binding made: a library of another version is "
   "one cause among several (a failed load, a driver fault)",
   r"\bat LLama\.Native\.\w+\.(llama|ggml|mtmd|llava|clip)_\w+\(")


def _go_exec_not_found(program: str) -> str:
    """Go os/exec's spawn error for a program name matching `program`: `exec: "<name>": executable
    file not found in $PATH` (`%PATH%` on Windows, lp_windows.go), or `file does not exist` for a
    named path (fs.ErrNotExist); structured logs quote it a second time (`exec: \\"<name>\\": …`)."""
    return rf'exec: \\?"{program}\\?": (executable file not found in (\$PATH|%PATH%)|file does not exist)'


def _crun_not_found(program: str) -> str:
    """crun's error for a container command matching `program` that is not there (crun 1.x:
    `executable file `%s` not found in $PATH`, and for a path `… not found: No such file or directory`)."""
    return rf"executable file `{program}` not found( in \$PATH|: No such file or directory)"


# A launcher's command that names an unexpanded macro or variable (llama-swap's `${name}` macros,
# config.go, expanded only when the `macros:` block parses; a shell's `$VAR` handed through
# unexpanded by a YAML or JSON config): os/exec looks for a program literally called
# `${latest-llama}` (llama-swap#269). The configured command is wrong, not the install.
_e("exec.unexpanded-macro", "bad-argument", 76, _S,
   "Go os/exec's spawn error for a program name holding `${…}` or `$NAME` (llama-swap 2025: "
   "`unable to start process: start() failed: exec: \"${latest-llama}\": executable file not found "
   "in $PATH`; internal/process/process_command.go later: `failed to start command '%s': %w`), and "
   "llama-swap's own refusal of a macro its config does not define (internal/config/macros.go, "
   "2026: `unknown macro '${%s}' found in %s`)",
   "the wrapper's configured command still holds a macro or variable it never expanded (a "
   "malformed or misindented config): fix the config, not the install",
   _go_exec_not_found(r'[^"]*\$(\{[^}"]+\}|[A-Za-z_]\w*)[^"]*'),
   r"fork/exec [^\s:]*\$(\{[^}\s]+\}|[A-Za-z_]\w*)\S*: no such file or directory",
   r"unknown macro '\$\{[^}']+\}'")
_e("exec.program-missing", "missing-library", 75, _S,
   "the launchers' own spawn errors: Go os/exec (`exec: \"llama-server\": executable file not "
   "found in $PATH`, `%PATH%` on Windows, `file does not exist`, `fork/exec <path>: no such file or "
   "directory`: llama-swap "
   "internal/process, Ollama llm/server.go), Node child_process (`spawn <path> ENOENT`: Jan, "
   "LM Studio's lms), Python subprocess (`[Errno 2] No such file or directory: '<llama-server>'`); "
   "in a container, catatonit and crun",
   "the program the wrapper launches is not there (or, for fork/exec, its ELF interpreter is "
   "not): the engine never ran",
   _go_exec_not_found(r'[^"]+'),
   r"fork/exec \S+: no such file or directory",
   r"\bspawn \S+ ENOENT\b", r"No such file or directory: '[^']*llama-server(\.exe)?'",
   # the shells, for llama.cpp's own programs only: zsh, bash, cmd.exe and PowerShell
   r"zsh: command not found: (\S*/)?llama-\w+", r"\bllama-[\w.]+: command not found",
   r"'(\S*\\)?llama-[\w.]+' is not recognized as an internal or external command",
   r"The term '(\S*\\)?llama-[\w.]+' is not recognized as (the )?name of a cmdlet",
   # the container's first process: catatonit, podman's init (`failed to exec pid1: %m`, src
   # catatonit.c since 0.1), and crun (`executable file `%s` not found in $PATH`, crun 1.x; a
   # path: `executable file `%s` not found: No such file or directory`): the command the wrapper
   # runs in its image is not in it (RamaLama's llama-run, containers/ramalama#1144)
   r"\(catatonit:\d+\): failed to exec pid1: No such file or directory",
   _crun_not_found(r"[^`]+"),
   # RamaLama's own words for the same FileNotFoundError (ramalama/model.py 0.5 to 0.10,
   # transports/base.py 2026: `RamaLama requires the "%(cmd)s" command to be installed on the host
   # when running with --nocontainer.`, and `... inside of the container.`): the engine program it
   # execs (llama-run, llama-server) is not where it runs it
   r"RamaLama requires the \"[^\"]+\" command to be installed (on the host|inside of the container)")
# An image reference where the container's command goes: a wrapper's `podman run` line that names
# the image twice (or loses an option's value) makes the runtime execute the second image name
# (containers/ramalama#2843: `crun: executable file `/quay.io/ramalama/ramalama:0.23` not found`).
# A registry host (a dot in it), a path and a `:tag` is no program's path: the command line the
# wrapper built is wrong, not the image.
_IMAGE_REFERENCE = r"/?[a-z0-9-]+(\.[a-z0-9-]+)+(:\d+)?/[\w./-]+:[\w.-]+"
_e("container.image-as-command", "bad-argument", 76, _S,
   "crun (`executable file `%s` not found in $PATH`, `… not found: No such file or directory`) and "
   "runc (Go os/exec: `exec: \"%s\": executable file not found in $PATH`) naming an image "
   "reference (`registry.host/name:tag`) as the program",
   "the container runtime was told to run an image's name as its command: the wrapper's container "
   "command line is malformed (an image named twice, an option without its value)",
   _crun_not_found(_IMAGE_REFERENCE), _go_exec_not_found(_IMAGE_REFERENCE))
_e("exec.wrong-format", "stale-library", 76, _S,
   "Go os/exec `fork/exec <path>: exec format error` (ENOEXEC), Python `[Errno 8] Exec format error`",
   "the program is built for another architecture or OS (the Linux twin of WinError 193): "
   "another build's binary",
   r"fork/exec \S+: exec format error", r"\[Errno 8\] Exec format error")
# WasmEdge's CLI knows --nn-preload only when its WASI-NN plugin (the shared library that carries
# llama.cpp, libwasmedgePluginWasiNN) is installed: the plugin adds the option when it loads
# (plugins/wasi_nn wasinnmodule/wasinnenv), and without it the option parser refuses it.
_e("wasmedge.wasi-nn-plugin-absent", "missing-library", 75, _S,
   "WasmEdge tools/wasmedge (its option parser: `unknown option: %s`) with the WASI-NN plugin's "
   "`--nn-preload` (plugins/wasi_nn), 0.13 to 0.14; LlamaEdge's and GaiaNet's launch lines use it",
   "WasmEdge's WASI-NN plugin library (its llama.cpp) is not installed: the engine never loaded",
   r"^unknown option: nn-preload\b")
_e("ggml.no-cpu-backend", "missing-library", 75, _S,
   f"src/llama-model.cpp, src/llama-model-loader.cpp, common/fit.cpp (`no CPU backend found`), "
   f"src/llama-context.cpp (`failed to initialize CPU backend`), {_B}",
   "a build with loadable backends (GGML_BACKEND_DL) found no libggml-cpu* beside it",
   r"(?<![\w-])no CPU backend found", r"failed to initialize CPU backend")
_e("vulkan.no-driver", "missing-library", 75, _S,
   "VkResult VK_ERROR_INCOMPATIBLE_DRIVER (-9) from vkCreateInstance, as ggml-vulkan's vulkan.hpp "
   "throws it (`vk::createInstance: ErrorIncompatibleDriver`)",
   "the Vulkan loader found no driver (ICD) it can use: a Vulkan build without a Vulkan driver "
   "(none installed, MoltenVK absent, a container without the graphics capability)",
   r"vk::createInstance: ErrorIncompatibleDriver", r"vkCreateInstance.{0,40}VK_ERROR_INCOMPATIBLE_DRIVER")
# The OpenCL counterpart: the Khronos ICD loader (OpenCL-ICD-Loader icd_dispatch.c, and the
# vendors' loaders after it) answers clGetPlatformIDs with CL_PLATFORM_NOT_FOUND_KHR (-1001,
# cl_khr_icd) when it loaded no vendor driver: no /etc/OpenCL/vendors/*.icd, or libraries they
# name that are not there. ggml-opencl's CL_CHECK (CLBlast's of 2023, ggml-opencl.c/.cpp) prints it
# as `ggml_opencl: clGetPlatformIDs(...) error -1001 at <file>:<line>` and stops
# (llama.cpp#1561, #1979).
_e("opencl.no-platform", "missing-library", 75, _S,
   "CL_PLATFORM_NOT_FOUND_KHR (-1001) from clGetPlatformIDs, the Khronos OpenCL ICD loader, as "
   "ggml-opencl's CL_CHECK prints it (2023; b11434 CL_CHECK)",
   "the OpenCL loader found no driver (ICD) to load: an OpenCL build without an OpenCL driver",
   r"clGetPlatformIDs\b.{0,80}\berror -1001\b", r"\bCL_PLATFORM_NOT_FOUND_KHR\b")
_e("metal.library-missing", "missing-library", 75, _S,
   "older ggml-metal.m ggml_metal_init (2023-2024): `ggml-metal.metal` or `default.metallib` not "
   "found beside the program (NSCocoaErrorDomain Code=260)",
   "the Metal shader source or library the build loads at start is not where it looks",
   r"ggml-metal\.metal.{0,40}couldn.t be opened because there is no such file",
   r"NSCocoaErrorDomain Code=260.{0,80}(ggml-metal|default\.metallib)")
_e("metal.library-compile", "system-too-old", 20, _W,
   f"ggml/src/ggml-metal/ggml-metal-device.m, {_B} (`failed to initialize the Metal library`, "
   "`failed to create library`, `kernel not found in any metal library`); older ggml-metal.m "
   "(`Error Domain=MTLLibraryErrorDomain`)",
   "the Metal shaders did not compile or load: an older macOS or GPU lacking a feature the "
   "shaders use, or a damaged bundle; a sign only",
   r"MTLLibraryErrorDomain", r"failed to initialize the Metal library",
   r"ggml_metal\w*: error: failed to create library",
   r"kernel not found in any metal library", r"failed to create Metal library from source",
   # ggml-metal.m of 2023-2024: `ggml_metal_init: load pipeline error: Error Domain=AGXMetal...`
   # (`ggml_metal_init: error: load pipeline error(2, CompilerError): …` in its 2023 kernel loop,
   # llama.cpp#3423), and llama.cpp's `failed to initialize Metal backend` after it
   r"ggml_metal_init: (error: )?load pipeline error", r"failed to initialize Metal backend",
   # ggml-metal-device.m (b11434) ggml_metal_library_compile_pipeline: one kernel's function or
   # pipeline state did not compile for this device
   r"failed to (compile pipeline|create pipeline state): base = ")
_e("metal.shader-rejected", "gpu-error", 40, _S,
   "ggml-metal's shaders compiled at start (ggml_metal_library_init, b11434) against Apple's "
   "MetalPerformancePrimitives tensor ops (Metal 4): its `static_assert` that the operand types "
   "match the cooperative tensor types (`__tensor_ops_detail`), 2026",
   "the GPU's shader compiler rejects ggml's Metal source for this GPU family (a fix in the "
   "engine, not an older macOS)",
   r"static_assert failed due to requirement '__tensor_ops_detail::",
   r"Input types must match cooperative tensor types")
# The same compiler's own diagnostics on ggml's embedded source (newLibraryWithSource names the
# source `program_source`), other than the tensor-ops check above: the shaders and this macOS's
# compiler disagree (llama-server b10595 on macOS 26.2, Nabzx/openstream#172); the context that then
# cannot be made is its echo. Which side is behind, the engine or the system (`unknown type name
# 'bfloat'` before Metal 3.1), the line does not say: classify leaves it open.
_e("metal.source-rejected", "gpu-error", 40, _S,
   "the Metal compiler's diagnostics on ggml's shader source (`program_source:%d:%d: error: %s`), "
   "compiled at start by ggml-metal (newLibraryWithSource)",
   "the shaders and this macOS's Metal compiler disagree: an older macOS lacking a feature they "
   "use, or an older build's shaders on a newer macOS",
   r"^\s*program_source:\d+:\d+: error: (?!static_assert failed due to requirement '__tensor_ops_detail::)")
# Ollama llm/server.go Completion (0.9 to 0.24: `slog.Error("post predict", "error", err)`): the
# request to the runner failed; with Go's `context canceled` the request's own context ended, i.e.
# the client went away (its timeout ran out, or a person cancelled) while the model answered
# (ollama#12291: a 5-minute client timeout on a 29k-token prompt). Ollama then tells the client
# `model runner has unexpectedly stopped`, which it had not.
_e("ollama.client-cancelled-predict", "stopped", 45, _S,
   "Ollama llm/server.go Completion, 0.9 to 0.24 (`msg=\"post predict\" error=\"Post \\\"http://…"
   "/completion\\\": context canceled\"`)",
   "the client closed its request while the model was answering: the run was stopped from outside, "
   "not by a fault",
   r"post predict\W.{0,160}\bcontext canceled")
_e("wrapper.llama-swap-stop", "stopped", 45, _S,
   "llama-swap proxy/process.go (2025: `swapState() State transitioned from %s to stopping`, `Process "
   "timed out waiting to stop, sending KILL signal`), internal/process (2026: `process stopped by "
   "llama-swap`)",
   "the wrapper stopped the engine on purpose (an unload, a swap, a shutdown), killing it when it "
   "did not stop in time",
   r"State transitioned from \w+ to stopping", r"Process timed out waiting to stop, sending KILL signal",
   r"process stopped by llama-swap")
_e("vulkan.version-too-old", "system-too-old", 20, _W,
   f"ggml/src/ggml-vulkan/ggml-vulkan.cpp, {_B} (`ggml_vulkan: Error: Vulkan 1.2 required.`)",
   "the device's Vulkan driver offers an older Vulkan than the build needs (an old driver or "
   "GPU); a sign only, the exit or the next lines decide",
   r"ggml_vulkan: Error: Vulkan 1\.2 required")

# ---------------------------------------------------------------------------- arguments

_e("arg.invalid", "bad-argument", 70, _D,
   f"common/arg.cpp, {_B}; older common.cpp (`unknown argument`, `invalid parameter for argument`)",
   "the engine refused an option or value on its command line",
   r"error: invalid argument:", r"error while handling argument", r"unknown argument",
   r"error: unrecognized arguments?:", r"error while handling environment variable",
   r"Unsupported cache type", r"unknown speculative type", r"invalid parameter for argument",
   # common.cpp kv_cache_type_from_str before it said `Unsupported` (2024: `Invalid cache type: %s`,
   # thrown and printed by the C++ runtime's terminate handler, llama.cpp#7639)
   r"Invalid cache type: \S",
   r"unk?nown value for --", r"quantized V cache requires flash_attn",
   # llama.cpp mid-2024 to early 2025 (src/llama.cpp llama_new_context_with_model, after the
   # quantized V cache came in): the same refusal in its first words
   r"V cache quantization requires flash_attn",
   r"K cache type \S+ with block size \d+ does not divide", r"model does not support different K",
   r"SPLIT_MODE_TENSOR requires flash_attn", r"invalid device:", r"Available buffer types:",
   r"^not a directory:", r"Unknown reasoning format",
   # ... but with no device at all, main_gpu 0 (the default) is refused because no GPU
   # backend gave one ("gpu.no-device" below), not because the value was wrong
   r"invalid value for main_gpu: -?\d+(?! \(available devices: 0\))",
   r"invalid boolean value", r"unrecognized option '-", r": invalid option -- ",
   r"error: unrecognized command line option", r"error: the argument .{0,40} requires a value",
   r"unknown cache type", r"invalid (ngl|n_gpu_layers|ctx.size|tensor.split) value",
   # the CLI parsers wrappers use: Rust's clap (LlamaEdge), Go's flag package
   r"error: unexpected argument '[^']+' found", r"flag provided but not defined: -",
   # Python's argparse (`argument %s: invalid %s value`, `expected one argument`, `invalid
   # choice`), click (NoSuchOption, BadParameter, extra arguments), Go's pflag/cobra
   r"error: argument [-\w/, ]+: (invalid|expected|ignored explicit|not allowed)",
   r"Error: No such option: -", r"Error: Invalid value for ['\"-]", r"Got unexpected extra arguments? \(",
   r"\bunknown (shorthand )?flag: ['\"-]", r"invalid argument \"[^\"]*\" for \"-",
   # koboldcpp.py (`Error: Using --quantkv requires --flashattention`), llamafile
   # (`error: invalid --gpu flag value: %s`)
   r"Using --\w+ requires --\w+", r"error: invalid --gpu flag value",
   # src/llama-context.cpp llama_init_from_model, b11434
   r"n_batch and n_ubatch cannot both be zero", r"n_ctx and model->hparams.n_ctx_train cannot both be zero",
   # src/llama-context.cpp's llama_context constructor, b11434: a quantized V cache without
   # Flash Attention (the newer wording of `quantized V cache requires flash_attn`) and more
   # parallel sequences than LLAMA_MAX_SEQ
   r"quantized V cache was requested, but this requires Flash Attention", r"n_seq_max must be <= \d+",
   # llama_init_from_model, b11434: a quantized K or V cache type whose block does not divide
   # this model's head size (-ctk/-ctv chose a type the model's heads cannot be cut into)
   r"[KV] cache type \w+ with block size \d+ does not divide n_embd_head_[kv]=\d+",
   # Rust's clap (tabby, LlamaEdge): `error: invalid value '%s' for '%s'` (ErrorKind::InvalidValue)
   r"error: invalid value '[^']*' for '-")
# llama-run (examples/run/run.cpp, 2024-12 to 2025): its own parser's refusal, then its help.
# The words are generic (shell scripts print them too), so they decide only alone.
_e("run.parse-failed", "bad-argument", 70, _S,
   "examples/run/run.cpp Opt::init (`Error: Failed to parse arguments.`, `Error: No arguments "
   "provided.`), llama.cpp 2024-12 to 2025",
   "llama-run refused its command line (an option this build does not have, or no model)",
   r"^Error: (Failed to parse arguments|No arguments provided)\.$")
# common/arg.cpp (b11434) takes any integer for -b; llama_context then sizes its batch to 0 and
# the graph reserve aborts on GGML_ASSERT(n_outputs >= 1). -ub 0 is fine (it means "as -b"). The
# launch line or the context's own `n_batch = 0` shows the value.
_e("arg.batch-zero", "bad-argument", 70, _S,
   f"common/arg.cpp `-b, --batch-size N` (no lower bound) and src/llama-context.cpp, {_B}",
   "the launch set a logical batch size of 0, which the parser accepts and no context can run with",
   r"--batch-size[= ]+0(\s|\\|$)", r"(^|\s)-b 0(\s|\\|$)", r"\bLLAMA_ARG_BATCH=0\b",
   r"llama_context: n_batch\s+= 0\b")
# common/chat.cpp (b11434: `this custom template is not supported, try using --jinja`; common.cpp
# of 2024 without the hint): the model's chat template is not one the built-in matcher knows, and
# only the Jinja engine (`--jinja`) renders it. The model is fine; the launch lacked the option
# (containers/ramalama#1212: `ramalama run` without `--jinja`, which `ramalama serve` passes).
_e("arg.template-needs-jinja", "bad-argument", 70, _S,
   f"common/chat.cpp, {_B}; common/common.cpp, 2024 (`this custom template is not supported`)",
   "the model's chat template needs llama.cpp's Jinja engine, and the launch did not turn it on",
   r"this custom template is not supported")
# llama.cpp's GGML loader of July-August 2023 (llama.cpp llama_model_loader, `-gqa N` /
# llama-cpp-python's `n_gqa`, added for LLaMA 2 70B before GGUF stored the KV head count): a
# grouped-query model loaded with the default of 1 expects its K and V projections square, and the
# file's are n_embd / n_gqa wide (`tensor 'layers.0.attention.wk.weight' has wrong shape; expected
# 8192 x 8192, got 8192 x 1024`, serge#675). The file is fine; the load was not told its GQA factor.
_e("arg.gqa-not-set", "bad-argument", 70, _S,
   "llama.cpp (GGML era, July-August 2023) llama_model_loader's shape check of "
   "`layers.N.attention.wk|wv.weight` (`has wrong shape; expected %5u x %5u, got %5u x %5u`)",
   "a grouped-query-attention GGML model (LLaMA 2 70B, Code Llama 34B) was loaded without its GQA "
   "factor (`-gqa 8`, `n_gqa=8`)",
   r"tensor 'layers\.\d+\.attention\.w[kv]\.weight' has wrong shape; expected\s+(\d+) x\s+\1, "
   r"got\s+\1 x\s+(?!\1\b)\d+")
# src/llama-model-loader.cpp, b11434 (and since split GGUFs, 2024): the file named as the model
# is a later shard of a split model (`illegal split file idx: 3 (file: …-00004-of-00004.gguf),
# model must be loaded with the first split`). The shards are fine; the path handed to the engine
# names the wrong one (docker/model-runner#672: the runner passed the last shard). A shard whose
# own index disagrees with its name (`invalid split file idx … expected N`) is the file's.
_e("arg.split-not-first", "bad-argument", 70, _D,
   f"src/llama-model-loader.cpp llama_model_loader, {_B}: `illegal split file idx: %d (file: %s), "
   "model must be loaded with the first split`",
   "the model path names a later shard of a split model; the engine must be given the first",
   r"illegal split file idx")
_e("arg.wrapper-api", "bad-argument", 70, _S,
   "CPython's call check (`%U() got an unexpected keyword argument '%S'`) and pydantic v1's "
   "`extra fields not permitted` (value_error.extra): the wrapper's installed version does not "
   "take an option the caller passes (an option renamed, removed or not yet added)",
   "the caller passed an option the installed wrapper or binding does not accept",
   r"got an unexpected keyword argument '\w+'", r"extra fields not permitted \(type=value_error\.extra\)")
# Docker Model Runner's check of the engine flags a user set for a model (`docker model configure
# --runtime-flags`, pkg/inference/scheduling/scheduler.go and pkg/inference/runtime_flags.go, November
# 2025 on): a string that does not split into words, a flag not on the backend's allowlist, a path,
# a value that looks like another flag. The runner is never started with them.
_e("arg.runner-flags", "bad-argument", 70, _S,
   "docker/model-runner pkg/inference/scheduling/scheduler.go (`invalid runtime flags: %w`) and "
   "pkg/inference/runtime_flags.go ValidateRuntimeFlags, 2025-2026",
   "the engine flags configured for the model were refused before the engine started",
   r"\binvalid runtime flags: ", r"\bruntime flag \"[^\"]+\" is not allowed for backend \"",
   r"\binvalid runtime flag \"[^\"]+\": paths are not allowed",
   r"\binvalid flag \"[^\"]+\": value cannot start with '-'")
_e("arg.wrapper-origins", "bad-argument", 70, _D,
   "gin-contrib/cors config.go (`bad origin: origins must contain '*' or include <schemes>`), "
   "which Ollama's server builds from OLLAMA_ORIGINS (server/routes.go, 0.1.2x to 2026)",
   "an allowed-origins setting (Ollama's OLLAMA_ORIGINS) holds a value that is not an origin",
   r"bad origin: origins must contain '\*' or include")

# -------------------------------------------------------------- allocations, device unnamed

_e("alloc.unnamed", "device-oom", 65, _D,
   f"src/llama-model.cpp (`unable to allocate %s buffer`), src/llama-kv-cache.cpp, "
   f"src/llama-context.cpp, {_B}; older `unable to allocate backend buffer`",
   "an allocation failed on the buffer type the line names (or the build's device)",
   r"unable to allocate (\w+ )?buffer",
   # b11434's per-purpose buffers: llama-kv-cache.cpp, llama-memory-recurrent.cpp (`rs cache`),
   # the DeepSeek V4 compressor state (llama-context.cpp), llama-adapter.cpp (LoRA adapters
   # and control vectors): `failed to allocate buffer for <what>`
   r"failed to allocate buffer for (kv cache|rs cache|DSV4 compressor state|lora adapter|control vector)",
   r"failed to allocate compute (pp |tg )?buffers", r"failed to allocate output buffer",
   r"ggml_gallocr_reserve_n(_impl)?: failed to allocate",
   # ggml-backend.cpp's default buffer allocation and the CPU extra buffers (AMX, HBM), b11434:
   # `failed to allocate %s buffer of size %zu`
   r"failed to allocate (\w+ )?buffer of size \d+", r"ggml_backend_alloc_ctx_tensors\w*: failed to allocate",
   r"llama_kv_cache_init: failed to allocate", r"ggml_gallocr_alloc_graph: failed to allocate")

# -------------------------------------------------------------------------------- model

# The multimodal projector's loader and graph builders (tools/mtmd, b11434; examples/llava's
# clip.cpp before): a projector type this build does not know is a model newer than the
# engine (or a projector file for another model family).
_e("mtmd.projector-unknown", "bad-model", 60, _D,
   f"tools/mtmd/clip.cpp (`unknown projector type: %s`, `unknown vision projector type`), "
   f"mtmd.cpp (`unexpected vision/audio projector type`), models/llava.cpp, siglip.cpp, "
   f"whisper-enc.cpp (GGML_ABORT), {_B}; clip.cpp's `Unknown projector type` abort (2025-2026); "
   "examples/llava/clip.cpp's `GGML_ASSERT(new_clip->has_llava_projector)` (2024)",
   "the projector (mmproj) is of a type this build does not know: a newer model than the engine",
   r"\b(unknown|unexpected|unsupported) (vision |audio )?projector type",
   # the same for MiniCPM-V's projector, whose versions each build lists (b11434 clip.cpp
   # `GGML_ABORT("Unknown minicpmv version")`, mtmd.cpp `unsupported minicpmv version: %d`): a
   # MiniCPM-V newer than the engine (ollama#12104: MiniCPM-V 4.5 on an older bundled clip.cpp)
   r"\b(Unknown|unsupported) minicpmv version",
   # examples/llava/clip.cpp clip_model_load (2024, until MiniCPM-V's projector was added):
   # `GGML_ASSERT(new_clip->has_llava_projector)` after reading the file's clip.has_llava_projector
   # key; a projector without it (MiniCPM-V's, a text or semantic-search encoder) is one this
   # loader does not know (llamafile#540: fixed by a newer llamafile)
   r"GGML_ASSERT\W.{0,80}\bnew_clip->has_llava_projector\b")
# src/llama-model.cpp load_hparams, b11434 (and since 2024): the model's own expert or layer count
# checked against what this engine was compiled to hold. A model over it is newer than the engine
# (DeepSeek V3's 256 experts against the 160 of llama.cpp before b4400); a newer build raises the
# limit, so the file is not broken but the engine cannot take it. `seq_id < LLAMA_MAX_SEQ` is a
# request's, not the model's, and is not read here.
_e("model.over-engine-limit", "bad-model", 62, _D,
   f"src/llama-model.cpp (`GGML_ASSERT(hparams.n_expert <= LLAMA_MAX_EXPERTS)`, `n_layer_all <= "
   f"LLAMA_MAX_LAYERS`), src/models/*.cpp, {_B}",
   "the model has more experts or layers than this engine build can hold: a model newer than the engine",
   r"GGML_ASSERT\([^)]*<= ?(\(size_t\) ?)?LLAMA_MAX_(EXPERTS|LAYERS)\)\s*failed")
_e("model.load", "bad-model", 60, _D,
   f"ggml/src/gguf.cpp, src/llama-model-loader.cpp, src/llama-model.cpp, src/llama.cpp, {_B}; "
   "older llama.cpp (ggml-format loaders)",
   "the model file is damaged, incomplete, or not supported by this build",
   r"failed to open GGUF file", r"gguf_init_from_\w+: failed", r"error loading model:",
   r"error loading model architecture", r"unknown model architecture", r"missing tensor",
   r"not within the file bounds", r"model is corrupted or incomplete",
   r"chat template parsing error",
   # common/chat.cpp common_chat_templates_init, b11434: the model's own Jinja template (from
   # its metadata) does not parse; the server stops (`--no-jinja` or another template helps)
   r"common_chat_templates_init: failed to initialize chat template",
   r"failed to load multimodal model", r"invalid magic",
   # src/llama-model-loader.cpp llama_model_loader (2024 to b11434): gguf_init_from_file returned
   # NULL (the file is missing, not GGUF, or holds a type or field this build does not read, as
   # the Q4_0_4_8 files after online repacking replaced them). Thrown before any buffer is
   # allocated, so unlike llama_model_load's own `failed to load model` it is never memory.
   # Wrappers quote it without llama.cpp's `error loading model:` (LM Studio's `llama.cpp error:`)
   r"\bllama_model_loader: failed to load model from (?!file pointer)\S",
   # llama-cpp-python llama.py (`Model path does not exist: %s`, 0.1.x to 2026): its own check
   # before llama.cpp opens the file, the same failure as `failed to open GGUF file` above
   r"\bModel path does not exist: ",
   # Lemonade's llama.cpp backend (src/cpp/server/backends/llamacpp/llamacpp_server.cpp, October 2025
   # on): the model's GGUF is not where its checkpoint should have put it (a download never made or
   # since removed), before llama-server is started
   r"\bGGUF file not found for checkpoint: \S",
   # Docker Model Runner's llama.cpp backend (pkg/inference/backends/llamacpp, 2025-2026): the model
   # artifact it was asked to run carries no GGUF (a safetensors or other packaging)
   r"\bmodel\([^)]+\) has no GGUF layer", r"\bGGUF file required by llama\.cpp backend",
   # Ollama's GGUF reader (llm/ggml.go DecodeGGML 0.1.x, fs/ggml/ggml.go to 0.33): the file's first
   # four bytes are no GGUF (a broken or HTML download), or an old GGML file it no longer takes;
   # `ollama create` and the load both stop on it (ollama#4075)
   r"\binvalid file magic\b", r"\bunsupported model format\b",
   # the same reader's bounds checks (fs/ggml/gguf.go, 2026): a tensor past the end of a truncated
   # file, a count or length no real file has; the runner's projector checks (runner/llamarunner
   # image.go 0.4 to 0.12: a projector of another architecture or for another model)
   r"offset\+size \(\d+\) exceeds file size", r"GGUF (array size|\w+ length) \d+ exceeds maximum",
   r"tensor \"[^\"]+\" (size|dimensions) \d+ exceeds maximum", r"unknown vision model architecture",
   r"projector embedding size \(\d+\) does not match model",
   # Ollama llm/server.go rewrites a runner's `unknown model …` error to this (0.1.30 to 2026);
   # its registry refuses a pull the same way (HTTP 412)
   r"this model is not supported by your version of Ollama", r"requires a newer version of Ollama",
   # the projector's loader (tools/mtmd/clip.cpp clip_init, b11434): its own `failed to load
   # model '%s': <why>` and the whys of a file made for another loader
   r"clip_init: failed to load model '", r"clip_model_loader: unable to find tensor ",
   r"failed to load CLIP model from",
   # GPT4All's llmodel_c.cpp: no backend implementation accepts the file (an architecture or
   # format the bundled llama.cpp does not know)
   r"Model format not supported \(no matching implementation found\)",
   r"unknown \(magic, version\) combination", r"this format is no longer supported",
   r"GGML files are no longer supported", r"tensor '[^']+' has wrong shape", r"wrong number of tensors",
   r"invalid model file", r"unexpectedly reached end of file", r"tensor data is not within",
   r"key not found in model:",
   # src/llama-model-loader.cpp, b11434 (require_weight, require_tensor_meta, check_tensor_dims;
   # create_tensor before them, 2024): a tensor the architecture needs is not in the file, written
   # after the function's name. Wrappers that print only the exception's text drop llama.cpp's
   # `error loading model:` before it (Ollama 0.1.x: `exception create_tensor: tensor '…' not found`).
   r"\b(create_tensor|check_tensor_dims|require_tensor_meta|require_weight): tensor '[^']+' not found",
   # the same loader's other refusals of a file's contents (b11434): its tensor count, a tensor
   # twice, a key of the wrong type or length, a split set that does not add up
   r"too many tensors created; expected \d+", r"corrupted model: \d+ tensors expected",
   r"invalid model: tensor '[^']+' is duplicated", r"key \S+ has wrong (array length|type)",
   r"has wrong array element type", r"expected scalar, found array for key",
   r"array length \d+ for key \S+ exceeds max", r"missing key \S+ in GGUF split",
   r"invalid split (count|file)", r"found tensors with invalid data",
   # src/llama-vocab.cpp, b11434: a tokenizer the file names but this build does not know (a model
   # newer than the engine), or a vocabulary the file lacks or states wrongly
   r"unknown tokenizer: '", r"cannot find tokenizer (vocab|merges) in model file",
   r"Index out of array bounds (for (scores|toktypes)|in (XCDA array|precompiled charsmap))",
   r"Unterminated string in precompiled charsmap", r"precompiled_charsmap too small",
   # src/llama-model.cpp, b11434: hyperparameters that contradict each other
   r"invalid n_rot: \d+, expected \d+", r"model has expert layers but no expert layers are used",
   # every refusal of gguf.cpp's reader (b11434 `gguf_init_from_reader`, before it
   # `gguf_init_from_file_impl`; its `failed …` lines are read above): a header, key, tensor-info
   # or size field the file states wrongly (what a damaged, truncated or hand-edited file has),
   # and a version too new
   r"gguf_init_from_\w+: (invalid|tensor|key|duplicate|number of|alignment|string length|incorrect shape"
   r"|memory size overflow|this GGUF file|encountered|bad GGUF version|GGUFv1)",
   r"unsupported model (architecture|type)", r"tensor '[^']+' (has invalid ggml type|data is not within)",
   r"invalid ggml type \d+", r"GGUF version \d+ is not supported", r"is not a valid GGUF file",
   r"failed to read (tensor info|key-value pairs|magic|header)", r"file is truncated",
   # gguf.cpp, b11434 (gguf_read_emplace_helper, gguf_init_from_reader; gguf_init_from_file_impl
   # before, as `… error while reading`): a length field read from a damaged file asks for an
   # absurd size (these are the file's fault, not the host's memory)
   r"encountered (bad_alloc|length_error)( error)? while reading",
   # gguf-py gguf_reader.py (`GGUF magic invalid`) and the mobile/JVM bindings' own magic check
   r"GGUF magic invalid", r"not in GGUF format", r"invalid GGUF magic",
   # WasmEdge's WASI-NN plugin (plugins/wasi_nn/ggml.cpp, the llama.cpp under LlamaEdge and
   # GaiaNet): the model path it was given names no file (a failed or partial download)
   r"GGML backend: Model file not found",
   r"tensor '[^']+' has invalid data", r"failed to read tensor data",
   # b11434 gguf.cpp and src/llama-model-loader.cpp, src/llama-model.cpp
   r"GGUFv1 is no longer supported", r"this GGUF file is version \d+ but this software only supports",
   r"bad GGUF version", r"GGUF data section at file offset \d+ is not \d+ byte aligned",
   r"failed to load GGUF split from", r"error loading model hyperparameters",
   # src/llama.cpp llama_model_load (b11434) wraps llama_vocab::load's throw the same way as the
   # hyperparameters'; llama-vocab.cpp's own `unknown pre-tokenizer type: '%s'` (a model newer
   # than the build) and the projector file given as the main model
   r"error loading model vocabulary", r"unknown pre-tokenizer type",
   r"CLIP cannot be used as main model",
   r"tensor '[^']+' not found in the model", r"This GGUF does not support multimodal",
   # koboldcpp gpttype_adapter.cpp (its file-format detection found no known model)
   r"^\s*Unknown Model, cannot load\.",
   # a projector without a key its loader needs (made for another loader): examples/llava/clip.cpp
   # get_key_idx, 2023-2025 (`key %s not found in file`, `Missing required key: %s`; Ollama's
   # vendored copy, ollama#7300), tools/mtmd/clip.cpp in b11434 (`Key not found: %s`)
   r"(Missing required key|Key not found): clip\.\w", r"key clip\.\S+ not found in file",
   # Jan tauri-plugin-llamacpp error.rs: said only on llama.cpp's `error loading model architecture`
   r"The model's architecture is not supported by this version of the backend",
   r"code: ModelArchNotSupported")
# stable-diffusion.cpp's loader (src/model_loader.cpp ModelLoader::init_from_file, model.cpp before
# 2026; src/stable-diffusion.cpp init_model_loader and new_sd_ctx): a file that exists but is no
# GGUF, safetensors, diffusers folder or torch checkpoint (`unknown format %s`), a path with no file
# (`file %s not found`), and the tensors that match no model family it knows (`get sd version from
# file failed`). sd-server and sd-cli stop on them before any buffer is allocated.
_e("sd.model-load", "bad-model", 60, _D,
   "stable-diffusion.cpp src/model_loader.cpp (`unknown format %s`, `file %s not found`) and "
   "src/stable-diffusion.cpp (`init model loader from file failed: '%s'`, `get sd version from file "
   "failed: '%s'`), 2023 to 2026",
   "the image model file is not one stable-diffusion.cpp can read: another format, damaged, or a "
   "model family this build does not know",
   r"\bmodel(_loader)?\.cpp:\d+\s+- (unknown format|file .+ not found$)",
   r"init model loader from file failed: '", r"get sd version from file failed: '")

# llama.cpp's BPE tokenizer of late 2023 (llm_tokenizer_bpe::tokenize in llama.cpp, before the
# pre-tokenizer types of spring 2024): a symbol with no token falls back to its single bytes, and a byte
# the vocabulary lacks prints `ERROR: byte not found in vocab: '%s'` and reads past the map (the
# segfault that follows). Loading tokenizes the newline, so a vocabulary this build's BPE code does
# not know (DeepSeek Coder's, in builds of that time) fails there: the model is newer than the
# engine, or its vocabulary is damaged.
_e("vocab.byte-missing", "bad-model", 58, _S,
   "llama.cpp llm_tokenizer_bpe (`ERROR: byte not found in vocab: '%s'`), late 2023",
   "the model's vocabulary lacks a byte this build's tokenizer needs: a vocabulary it does not know",
   r"ERROR: byte not found in vocab\b")

# A load failure whose path ends at a folder separator: the path names a folder (a checkpoint's
# download, a model store) where a model file was expected, as LLamaSharp's SafeLlamaModelHandle
# (`Failed to load model %s.`), llama-cpp-python (`Failed to load model from file: %s`) and
# llama.cpp (`failed to load model '%s'`) quote it; no engine loads a folder (LLamaSharp#332).
_e("model.path-is-folder", "bad-model", 57, _S,
   "the load failure of LLamaSharp (SafeLlamaModelHandle.LoadFromFile), llama-cpp-python and "
   "llama.cpp, quoting the path they were given",
   "the model path names a folder, not a model file",
   r"failed to load model( from file)?:? ['\"]?[^\s'\"]*[/\\]['\"]?\.?\s*$")

# Ollama llm/server.go NewLlamaServer (0.5 to 0.12, before 9db4bdbad moved every GGML model to
# llama-server) loads the model vocab-only through llama/llama.go LoadModelFromFile, which says
# `unable to load model: %s` (the blob path) when llama_model_load_from_file returns NULL; sched.go
# logs it (`NewLlamaServer failed`) and the client prints it (`Error: unable to load model:`, `500
# Internal Server Error: unable to load model:`). A vocab-only load allocates no weights, so no
# memory runs out there: the file's architecture, vocabulary or format is what this engine cannot
# read (a model newer than the installed Ollama). The runner's own full load says the same words
# after `panic: `, where an allocation may be the cause: that one is not read here.
_e("ollama.vocab-load", "bad-model", 55, _S,
   "Ollama llm/server.go NewLlamaServer's vocab-only load via llama/llama.go LoadModelFromFile "
   "(`unable to load model: %s`), 0.5 to 0.12",
   "the engine could not read the model's metadata and vocabulary (no weights were loaded): an "
   "architecture or format it does not know",
   r"(?<!panic: )(?<!\w)unable to load model: .{0,200}?\bblobs[\\/]sha256-")

# llama.cpp's closing line after a failed load: a sign only. src/llama.cpp
# llama_model_load_from_file_impl (b3xxx to b11434; `llama_load_model_from_file` before the
# rename) logs `%s: failed to load model` whenever llama_model_load returns an error, that is
# after ANY exception llama_model_load caught: a damaged file, an unknown architecture, and a
# buffer that could not be allocated alike (src/llama-model-loader.cpp load_all_data throws
# `unable to allocate %s buffer`, caught the same way). common/common.cpp
# common_init_from_params (`failed to load model '%s'`), the examples' `main: error: failed to
# load model` and koboldcpp's copies follow it. Spent batch 15 (koboldcpp#1852): alone it read
# as bad-model where the thread's cause was the host's memory.
_e("llama.load-failed", "bad-model", 20, _W,
   f"src/llama.cpp llama_model_load_from_file_impl (`llama_load_model_from_file` before the "
   f"rename), common/common.cpp common_init_from_params, tools' main, {_B} and older",
   "the model load failed, for any of the reasons llama_model_load catches (file, architecture, "
   "memory): the cause is in the lines before it",
   # llama.cpp's own functions only (a wrapper's "Fails: failed to load model" is the wrapper's)
   r"(?-i:\b(llama_load_model_from_file|llama_model_load_from_file(_impl)?|common_init_from_params"
   r"|common_init_|llama_init_from_gpt_params|load_model|main|llama_model_load)\w*: (error: )?failed to load model)")

# --------------------------------------------------------------------------- wrappers
# Wrappers' generic words around a failure: signs only (WEAK). They are shown as evidence
# but never decide, since each of them follows many causes (an OOM, an unknown
# architecture, a missing DLL all end in `Failed to load model`).
_e("wrapper.load-failed", "bad-model", 20, _W,
   "llama-cpp-python llama.py (`Failed to load model from file`); LM Studio (`Error loading model.`); "
   "Jan/cortex; text-generation-webui modules/models.py; koboldcpp (`Could not load text model`); "
   "LocalAI (`could not load model`); Ollama llm/server.go (`error loading llama server`)",
   "the wrapper saw the load fail; the cause is in the engine's own lines",
   r"Failed to load model from file", r"Error loading model\.", r"Failed to load the model",
   r"Could not load text model", r"could not load model", r"error loading llama server",
   r"failed to load model with internal loader", r"unable to load model", r"Failed to load model\b",
   # older llama-cpp-python llama.py: the load failed and the binding only asserts it
   r"assert self\.model is not None",
   # Ollama server/sched.go (0.1.4x to 0.5): appended to any error with `failed to load model`,
   # an out-of-memory included; Ollama 0.20's `model failed to load, this may be due to
   # resource limitations or an internal error`; LocalAI pkg/model (`backend %s returned no
   # usable model`)
   r"this model may be incompatible with your version of Ollama",
   r"model failed to load, this may be due to resource limitations",
   r"returned no usable model")
# Two wrappers' memory figures, read by stoker/diagnosis/wrapper_memory.py over several lines
# (no single line proves them, so their patterns match nothing; evidence.gather adds the piece
# on the line the reader names). Widened from spent batch 18 (lmstudio-bug-tracker#14,
# ollama#10739); wrapper_memory.py says what each field means and why the cut is where it is.
_e("lmstudio.ram-exhausted", "host-oom", 60, _S,
   "LM Studio 0.2.x load-error JSON (`data.memory`: `ram_capacity`, `ram_unused`), as pasted in "
   "lmstudio-bug-tracker#14 and llama-cpp-python#1556",
   "the system memory LM Studio found unused when the load failed was under a ten-thousandth of "
   "the total: the host's memory had run out (strong, not decisive: a figure taken after the "
   "failure, not the failing allocation; an engine's own allocation line before it wins)",
   r"(?!)")
_e("ollama.estimate-host-tight", "host-oom", 20, _W,
   "Ollama llm/server.go and llm/memory.go (0.3 to 0.11): `msg=\"system memory\" ... free=... "
   "free_swap=...` with `msg=offload ... memory.required.full=... memory.required.partial=...`",
   "Ollama's own estimate put at least nine tenths of the free system memory (with swap) on the "
   "host: a runner the kernel then kills leaves no line of its own; a sign only (a forecast, "
   "not a failure)",
   r"(?!)")
# Windows' crash report read by stoker/diagnosis/crash_reports.py over several lines (the faulting
# module, its version and the exception are fields of their own): a program built with Visual
# Studio 2022 17.10 or later faults in an older msvcp140.dll. Widened from spent batch 65
# (gpustack/llama-box#10; gpustack#861 of batch 12 is the same report).
_e("windows.msvc-runtime-too-old", "system-too-old", 77, _S,
   "Windows Error Reporting (APPCRASH `Sig[3..6]`) and the Application log's event 1000 "
   "(`Faulting module name`, `<Data>` fields); Microsoft STL changelog, VS 2022 17.10 (MSVC 14.40)",
   "the program faulted (0xc0000005) inside a Visual C++ runtime older than 14.40, which programs "
   "built with MSVC 14.40 or later need: the installed runtime is too old (install the current "
   "Visual C++ Redistributable)",
   r"(?!)")
_e("wrapper.layout-unfit", "device-oom", 65, _S,
   "Ollama llm/server.go (its own engine's layout fit, 0.11 and later): `memory layout cannot be "
   "allocated` (with `num_gpu = N`)",
   "the wrapper found no placement of the layers that fits the free memory: an out-of-memory "
   "found before the engine allocated (the build's device decides which)",
   r"memory layout cannot be allocated",
   # llm/server.go 0.11 to 0.2x: the runner's layout pass (LoadOperationAlloc/Commit) answered
   # Success false, which runner/ollamarunner sends only for ml.ErrNoMem
   r"failed to (allocate|commit) memory for model")
_e("metal.over-working-set", "metal-oom", 20, _W,
   f"ggml/src/ggml-metal/ggml-metal-device.m ggml_metal_log_allocated_size, {_B}; older "
   "ggml-metal.m ggml_metal_add_buffer: `warning: current allocated size is greater than the "
   "recommended max working set size`",
   "Metal's allocations already exceed the working set the OS recommends: a sign only (the run "
   "may go on); with a Metal command-buffer failure that names no error it says which",
   r"current allocated size is greater than the recommended max working set size")
_e("wrapper.context-failed", "device-oom", 20, _W,
   "llama-cpp-python llama.py (`Failed to create llama_context`); common.cpp (`failed to create context`)",
   "the context could not be created (most often memory); the cause is in the engine's lines",
   r"Failed to create llama_context", r"failed to create context with model")
_e("wrapper.runner-ended", "assertion-failed", 20, _W,
   "Ollama llm/server.go (`llama runner process has terminated`); LocalAI gRPC (`error reading from "
   "server: EOF`); Jan (`cortex exited`); koboldcpp (`Failed to execute script`)",
   "the engine process ended; the exit or the engine's lines say why",
   r"llama runner process has terminated", r"error reading from server: EOF", r"cortex exited with code",
   r"Failed to execute script", r"rpc error: code = Unavailable", r"grpc service not ready",
   # Ollama llm/server.go with llama-server as its runner (0.12 to 2026) and its API's words
   r"llama-server process has terminated", r"llama-server process no longer running",
   r"llama runner terminated", r"model runner has unexpectedly stopped",
   # LocalAI pkg/model (v1.40 to v4): the backend's gRPC process died or never answered
   r"GRPC (Model|Process) (is )?not responding", r"Backend process exited unexpectedly",
   r"failed starting/connecting to the gRPC service", r"the model is not responding anymore",
   # text-generation-webui modules/llama_cpp_server.py
   r"Server process terminated unexpectedly with exit code",
   # llama-swap internal/process (and proxy/process.go before it)
   r"upstream (process )?exited unexpectedly", r"process exited with error:",
   r"upstream command exited prematurely",
   # Jan tauri-plugin-llamacpp commands.rs and error.rs
   r"llama\.cpp (failed early|exited) with (error )?code", r"llama\.cpp exited successfully but without ready signal",
   r"The model process encountered an unexpected error", r"code: LlamaCppProcessError")
# A binding that refused a GGML-era file. LangChain's LlamaCpp (langchain/llms/llamacpp.py, 2023:
# `Could not load Llama model from path: %s. Received error %s`) over llama-cpp-python, which raises
# when llama.cpp's loader returns no model. A `.bin` file is a GGML-era model: llama.cpp refused
# the older GGML revisions from May 2023 (`this format is no longer supported`) and every GGML file
# from August 2023 (GGUF), and a crash or a memory failure of that loader leaves its own line, so
# a load refused with no other line is the file's format (llama.cpp#3183, private-gpt#113 and
# #1029). Strong, ranked below the engine's own lines, which name the cause when the log has them.
_e("binding.ggml-file-refused", "bad-model", 22, _S,
   "LangChain langchain/llms/llamacpp.py validate_environment (2023) over llama-cpp-python's "
   "Llama(), and LLamaSharp's LoadWeightsFailedException (0.10 on, GGUF-only backends); llama.cpp's "
   "GGML (.bin) formats, dropped in May and August 2023",
   "the loader refused a GGML-era (.bin) model file, a format the engine no longer reads",
   r"Could not load Llama model from path: \S*\.bin\b",
   # LLamaSharp's own refusal (LLama/Exceptions/RuntimeError.cs LoadWeightsFailedException, 0.10 of
   # February 2024 on: `Failed to load model '%s'`, thrown when llama_model_load_from_file returns
   # no model): every backend it ships since 0.5 (September 2023) reads GGUF only, so a `.bin`
   # GGML-era file is refused for its format (LLamaSharp#999: wizardLM-7B.ggmlv3.q4_1.bin)
   r"LoadWeightsFailedException: Failed to load model '[^']*\.bin'")
_e("wrapper.start-guess", "bad-model", 20, _W,
   "Unsloth Studio studio/backend core/inference (2026): `llama-server failed to start. Check that "
   "the GGUF file is valid and you have enough memory.`, said of any start that failed, also when "
   "the program itself is missing (unsloth#8184)",
   "the wrapper's own guess at a failed start",
   r"llama-server failed to start\. Check that the GGUF file is valid")
# Unsloth Studio's own diagnoses of a llama-server that would not start (studio/backend/core/inference
# llama_cpp.py, 2026: the explanation it builds from the server's output and exit status, shown in
# the app and raised as RuntimeError): each names the cause it read, so a user's paste of only that
# sentence still tells it. Strong, not decisive: when the paste carries the server's own lines,
# those are read too and the order decides between them. Its last-resort guess (`Check that the
# GGUF file is valid and you have enough memory`) is wrapper.start-guess, weak. Not read: the
# warnings before its own retries (`failed to start with speculative drafter …`, `a HIP kernel-image
# error on GPU(s) … Retrying on GPU(s) …`), since the retry's outcome, not the first try's, ends
# the start.
_UNSLOTH = "Unsloth Studio studio/backend/core/inference/llama_cpp.py (2026)"
_e("unsloth.library-missing", "missing-library", 75, _S,
   f"{_UNSLOTH}: _missing_library_message (`cannot open shared object file`), and exit 127",
   "the wrapper found a library its llama-server needs missing, or the program itself",
   r"llama-server could not start: the system library \S+ is missing",
   r"llama-server could not start: \S+ is part of (Unsloth's own llama\.cpp runtime and is missing"
   r"|the llama\.cpp runtime that the llama-server binary in use was built with\. That binary)",
   r"llama-server could not start: \S+ is missing from that exact location",
   r"llama-server exited immediately \(status 127\): either the llama-server executable could not be found")
_e("unsloth.library-mix", "stale-library", 76, _S,
   f"{_UNSLOTH}: a bundled HIP library resolving a symbol in the system's ROCm; a macOS binary "
   "built for the other CPU architecture",
   "the wrapper found libraries or a binary from another build than the one it runs",
   r"looked up \S+ in a different ROCm than it was built against",
   r"llama-server could not start: the executable was built for a different CPU architecture")
_e("unsloth.argument", "bad-argument", 70, _S,
   f"{_UNSLOTH}: llama-server's `invalid argument` and `error while handling argument` in its "
   "words, and tensor parallelism asked for an architecture without it",
   "an argument the wrapper passed (often from the model's extra arguments) was refused",
   r"llama-server does not recognise the argument '", r"llama-server rejected the value for '",
   r"Tensor parallelism is not supported for this model's architecture")
_e("unsloth.model", "bad-model", 60, _S,
   f"{_UNSLOTH}: `invalid magic characters`, `unknown model architecture`, a projector refused",
   "the wrapper read llama-server's refusal of the model file: not a GGUF, an architecture this "
   "build does not run (an image or video model among them), or a projector it cannot load",
   r"llama-server opened a file that is not a GGUF", r"llama\.cpp does not support this GGUF's model architecture",
   r"is an? (diffusion \(image-generation\)|text-to-video|image / video generation) GGUF, "
   r"which llama-server cannot run",
   r"Vision projector incompatible with this llama\.cpp build")
_e("unsloth.gpu-init", "gpu-error", 40, _S,
   f"{_UNSLOTH}: a crash at start-up with and without the vision projector",
   "the wrapper found the GPU runtime crashing as it started, whatever the model",
   r"a GPU driver/runtime initialization crash, not a model or vision-projector problem")
_e("unsloth.stopped", "stopped", 45, _S,
   f"{_UNSLOTH}: exit status -15 before /health answered",
   "the server was asked to stop (SIGTERM) before it was ready: an unload, a cancel or a supervisor",
   r"llama-server was terminated \(signal 15\) before it became healthy")
_e("unsloth.never-healthy", "startup-timeout", 50, _S,
   f"{_UNSLOTH}: `health check timed out`",
   "the server ran but never answered its /health check in the wrapper's time",
   r"llama-server started but never became healthy on its local /health endpoint")
# ... and its guess after a SIGKILL with no output, which Stoker's own reading of a bare SIGKILL
# shares (the kernel's out-of-memory killer, said as unsure); on macOS it names a refused code
# signature too, which is not read
_e("unsloth.killed", "host-oom", 20, _S,
   f"{_UNSLOTH}: exit status -9 with no output, outside macOS",
   "the wrapper's guess at a SIGKILL with nothing in the log: most often the out-of-memory killer",
   r"llama-server was stopped by the operating system \(signal 9\), most likely out of memory")
_e("wrapper.crash-guess", "host-oom", 20, _W,
   "gpt4all chat (`Previous attempt to load model resulted in crash ... most likely due to out "
   "of memory`): its guess after any crash on load, also a CPU without AVX",
   "the wrapper's own guess at a crash it did not see",
   r"Previous attempt to load model resulted in crash")
_e("wrapper.gpu-library-absent", "missing-library", 20, _W,
   "llamafile (`support for --gpu %s was explicitly requested, but it wasn't available`): no GPU "
   "module could be loaded or built, whether the library, the driver or the compiler is missing",
   "llamafile found no usable GPU module",
   r"support for --gpu \w+ was explicitly requested, but it wasn't available")
_e("wrapper.gpu-fallback", "gpu-error", 20, _W,
   "Ollama discover (`no compatible GPUs were discovered`, `amdgpu is not supported`); LM Studio",
   "the wrapper did not use the GPU; whether that is the failure depends on the plan",
   r"no compatible GPUs were discovered", r"amdgpu is not supported", r"unable to verify rocm library",
   # Ollama discover (0.12 to 2026): discovery gave up; koboldcpp.py's auto layers
   r"failure during (llama-server )?GPU discovery", r"GPU discovery watchdog timed out",
   r"failed to finish discovery before timeout",
   r"No GPU backend found, or could not automatically determine GPU layers")
# martin-olivier/dylib (the loader cortex.cpp, Jan's engine server, uses): `Could not load library
# "%s"` then, on a line of its own, the OS loader's reason (dlerror; FormatMessage on Windows).
# cortex found the file before loading it, so with the reason lost (a log cut at the line, or
# FormatMessage's empty text) what remains is Windows failing on a DLL that engine.dll needs:
# ERROR_MOD_NOT_FOUND, the CUDA runtime DLLs Jan downloads apart (jan#4149, cortex.cpp#1887).
# A reason that is there decides by its own line (another build's entry point: stale-library).
_e("dylib.load-failed", "missing-library", 74, _S,
   "martin-olivier/dylib load_error (`Could not load library \"%s\"`), in cortex.cpp 1.0 and Jan "
   "0.5 (engine.dll, libengine.so)",
   "the engine library is present but the OS loader refused it: most often a library it depends on "
   "is not installed",
   r"Could not load library \"[^\"]+\"\s*$")
# LocalAI core/cli/worker (worker_llamacpp.go, worker_ds4.go, worker_backend_common.go, 3.x): the
# P2P/RPC worker's backend (the llama-cpp package holding rpc-server) is not installed.
_e("localai.worker-backend-absent", "missing-library", 75, _D,
   "LocalAI core/cli/worker (`llama-cpp backend not found, install it first`, `%s backend not found "
   "after install`, `backend not found, failed to install it`), 3.x",
   "the backend package the worker runs (its rpc-server) is not installed",
   r"\b[\w.-]+ backend not found(, install it first| after install|, failed to install it)")
# Ollama 0.1.1x-0.1.3x llm/dyn_ext_server.c (dynamic_shim.c before): LoadLibrary/dlopen of its
# runner library (ext_server.so, ext_server.dll) failed, `Unable to load dynamic server library:
# %s` with the loader's words after it. Those words, when readable, rank above this (a `cannot
# open shared object file`, a DLL initialization failure); a line where they are lost (Windows'
# message garbled in another code page, ollama#2888; a unicode path, fixed in 0.1.33) is the
# loader refusing the runner: missing-library, as for dylib.load-failed.
_e("ollama.runner-library-load-failed", "missing-library", 30, _S,
   "Ollama llm/dyn_ext_server.c (`Unable to load dynamic server library: %s`) and dyn_ext_server.go "
   "(`Unable to load dynamic library: %s`), 0.1.1x to 0.1.3x",
   "the OS loader refused Ollama's runner library: most often a library it depends on is missing",
   r"Unable to load dynamic server library")
_e("wrapper.engine-library", "missing-library", 20, _W,
   "Jan's cortex.cpp engine loader (`Could not load engine: %s`, `Failed to load engine: %s`)",
   "the wrapper could not load its engine library; the loader's reason (a missing DLL, another "
   "build's, an instruction this CPU lacks) is in the rest of the line or log",
   r"Could not load engine: ", r"Failed to load engine: ")


# src/llama.cpp llama_prepare_model_devices in builds before b11434's `!model->devices.empty()`
# guard (JamePeng's llama-cpp-python fork of 2026 among them): main_gpu 0 refused with zero
# devices. The GPU backend never gave a device (its library or the runtime it needs did not
# load, no driver, no GPU); which one, only the lines before it can say.
_e("gpu.no-device", "missing-library", 20, _W, f"src/llama.cpp llama_prepare_model_devices, {_OLD}",
   "the engine found no GPU device at all; the reason is in the lines before it",
   r"invalid value for main_gpu: -?\d+ \(available devices: 0\)")
# Lemonade's C++ CLI (src/cpp/cli/lemonade_client.cpp assert_http_ok, Aug 2026): `Could not
# connect to Lemonade server (<httplib::to_string(error)>)`. cpp-httplib's Error::Read, `Failed
# to read connection`, means the server took the request and no reply came in the CLI's read
# timeout; a server that is not running gives Error::Connection (`Could not establish
# connection`) instead. Inside `Error loading model:` it is the CLI giving up on a model still
# loading (lemonade#1594 finished loading a minute later). A server that crashed mid-load also
# ends the read, so it is strong, not decisive: a crash line before it names that cause.
_e("lemonade.load-reply-lost", "startup-timeout", 50, _S,
   "lemonade-sdk/lemonade src/cpp/cli/lemonade_client.cpp (2026); cpp-httplib Error::Read",
   "the wrapper's client stopped waiting for the model load it had asked for",
   r"Error loading model: Could not connect to Lemonade server \(Failed to read connection\)")
# llama-server's answer to any request before its model is loaded (tools/server/server-http.cpp
# middleware_server_state, b11434: status 503 with `{"error": {"code": 503, "message": "Loading
# model", "type": "unavailable_error"}}`), printed by a client as its error: the client asked
# while the engine was still loading and ended there instead of waiting (canonical/inference-snaps
# #234, the snap's chat command). Strong, not decisive: a crash line in the same log is the reason
# the load never finished.
_e("server.loading-model-reply", "startup-timeout", 48, _S,
   "llama-server tools/server/server-http.cpp (503 `Loading model`, `unavailable_error`), b11434",
   "a client got the engine's `still loading` answer and gave up instead of waiting for the load",
   r"\"Loading model\".{0,40}\bunavailable_error\b|\bunavailable_error\b.{0,60}\"Loading model\"")
_e("wrapper.start-timeout", "startup-timeout", 50, _D,
   "llama-swap proxy/process.go; Ollama llm/server.go; systemd; Kubernetes",
   "the wrapper gave up waiting for the engine to become ready",
   r"health check (failed|timed out) after \d+", r"timed out waiting for llama runner to start",
   r"health check of container .* timed out", r"start operation timed out\. Terminating",
   r"Failed with result 'timeout'", r"failed startup probe", r"Startup probe failed",
   r"timed out waiting for (llama-server|the server|server) to (start|become)",
   # Jan tauri-plugin-llamacpp commands.rs (180 s without llama-server's ready line)
   r"The model took too long to load and timed out", r"code: ModelLoadTimedOut",
   # ComfyUI-Prompt-Manager's llama.cpp node (and others' wait loops): its wait ran out
   r"\b[Ss]erver did not start in time",
   # RamaLama's RAG front end polling llama-server's /health (containers/ramalama#2129)
   r"\bllama-server at \S+ did not become ready after \d+ ?(s|sec|seconds)\b",
   # Unsloth Studio's CLI (unsloth_cli/commands/studio.py, 2026: `Error: server did not become
   # healthy within 30 seconds.`) and its installers (`did not become healthy within Ns`)
   r"\bdid not become healthy (within|in) \d+ ?(s|sec|seconds)\b")
# llama-swap polls the upstream's check endpoint (`/health` unless checkEndpoint says otherwise)
# until it answers 200 or healthCheckTimeout runs out. A 404 there is the upstream serving HTTP
# without that path (an engine that is not llama-server, or a wrong checkEndpoint): llama-server
# answers 503 while it loads, so the check can never pass and the start ends in the wrapper's
# timeout (llama-swap#84, KoboldCpp behind it). Releases v88-v96 print `!!! Health check error:
# status code: 404`, v104-v216 `<model> Health check error on <url>, status code: 404 (normal
# during startup)`; later ones log no failed check. Strong, not decisive, and below the engine's
# own failures: a crash or a refusal the log shows is the cause of the start never completing.
_e("llama-swap.check-endpoint-not-served", "startup-timeout", 48, _S,
   "llama-swap proxy/process.go checkHealthEndpoint (v88-v216: `Health check error: %v`, `Health check "
   "error on %s, %v (normal during startup)` with `status code: %d`)",
   "the upstream answered without the check endpoint, so the wrapper's ready check could not pass",
   r"Health check error( on \S+,|:) status code: 404\b")
_e("wrapper.ttl-unload", "stopped", 45, _D, "llama-swap proxy/process.go (TTL)",
   "the wrapper unloaded the model on purpose", r"Unloading model, TTL of \d+s? reached")

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
   r"segfault at \S+ ip \S+ (sp \S+ )?error \d+ in (libamd_comgr|libamdhip64|libhsa-runtime64"
   r"|libcuda|libnvidia-\w+|libcudart|libcublas(Lt)?|libvulkan_\w+|libamdvlk\w*|libze_\w+|libigc)\b")
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


# Every name of the runtime tables above is an entry of its own, so a runtime error the
# hand-written wordings miss is still read by its name (`CUDA error 209: cudaErrorNoKernel…`).
# gpu-unused is decided from the whole log (silent_fallbacks.gpu_unused_from_log), not from one name.
KIND_RANK = {"cuda-driver-too-old": 90, "no-kernel-image": 90, "gpu-oom": 80, "rocm-oom": 80,
             "vulkan-oom": 80, "metal-oom": 80, "device-oom": 80, "host-oom": 78,
             "missing-library": 75, "bad-argument": 70, "gpu-error": 40}
for _table, _api in ((CUDA_ERRORS, "cudaError_t"), (CUDA_DRIVER_ERRORS, "CUresult"), (HIP_ERRORS, "hipError_t"),
                     (VK_RESULTS, "VkResult"), (METAL_ERRORS, "MTLCommandBufferError"),
                     (SYCL_ERRORS, "Level Zero / SYCL")):
    for _name, _value in _table.items():
        _number, _kind = _value if isinstance(_value, tuple) else (None, _value)
        if _kind not in KIND_RANK:
            continue
        _e(f"enum.{_name}", _kind, KIND_RANK[_kind], _S if _kind == "gpu-error" else _D,
           f"{_api} {_name}" + ("" if _number is None else f" ({_number})"),
           f"the runtime returned {_name}", rf"\b{re.escape(_name)}\b", case=True)


ENTRIES: tuple[Entry, ...] = tuple(_ENTRIES)
_BY_NAME = {e.name: e for e in ENTRIES}
assert len(_BY_NAME) == len(ENTRIES), "entry names are unique"

def _literals(items: _sre_parse.SubPattern) -> frozenset[str] | None:
    """Lower-case strings at least one of which every match of the parsed pattern contains,
    or None when the pattern has no such literal (it must then be tried on every line)."""
    best = ""
    run = ""
    nested: frozenset[str] | None = None
    # Iterating a SubPattern is iterating its data. The stubs type each argument as the union of
    # every opcode's, so the shapes are checked here: LITERAL an int, SUBPATTERN (group,
    # add_flags, del_flags, pattern), BRANCH (None, patterns); always so at run time.
    for op, arg in items.data:
        if op is _sre.LITERAL and isinstance(arg, int):
            run += chr(arg)
            best = max(best, run, key=len)
            continue
        run = ""
        if op is _sre.SUBPATTERN and nested is None and isinstance(arg, tuple) and len(arg) == 4:
            nested = _literals(arg[3])
        elif op is _sre.BRANCH and nested is None and isinstance(arg, tuple) and isinstance(arg[1], list):
            branches = [_literals(b) for b in arg[1]]
            found = [b for b in branches if b is not None]
            if len(found) == len(branches):
                nested = frozenset[str]().union(*found)
    if len(best) >= 3:
        return frozenset({best.lower()})
    return nested


def _needles(entry: Entry) -> frozenset[str] | None:
    return _literals(_sre_parse.parse(entry.pattern.pattern, entry.pattern.flags))


# A line is tried only against the entries one of whose literals it contains (lower-cased),
# found through the literals' first three letters, so the ~100 patterns cost one set
# intersection on the many lines that match none. Deciding is unchanged by this (every
# literal is one a match must contain); an entry without one would be tried on every line.
_NEEDLES = tuple((e, _needles(e)) for e in ENTRIES)
_ALWAYS = tuple(e for e, needles in _NEEDLES if needles is None)
_BY_TRIGRAM: dict[str, list[tuple[Entry, str]]] = {}
for _entry, _needle_set in _NEEDLES:
    for _needle in _needle_set or ():
        _BY_TRIGRAM.setdefault(_needle[:3], []).append((_entry, _needle))
_TRIGRAMS = frozenset(_BY_TRIGRAM)


def entry(name: str) -> Entry:
    return _BY_NAME[name]


def matches(line: str) -> tuple[Entry, ...]:
    """Every entry one (prefix-stripped) log line matches, highest rank first."""
    low = line.lower()
    seen = _TRIGRAMS.intersection(low[i:i + 3] for i in range(len(low) - 2))
    candidates = {e for tri in seen for e, needle in _BY_TRIGRAM[tri] if needle in low}
    candidates.update(_ALWAYS)
    hits = [e for e in candidates if e.pattern.search(line)]
    return tuple(sorted(hits, key=lambda e: (-e.rank, e.name)))
