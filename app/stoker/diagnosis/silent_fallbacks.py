"""What an engine's log says it silently went without: its GPU (`gpu_unused_from_log`) or the
drafter it was given (`drafter_dropped_from_log`).

Neither ends the engine, so neither is a failure by itself: the fleet's health view reads them
from a READY engine's start-up log (fleet/exit_diagnosis.py, the engines' driver), and
classify.py reads the GPU one when nothing else explains an engine a wrapper stopped. Pure: log
lines in, the line that shows it (or None) out. It must not name a failure kind; that is
classify.py's.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from stoker.diagnosis.catalogue import DRAFTER_DROPPED, entry
from stoker.diagnosis.log_lines import HOST, device_of_buffer, strip_log_prefix, unwrapped

GPU_BACKENDS = frozenset({"cuda", "rocm", "vulkan", "metal", "sycl", "musa", "opencl"})


# Ollama's own words for a GPU its build has no code for (discover, 2026: dropped before
# llama-server starts; 0.1.3x gpu/amd_linux.go: `amdgpu [%d] %s is not supported by %s %v`). Each
# is a line leaving the GPU below and, when nothing else failed, names the build as the cause
# (lacks_the_gpus_architecture).
_OLLAMA_SKIPPED_A_CARD_ITS_BUILD_LACKS = (r"skipping CUDA device . compute capability not in compiled architectures"
                                          r"|dropping ROCm device . no rocblas support for gfx target")
_OLLAMA_AMDGPU_NOT_SUPPORTED = r"amdgpu \[\d+\] gfx\w+ is not supported by "
# Ollama's words for giving a found GPU up because the CPU lacks AVX (0.1.3x-0.5.1 gpu/gpu.go,
# discover/gpu.go: its GPU runners were built with AVX; the check is gone from 0.5.4), and 0.1.2x
# cpu_common.go's word just before that (`CPU does not have vector extensions`), which a cut paste
# may keep alone (_ollama_found_a_gpu_on_a_cpu_without_avx)
_OLLAMA_GAVE_THE_GPU_UP_FOR_NO_AVX = (r"CPU does not have AVX or AVX2, disabling GPU support"
                                      r"|CPU does not have minimum vector extensions, GPU inference disabled")
_OLLAMA_CPU_WITHOUT_AVX = re.compile(r"msg=\W?CPU does not have vector extensions")

# RamaLama ramalama/common.py select_cuda_image (April 2025, 3d880487, to February 2026, cf5d4eb2):
# the CUDA version nvidia-smi reports (the newest the installed driver supports) under 12.4 raised
# `CUDA version (11, 4) is not supported. Minimum required version is 12.4.`, logged as a warning
# with `: Falling back to default image.`, so the engine runs from the image without CUDA: the GPU
# goes unused because the driver is too old. (0, 0) is its reading when nvidia-smi is missing or
# unparsable, no driver age, so it is not read.
_RAMALAMA_CUDA_BELOW_MINIMUM = r"CUDA version \([1-9]\d*, \d+\) is not supported\. Minimum required version is \d"

# A wrapper saying in its own words that it found a GPU and will run on the CPU, so these count
# whatever the build the log shows (the wrapper carries GPU libraries the log may not name).
_WRAPPER_LEFT_THE_GPU = re.compile(
    # Ollama 0.1.2x-0.1.3x gpu/gpu.go, amd_linux.go, amd_windows.go
    r"CUDA GPU is too old\. Falling back to CPU|falling back to CPU mode|no suitable rocm found, falling back to CPU"
    r"|all detected amdgpus are skipped, falling back to CPU|amdgpu detected, but no compatible rocm library found"
    # Ollama 0.1.3x-0.5 gpu/gpu.go: a CPU without AVX gets no GPU runner
    rf"|{_OLLAMA_GAVE_THE_GPU_UP_FOR_NO_AVX}"
    # Ollama 0.3-0.12 gpu/, discover/: the AMD device cannot be opened, the CUDA library and the driver disagree
    # (not its `unable to load amdhip64_6.dll, please make sure to upgrade to the latest amd
    # driver`: amd_windows.go logs it at DEBUG on every Windows machine without HIP, NVIDIA's too)
    r"|kfd driver not loaded|amdgpu devices detected but permission problems block access"
    r"|version mismatch between driver and cuda driver library"
    # Ollama discover (2026): devices dropped before llama-server starts
    rf"|{_OLLAMA_SKIPPED_A_CARD_ITS_BUILD_LACKS}|AMD driver is too old\. Update your AMD driver"
    # koboldcpp.py: the GPU library is not in the bundle, so its CPU library runs
    r"|(CuBLAS|hipBLAS|Vulkan|CLBlast) library file not found\. CPU library will be used"
    # llamafile: layers asked of a machine where it found no GPU
    r"|--n-gpu-layers \d+ was passed but no GPUs were found"
    # node-llama-cpp src/bindings/getLlama.ts (3.x): the CUDA or Metal prebuilt it chose did not
    # load. It tries CUDA only when it found NVIDIA's driver and CUDA libraries
    # (detectAvailableComputeLayers) and Metal only on Apple silicon, so a GPU was there; its
    # Vulkan attempt follows any Vulkan loader (a headless server's too), so that form is not read
    r"|prebuilt binary for platform \S+ \S+ with (CUDA|Metal) support"
    r"( is not compatible with the current system)?, falling back to using no GPU"
    # Lemonade's llama.cpp wrapper (its Python server of 2025, as in lemonade-sdk/lemonade#50):
    # its GPU llama-server exited before /health answered, so it starts the model again on the CPU
    r"|on GPU didn't work, re-attempting on CPU"
    # Ollama discover (0.12 on; `user's` in discover/runner.go of 2026): OLLAMA_LLM_LIBRARY names
    # a family (`cuda`) where the bundle's folders are versioned (`cuda_v12`, `cuda_v13`), so
    # every GPU library is skipped
    r"|skipping available library at user'?s request\W+requested=(?P<family>\w+)"
    r"\W+libDir=\S*[/\\](?P=family)_\w+"
    # LocalAI's all-in-one image, aio/entrypoint.sh (March 2024 to March 2026): lspci shows the
    # vendor's card but the container lacks its runtime (nvidia-smi without `--gpus`, /opt/rocm,
    # /opt/intel), so it picks the CPU profile (mudler/LocalAI#2394). Its closing `GPU acceleration
    # is not enabled or supported. Defaulting to CPU.` is said on a machine with no GPU too: not read.
    r"|(NVIDIA|AMD|Intel) GPU detected( via WSL2)?, but .{1,60} (is|are) not installed\. "
    r"GPU acceleration will not be available"
    rf"|{_RAMALAMA_CUDA_BELOW_MINIMUM}", re.IGNORECASE)


# Ollama's scripts/install.sh (0.1.x to 2026): neither nvidia-smi nor lspci/lshw shows an NVIDIA or
# AMD device (under WSL 2 the GPU sits behind the driver, ollama#4659). Ollama's Linux releases
# carry GPU runners, so it counts when no build is stated; a stated CPU build never meant to use a GPU.
_OLLAMA_INSTALL_FOUND_NO_GPU = re.compile(r"No NVIDIA(/AMD)? GPU detected\. Ollama will run in CPU-only mode")
# Ollama's AMD discovery (gpu/amd_linux.go, amd_windows.go 0.1.3x-0.5; discover/ after) names a card
# it found and refuses, against the gfx list of the ROCm libraries it ships: the card exists and
# goes unused whatever build the log shows (ollama#8679, an install whose log names no backend). As
# with the installer's line, a stated CPU build never meant to use it.
_OLLAMA_REFUSED_AN_AMD_CARD = re.compile(rf"amdgpu is not supported \(supported types|{_OLLAMA_AMDGPU_NOT_SUPPORTED}")


# Ollama gpu/, discover/ gpu_info_nvcuda.c and gpu_info_cudart.c (0.1.3x-0.12): the driver library
# it found failed cuInit/cudaGetDeviceCount with this number, or (gpu_info_cuda.c, 0.1.1x-0.1.2x:
# `CUDA not detected: nvml vram init failure: 9`) NVML, which only NVIDIA's driver installs,
# failed nvmlInit (9: the Linux driver's library under WSL, ollama#1898). 35 (driver older than the runtime)
# is the catalogue's own. libcuda is only there with NVIDIA's driver, and the cudart Ollama ships
# answers 35 (no driver) or 100 (no device: none, or CUDA_VISIBLE_DEVICES=-1) where there is none,
# so any other number is a driver and GPU that failed to start (999, 802, 3: ollama#5166, #6647,
# #9031) even when no build is stated (Ollama's Linux and Windows releases carry CUDA runners); a
# stated CPU build stays CPU, and 100 counts only for a GPU build.
_OLLAMA_DRIVER_INIT_FAILURE = re.compile(r"(?:cuda driver library|nvcuda|cudart|nvml vram) init failure: (\d+)")


# ... and, past the driver's start, the device it counted (gpu_info_nvcuda.c and gpu_info_cudart.c
# `*_bootstrap`/`*_check_vram`, 0.1.3x-0.12: `nvcuda failed to get primary device context %d`,
# later `cuda driver library failed to get device context %d`, `… device failed to initialize`,
# `… device memory info lookup failure %d`): gpu.go logs `error looking up nvidia GPU memory` and
# drops that device, so a driver and a card were there and the run goes on without it (800,
# CUDA_ERROR_NOT_PERMITTED: a container's GPU gone after a cgroup reload, ollama#4604, #11373).
# NVML's own `device memory info lookup failure %s: %d` only refines a device already kept.
_OLLAMA_NVIDIA_DEVICE_FAILED = re.compile(
    r"(?:nvcuda|cuda driver library|cudart) (?:failed to get (?:primary )?device context -?\d+"
    r"|device failed to initialize|device memory info lookup failure -?\d+)")


def _ollama_nvidia_discovery_failed(line: str, backend: str | None) -> bool:
    if backend != "cpu" and _OLLAMA_NVIDIA_DEVICE_FAILED.search(line):
        return True
    m = _OLLAMA_DRIVER_INIT_FAILURE.search(line)
    if m is None or m.group(1) == "35":
        return False
    return backend in GPU_BACKENDS or (backend is None and m.group(1) != "100")


# Words that no NVIDIA driver is there at all: Ollama 0.1.x's server (routes.go, 2023: `Warning: GPU
# support may not enabled, check you have installed install GPU drivers: nvidia-smi command failed`),
# the shells' `nvidia-smi: command not found` (nvidia-smi ships with the driver), and nvidia-smi's own
# answer when the driver's kernel module is not loaded. Where they stand, the CUDA runtime's error 35
# (`CUDA driver version is insufficient for CUDA runtime version`) is its answer for no driver, not for
# an old one: it says that whenever no libcuda loads (a container the GPU was not passed to, Docker on
# a Mac: ollama#719).
_NO_NVIDIA_DRIVER = re.compile(r"nvidia-smi command failed|nvidia-smi: (command )?not found"
                               r"|NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver")


def found_no_nvidia_driver(lines: Iterable[str]) -> str | None:
    """The line saying no NVIDIA driver is installed where the engine runs, else None."""
    return next((strip_log_prefix(raw).strip() for raw in lines if _NO_NVIDIA_DRIVER.search(raw)), None)


# The wrappers' own words for a GPU their build has no code for: the card is skipped and the
# model runs on the CPU. Not fatal lines (a failure the log names decides first), but when
# nothing failed, the cause of the CPU run is the build, not the machine: no-kernel-image.
_WRAPPER_BUILD_LACKS_THE_GPU = re.compile(
    # Ollama 0.1.20 gpu/gpu.go: compute capability under the build's minimum
    r"CUDA GPU is too old\."
    rf"|{_OLLAMA_SKIPPED_A_CARD_ITS_BUILD_LACKS}|{_OLLAMA_AMDGPU_NOT_SUPPORTED}", re.IGNORECASE)
# ... except a 1.x reading: an old CUDA runtime on PATH answered for a newer card, the catalogue's
# `ollama.foreign-cudart` (a stale library, not the build's lack)
_FOREIGN_CUDART = entry("ollama.foreign-cudart").pattern


# ... and where the wrapper gives the GPU up because the CPU lacks AVX
_LEFT_FOR_A_CPU_WITHOUT_AVX = re.compile(rf"{_OLLAMA_GAVE_THE_GPU_UP_FOR_NO_AVX}|{_OLLAMA_CPU_WITHOUT_AVX.pattern}")


_LEFT_FOR_AN_OLD_DRIVER = re.compile(_RAMALAMA_CUDA_BELOW_MINIMUM)


def left_for_an_old_driver(line: str) -> bool:
    """Whether a wrapper's line leaving the GPU says the NVIDIA driver is older than its CUDA build needs."""
    return _LEFT_FOR_AN_OLD_DRIVER.search(line) is not None


def left_for_a_cpu_without_avx(line: str) -> bool:
    """Whether a wrapper's line leaving the GPU says the CPU lacks the AVX its GPU runners need."""
    return _LEFT_FOR_A_CPU_WITHOUT_AVX.search(line) is not None


def lacks_the_gpus_architecture(line: str) -> bool:
    """Whether a wrapper's line leaving the GPU says its build has no code for that GPU."""
    return _WRAPPER_BUILD_LACKS_THE_GPU.search(line) is not None and _FOREIGN_CUDART.search(line) is None


_SYSTEM_INFO_CPU_ONLY = re.compile(r"system[ _]info\W.{0,80}\bCPU : ")
# The system-info line before the backend registry (llama.cpp 2023 to late 2024, llama_print_system_info:
# `AVX = 1 | AVX2 = 1 | … | BLAS = 0 | …`): ggml_cpu_has_blas() counted the GPU BLAS backends
# (GGML_USE_CUBLAS, later GGML_USE_CUDA, which HIP builds define too; CLBlast, Vulkan, SYCL), and every
# CUDA build's line in the wild corpus says `BLAS = 1` (WasmEdge-WASINN-examples#57, tabby#3438), so
# on a CUDA or ROCm build `BLAS = 0` means the library that loaded was built without the GPU
# (llama-cpp-python installed without its CMAKE_ARGS reaching the build: llama-cpp-python#1315,
# private-gpt#1405). llamafile links its GPU module at run time, after the main binary printed that
# line, so its logs (_LLAMAFILE_GPU_MODULE, with the llamafile checks below) are not read this way.
_OLD_SYSTEM_INFO_NO_BLAS = re.compile(r"\bAVX2? = [01] \|.*\| BLAS = 0 \|")
# ggml-backend-reg.cpp (b11434) load_backend: `loaded <reg name> backend from <path>` for each
# backend library that loaded; ggml_backend_load_all tries the GPU backends before the CPU's.
_LOADED_BACKEND = re.compile(r"load_backend: loaded (\w+) backend from ")
# The name each GPU build's ggml backend gives itself (GGML_CUDA_NAME is `ROCm` in HIP builds):
# in load_backend's lines and in Ollama's `msg=system` features alike.
_GGML_BACKEND_NAME = {"cuda": "CUDA", "rocm": "ROCm", "vulkan": "Vulkan", "sycl": "SYCL"}


def _gpu_backend_never_loaded(lines: Iterable[str], backend: str | None) -> str | None:
    """The CPU backend's load line on a GPU build whose own backend library never loaded (its
    DLL failed to load, e.g. without the CUDA runtime beside it: unsloth#6273), else None."""
    want = _GGML_BACKEND_NAME.get(backend or "")
    if want is None:
        return None
    cpu: str | None = None
    for raw in lines:
        m = _LOADED_BACKEND.search(raw)
        if m and m.group(1) == want:
            return None
        if m and m.group(1) == "CPU":
            cpu = strip_log_prefix(raw).strip()
    return cpu


def gpu_unused_from_log(lines: Iterable[str], backend: str | None, plan_wanted_gpu: bool) -> str | None:
    """The line showing that a GPU build runs without its GPU, else None.

    A CPU build's discovery finding no GPU is normal, so those lines only count for a GPU
    backend; layers asked of a build that cannot offload count for any; `offloaded 0/N layers
    to GPU` counts when the plan asked for the GPU.
    """
    lines = tuple(lines)  # read again below by the checks that follow a sequence of lines
    gpu_build = backend in GPU_BACKENDS
    llamafile = any(_LLAMAFILE_GPU_MODULE.search(raw) for raw in lines)
    for raw in lines:
        line = strip_log_prefix(raw)
        # layers were asked of a build that has no GPU code at all; the last wording is common/arg.cpp's
        # -ngl handler (2024 to b11434), said only when llama_supports_gpu_offload() is false (a
        # Homebrew build without CUDA on a machine with an NVIDIA GPU, _b00t_#259)
        if re.search(r"not compiled with GPU offload support|compiled without support for GPU offload"
                     r"|no usable GPU found, --(n-)?gpu-layers option will be ignored", line, re.IGNORECASE):
            return line
        if _WRAPPER_LEFT_THE_GPU.search(line):
            return line  # the wrapper says it found a GPU and runs without it
        # ... and Ollama's discovery (discover/gpu.go, amd_*.go), which then runs on the CPU
        if gpu_build and re.search(r"no usable GPU found|failed to initialize CUDA"
                                   r"|failed to initialize (ROCm|HIP)|no CUDA devices found"
                                   r"|ggml_vulkan: No devices found|no compatible GPUs were discovered"
                                   # Ollama discover/types.go (2025 to 2026) logs the CPU as its one
                                   # `inference compute` only when discovery found no GPU device
                                   # (`id=cpu`; `id=0` after 0.5's `no compatible GPUs were discovered`)
                                   r"|msg=\"?inference compute\"? id=\S+ library=cpu\b"
                                   # ggml-vulkan.cpp (b11434): the only Vulkan device is a
                                   # software one (llvmpipe/lavapipe): no GPU driver in use
                                   r"|ggml_vulkan: Warning: Device type is CPU"
                                   # ggml-metal-device.m (2026): the shaders did not compile, so the
                                   # Metal device is not offered and the run goes on on the CPU
                                   # (node-llama-cpp's b7836 on an M5, yoloshii/ClawMem#26)
                                   r"|ggml_metal_library_init_from_source: error compiling source"
                                   # rpc-server's create_backend (examples/rpc, 2024 to early
                                   # 2025) tried the one GPU backend it had a branch for and
                                   # fell back: that backend failed, or (OpenCL) had no branch
                                   # (llama.cpp#11957: an Adreno build serving from the CPU)
                                   r"|^create_backend: using CPU backend", line):
            return line
        if backend != "cpu" and (_OLLAMA_INSTALL_FOUND_NO_GPU.search(line) or _OLLAMA_REFUSED_AN_AMD_CARD.search(line)):
            return line
        if _ollama_nvidia_discovery_failed(line, backend):
            return line  # Ollama's discovery: the NVIDIA driver or device it found did not start
        # the system-info line lists every backend that loaded (llama.cpp's llama_print_system_info:
        # `CUDA : ARCHS = … | CPU : …`, ROCm builds `ROCm : …`; Ollama 0.5's runner quotes it as
        # `system info="…"`): on a CUDA or ROCm build, one with only the CPU's means the GPU
        # backend library never loaded (Ollama's CUDA folder missing, ollama#9517)
        if backend in ("cuda", "rocm") and _SYSTEM_INFO_CPU_ONLY.search(line) \
                and not re.search(r"\b(CUDA|ROCm) :", line):
            return line
        if backend in ("cuda", "rocm") and _OLD_SYSTEM_INFO_NO_BLAS.search(line) and not llamafile:
            return line
        m = re.search(r"offloaded 0/(\d+) layers to GPU", line)
        if m and (plan_wanted_gpu or gpu_build):
            return line
        if _ollama_scheduled_no_vram(line):
            return line
    if gpu_build and (listed := _no_device_listed(lines)) is not None:
        return listed
    return (_llamafile_gpu_module_failed(lines) or _ollama_runner_without_its_gpu(lines)
            or _ollama_without_its_gpu_runners(lines) or _ollama_found_no_gpu_for_its_gpu_runners(lines)
            or _ollama_dropped_every_gpu(lines)
            or _ollama_found_a_gpu_on_a_cpu_without_avx(lines)
            or _llamasharp_loaded_its_cpu_build(lines) or _weights_left_on_the_host(lines)
            or _gpu_backend_never_loaded(lines, backend))


# common/arg.cpp common_print_available_devices (`--list-devices`, b11434): `Available devices:`,
# then one `  NAME: description (N MiB, M MiB free)` line per device that is not the CPU, or
# `  (none)`; older builds print nothing after the heading for an empty list. A
# GPU build listing none has no GPU to run on (llama.cpp#26996, a HIP build missing hipblas.dll;
# #14966, an x86_64 build under Rosetta without Metal). A CPU build's empty list is normal.
# A wrapper that runs `--list-devices` and logs its answer line by line puts its own stamp in
# front of each line (Atomic Chat's Tauri app: `[03:30:13] INFO Available devices:`,
# AtomicBot-ai/Atomic-Chat#14): bracketed times or tags, then a level word. Taken off the
# heading and the lines after it alike, so a listed device still reads as one.
_WRAPPER_STAMP = re.compile(r"^\s*(?:\[[^\]]*\]\s*)+(?:(?:TRACE|DEBUG|INFO|WARN|WARNING|ERROR)\b:?\s*)?")
_DEVICE_LIST_HEADING = re.compile(r"^\s*Available devices:\s*$")
_LISTED_DEVICE = re.compile(r"^\s*[\w.-]+: .*\(\d+ MiB, \d+ MiB free\)\s*$")


def _no_device_listed(lines: Iterable[str]) -> str | None:
    stripped = tuple(_WRAPPER_STAMP.sub("", strip_log_prefix(raw)) for raw in lines)
    for i, line in enumerate(stripped):
        if _DEVICE_LIST_HEADING.match(line):
            following = next((x for x in stripped[i + 1:] if x.strip()), None)
            if following is None or not _LISTED_DEVICE.match(following):  # `(none)`, or nothing listed
                return "Available devices: (none)"
    return None


# llamafile (llamafile/cuda.c, 0.2 to 0.8) builds its GPU module on first use: `building
# ggml-cuda with nvcc -arch=native...`, again with another arch flag, and each failed compile
# ends `<compiler>: returned nonzero exit status`; once it links one it says `GPU support
# loaded`. A last attempt that failed, with nothing linked after it, leaves the CPU.
_LLAMAFILE_BUILD = re.compile(r"building ggml-(cuda|rocm) with (nvcc|hipcc|amdclang\+\+|clang\+\+)")
# Any line of llamafile's GPU-module code path: linking a prepared module, or building one.
_LLAMAFILE_GPU_MODULE = re.compile(rf"link_cuda_dso|import_cuda_impl|ggml_cuda_link|GPU support loaded"
                                   rf"|{_LLAMAFILE_BUILD.pattern}")
_LLAMAFILE_BUILD_FAILED = re.compile(r"(nvcc|hipcc|clang\+\+)(\.exe)?: returned nonzero exit status")
# ... and the compiler's own refusal, printed before that line: nvcc's `nvcc fatal   : …`, or a
# diagnostic `file:line:col: error:` (gcc, clang) or `file(line): error` (nvcc's front end). An
# attempt whose output shows one failed, even where the log was cut before the status line
# (llamafile#121: g++ 11's `std_function.h:435:145: error:` under CUDA 11.5's nvcc).
_LLAMAFILE_COMPILE_ERROR = re.compile(r"^nvcc fatal\s*:|^\S+:\d+(:\d+)?: (fatal )?error:"
                                      r"|^\S+\(\d+\): (catastrophic )?error")


def _llamafile_gpu_module_failed(lines: Iterable[str]) -> str | None:
    failed: str | None = None
    building = False
    for raw in lines:
        line = strip_log_prefix(raw).strip()
        if _LLAMAFILE_BUILD.search(line):
            failed, building = None, True  # a new attempt: only the last one's outcome counts
        elif _LLAMAFILE_BUILD_FAILED.search(line):
            failed, building = line, False  # the attempt is over
        elif building and _LLAMAFILE_COMPILE_ERROR.search(line):
            failed = line
        elif "GPU support loaded" in line:
            return None
    return failed


# LLamaSharp's native loader (NativeLibraryConfig, 2024 on, as in SciSharp/LLamaSharp#685) logs
# each build it tries: `Trying '<path>'`, then `Failed Loading '<path>'` or `Loaded '<path>'`.
# With AllowFallback on, a GPU build (runtimes/<os>/native/cuda12, vulkan) that failed to load is
# followed by a CPU build (avx, avx2, avx512, noavx) that loaded: the model runs on the CPU, and
# only these lines say so.
_LLAMASHARP_GPU_FAILED = re.compile(r"Failed Loading '[^']*[/\\](cuda\d*|vulkan)[/\\][^']*'", re.IGNORECASE)
_LLAMASHARP_CPU_LOADED = re.compile(r"\bLoaded '[^']*[/\\](avx\d*|noavx)[/\\][^']*'", re.IGNORECASE)


def _one_line_then_another(lines: Iterable[str], first: re.Pattern[str],
                           then: re.Pattern[str]) -> tuple[str, str] | None:
    """The last line matching `first` before the first line after it matching `then`, or None."""
    seen: str | None = None
    for raw in lines:
        line = strip_log_prefix(raw).strip()
        if first.search(line):
            seen = line
        elif seen is not None and then.search(line):
            return seen, line
    return None


def _llamasharp_loaded_its_cpu_build(lines: Iterable[str]) -> str | None:
    pair = _one_line_then_another(lines, _LLAMASHARP_GPU_FAILED, _LLAMASHARP_CPU_LOADED)
    return None if pair is None else f"{pair[0]}, then {pair[1]}"


# Ollama (llm/server.go) logs its plan, `msg=offload library=cuda ... layers.offload=29`, and
# its runner (ml/backend/ggml/ggml.go, 0.6 on) then logs `msg=system` with the features of
# every backend it loaded, each as `<backend>.<device>.<feature>=` (`CUDA.0.ARCHS=...`,
# `ROCm.0...`). A plan on the GPU whose runner loaded only CPU backends runs on the CPU: the
# maintainer's reading of ollama#10798 (the GPU libraries missing after an upgrade).
_OLLAMA_OFFLOAD = re.compile(r"msg=\"?offload\b.*\blibrary=(cuda|rocm|vulkan)\b.*\blayers\.offload=([1-9]\d*)")
_OLLAMA_SYSTEM = re.compile(r"msg=\"?system\"?\s+((?:\w+\.\d+\.\w+=\S*\s*)+)")


# Ollama's scheduler describes each runner it starts or keeps (server/sched.go runnerRef.LogValue,
# 0.6.8 on, 76ea735aa): `runner.inference=<GPU library>` (from 0.12, bc8909fb3, the devices as
# `"[{ID:… Library:Vulkan}]"`; absent or `cpu` on a CPU-only machine) with `runner.vram=`, its
# estimate of the bytes it placed on those GPUs. A GPU runner holding a model of some size with
# `runner.vram="0 B"` put every layer on the CPU (MooreThreads/ollama-musa#22: a Vulkan build whose
# VRAM probe read the iGPU's memory as none).
_OLLAMA_RUNNER_INFERENCE = re.compile(r"\brunner\.inference=(\"[^\"]*\"|\S+)")
_OLLAMA_RUNNER_NO_VRAM = re.compile(r"\brunner\.vram=\"?0 B\b")
_OLLAMA_RUNNER_NO_SIZE = re.compile(r"\brunner\.size=\"?0 B\b")


def _ollama_scheduled_no_vram(line: str) -> bool:
    m = _OLLAMA_RUNNER_INFERENCE.search(line)
    return (m is not None and m.group(1).strip('"').lower() not in ("cpu", "", "[]")
            and _OLLAMA_RUNNER_NO_VRAM.search(line) is not None and _OLLAMA_RUNNER_NO_SIZE.search(line) is None)


def _ollama_runner_without_its_gpu(lines: Iterable[str]) -> str | None:
    planned: tuple[str, str] | None = None  # (library, layers) of the last offload plan
    for raw in unwrapped(lines):
        line = strip_log_prefix(raw).strip()
        m = _OLLAMA_OFFLOAD.search(line)
        if m:
            planned = (m.group(1), m.group(2))
            continue
        s = _OLLAMA_SYSTEM.search(line)
        if s and planned is not None:
            backends = sorted({t.split(".", 1)[0] for t in s.group(1).split()})
            gpu = _GGML_BACKEND_NAME[planned[0]]
            if gpu not in backends:
                return (f"Ollama planned {planned[1]} layers on {gpu}, but its runner loaded only "
                        f"{', '.join(backends)}: {line}")
    return None


# Ollama 0.3 to 0.5 logs the runners it carries at start (server/routes.go, runners/common.go:
# `msg="Dynamic LLM libraries" runners=[cpu cpu_avx2 cuda_v12 …]`), and 0.5.13 to 0.6 the GPU
# libraries of the GPU's family it found in lib/ollama before starting a runner (llm/server.go:
# `msg="compatible gpu libraries" compatible=[cuda_v12 …]`). A GPU it detected and planned for
# (`msg="inference compute" … library=cuda`, memory.go's `msg=evaluating library=cuda`) with no
# runner or library of that family there runs on the CPU: the GPU payload is missing (an install
# that lost lib/ollama, ollama#9842; a build without its GPU runners, ollama#8467).
_OLLAMA_GPU_FAMILY = re.compile(r"msg=\"?(?:inference compute\"?|evaluating)\b.*\blibrary=(cuda|rocm|vulkan)\b")
_OLLAMA_RUNNER_LIST = re.compile(r"msg=\"?(?:Dynamic LLM libraries\"?\s+runners"
                                 r"|compatible gpu libraries\"?\s+compatible)=\"?\[([^\]]*)\]")


def _ollama_without_its_gpu_runners(lines: Iterable[str]) -> str | None:
    family: str | None = None
    listed: list[tuple[str, tuple[str, ...]]] = []
    for raw in lines:
        line = strip_log_prefix(raw).strip()
        if (m := _OLLAMA_GPU_FAMILY.search(line)) is not None:
            family = m.group(1)
        if (r := _OLLAMA_RUNNER_LIST.search(line)) is not None:
            listed.append((line, tuple(r.group(1).split())))
    if family is None:
        return None
    for line, names in listed:
        if not any(name.split("_", 1)[0] == family for name in names):
            return line
    return None


# Ollama 0.1.17 to 0.1.3x logs the runners its build carries at start (llm/shim_ext_server.go,
# `Dynamic LLM variants [cuda]`; llm/payload_common.go, 0.1.2x on, `Dynamic LLM libraries [cpu_avx
# cuda_v11 rocm_v6 …]`), and server/routes.go then `no GPU detected` when discovery found no GPU
# library (gpu.GetGPUInfo's `cpu`). A build that carries GPU runners and found none to use runs
# on the CPU: its discovery missed the driver's management library (ollama#1979, a Jetson whose
# libnvidia-ml is not where 0.1.20 looked).
_OLLAMA_NO_GPU_DETECTED = re.compile(r"routes\.go:\d+:? no GPU detected|msg=\"?no GPU detected")
_OLLAMA_OLD_RUNNER_LIST = re.compile(r"Dynamic LLM (?:variants|libraries) \[([^\]]*)\]")


def _ollama_found_no_gpu_for_its_gpu_runners(lines: Iterable[str]) -> str | None:
    carries_gpu_runners, none_found = False, None
    for raw in lines:
        line = strip_log_prefix(raw).strip()
        if (m := _OLLAMA_OLD_RUNNER_LIST.search(line)) is not None:
            carries_gpu_runners |= any(name.split("_", 1)[0] in ("cuda", "rocm")
                                       for name in m.group(1).split())
        if none_found is None and _OLLAMA_NO_GPU_DETECTED.search(line):
            none_found = line
    return none_found if carries_gpu_runners else None


# Ollama 0.30 on (discover/runner.go filterIntegratedGPUs) drops an integrated GPU unless
# OLLAMA_IGPU_ENABLE allows it, saying `dropping integrated GPU; to enable, set OLLAMA_IGPU_ENABLE=1`;
# server/routes.go then sums the memory of the GPUs discovery kept (`msg="vram-based default
# context" total_vram=…`, HumanBytes2: `0 B` for none). A GPU found and dropped, and none kept, is a
# machine with a GPU whose model runs on the CPU (ollama#17222: the laptop's discrete GPU was not
# discovered either). Without a drop line, `0 B` is a machine with no GPU, and says nothing.
_OLLAMA_DROPPED_A_GPU = re.compile(r"dropping integrated GPU; to enable, set OLLAMA_IGPU_ENABLE=1")
_OLLAMA_NO_VRAM_KEPT = re.compile(r"msg=\"?vram-based default context\"?\s+total_vram=\"?0 B\b")


# Ollama 0.1.2x gpu/gpu.go GetGPUInfo: it finds the card (`Nvidia GPU detected`, `Radeon GPU
# detected`), then cpu_common.go's GetCPUVariant finds no AVX (`CPU does not have vector
# extensions`) and, on amd64, gives the card up (`CPU does not have AVX or AVX2, disabling GPU
# support.`, read above; its GPU runners were all built with AVX then, ollama#2187, #5035). A paste
# that loses the second line (ollama#2825) still has the card and the CPU without AVX, in that order.
_OLLAMA_FOUND_A_GPU = re.compile(r"msg=\W?(Nvidia|Radeon) GPU detected")


def _ollama_found_a_gpu_on_a_cpu_without_avx(lines: Iterable[str]) -> str | None:
    pair = _one_line_then_another(lines, _OLLAMA_FOUND_A_GPU, _OLLAMA_CPU_WITHOUT_AVX)
    return None if pair is None else f"{pair[0]}, then {pair[1]}"


def _ollama_dropped_every_gpu(lines: Iterable[str]) -> str | None:
    pair = _one_line_then_another(lines, _OLLAMA_DROPPED_A_GPU, _OLLAMA_NO_VRAM_KEPT)
    return None if pair is None else f"{pair[0]}, and no GPU was kept: {pair[1]}"


# llama.cpp's load_tensors (src/llama-model.cpp, 2024 to b11434) says how many layers it
# offloaded and then one `<buffer type> model buffer size = N MiB` line per buffer. With every
# layer offloaded the host keeps only what never goes to a device (the token embeddings: a few
# per cent of the weights; with MoE experts kept on the host by `--cpu-moe` or `-ot exps=CPU`,
# 2 to 10 per cent goes to the device). A device that got under 0.5 % of what the host holds
# took none of the weights: its backend left them on the host (llama-box's CANN build with a
# type it lacks, gpustack#2563), so the model runs on the CPU whatever the offload line says.
# A device buffer must be there: a CPU build with RPC compiled in prints the offload line too
# (llama_supports_gpu_offload), with host buffers only, and that is no device left unused.
_OFFLOADED_ALL = re.compile(r"offloaded (\d+)/\1 layers to GPU")
_MODEL_BUFFER = re.compile(r"\b([\w-]+) model buffer size\s*=\s*([\d.]+) MiB")
_DEVICE_SHARE_FLOOR = 0.005


def _weights_left_on_the_host(lines: Iterable[str]) -> str | None:
    offloaded: str | None = None
    host = device = 0.0
    devices = 0
    for raw in lines:
        line = strip_log_prefix(raw).strip()
        m = _OFFLOADED_ALL.search(line)
        if m and int(m.group(1)) > 0:
            offloaded, host, device, devices = line, 0.0, 0.0, 0  # a new load: its buffers follow
            continue
        b = _MODEL_BUFFER.search(line)
        if b and offloaded is not None:
            if device_of_buffer(b.group(1)) == HOST:
                host += float(b.group(2))
            else:
                device, devices = device + float(b.group(2)), devices + 1
    if offloaded is None or not devices or host < 1024 or device >= _DEVICE_SHARE_FLOOR * host:
        return None
    return (f"{offloaded}, yet the devices hold {device:.2f} MiB of the weights and the host "
            f"{host:.2f} MiB: the model runs on the CPU")


def drafter_dropped_from_log(lines: Iterable[str]) -> str | None:
    """Why a READY engine serves without the drafter it was given, else None.

    b11434 does not fail a start whose draft model it cannot use for speculation (for
    example another vocabulary type): it logs `failed to initialize speculative decoding
    context: <why>` and serves without it. Without this check the tray would say the
    drafter is in while every token is decoded without it.
    """
    for raw in lines:
        m = DRAFTER_DROPPED.search(strip_log_prefix(raw))
        if m:
            return m.group(1).strip() or "the engine did not say why"
    return None
