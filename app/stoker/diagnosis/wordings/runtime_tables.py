"""The GPU runtimes' error names and numbers (cudaError_t, CUresult, hipError_t, VkResult,
MTLCommandBufferError, Level Zero / SYCL) with the kind each proves, and one catalogue entry per
name, so a runtime error no hand-written wording covers is still read by its name.

Pure data, like the rest of stoker.diagnosis.wordings: no files, no clock, nothing run.
"""

from __future__ import annotations

import re

from stoker.diagnosis.wordings.entry import Strength, Wordings

_D, _S = Strength.DECISIVE, Strength.STRONG
_wordings = Wordings()
_e = _wordings.add

# ------------------------------------------------------------- GPU runtime libraries
# The GPU vendors' driver and runtime libraries by file name, Linux and Windows: NVIDIA's driver
# (libcuda, libnvidia-*, nvcuda, its OpenGL/D3D drivers) and CUDA runtime and cuBLAS; AMD's HIP and
# HSA runtimes, code-object compiler, Vulkan (AMDVLK), OpenCL and D3D/OpenGL drivers; Intel's
# Vulkan, OpenCL and Level Zero drivers and graphics compiler; Mesa's Vulkan drivers. A process that
# faults inside one crashed in the vendor's code. Not the engine's own GPU backend
# (libggml-cuda.so, ggml-cuda.dll), whose crash is ggml's. One list, so the kernel's segfault line
# (gpu_errors.py) and the debugger's and Windows' crash reports (crash_reports.py) agree.
GPU_RUNTIME_LIBRARY = (
    r"(?:nvcuda(?:64)?\.dll|nvoglv(?:32|64)\.dll|nvwgf2umx(?:_cfg)?\.dll|libcuda\.so[.\d]*"
    r"|libnvidia-[\w-]+\.so[.\d]*|cudart64_\d+\.dll|libcudart\.so[.\d]*|cublas(?:Lt)?64_\d+\.dll"
    r"|libcublas(?:Lt)?\.so[.\d]*|(?:lib)?amdvlk(?:32|64)?\.(?:dll|so)|amdhip64(?:_\d+)?\.dll"
    r"|libamdhip64\.so[.\d]*|libhsa-runtime64\.so[.\d]*|amd_comgr\w*\.dll|libamd_comgr\.so[.\d]*"
    r"|amdxc(?:32|64)\.dll|atig6pxx\.dll|atiumd\w*\.dll|amdocl\w*\.dll|libamdocl\w*\.so[.\d]*"
    r"|igvk(?:32|64)\.dll|igc(?:32|64)\.dll|igdrcl\w*\.dll|ze_intel_gpu\w*\.dll|libze_\w+\.so[.\d]*"
    r"|libigc\.so[.\d]*|libvulkan_\w+\.so)")

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
    "cudaErrorInvalidPtx": (218, "no-kernel-image"),  # no binary for the device, and its PTX JIT failed
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
    "CUDA_ERROR_INVALID_PTX": (218, "no-kernel-image"),
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
    "a PTX JIT compilation failed": "no-kernel-image",  # cudaErrorInvalidPtx (218)
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


ENTRIES = _wordings.entries()
