"""The readings left open between two kinds: a deciding line that follows either of two causes
the log cannot tell apart (a CUDA error CUDA cannot name, a bind on a host address that is not
this machine's, a load error that covers a model and its draft), or a launch that leaves it open
(a drafter loaded beside an abort, a GPU error or a load error of an unnamed load). For each, the
two candidates, the sentence a person reads, the rule, and the advice when the two want other
remedies. A line that settles it (`settled_by`) closes the reading again.

It exists apart from classify.py so the table of open readings reads as one list, and classify
decides. It must not decide a kind: classify_exit names one first, and asks here whether that
reading is to be left open as `unknown` with both candidates.

Pure: log lines in, frozen values out; no files, no clock, nothing run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from stoker.diagnosis.catalogue import entry
from stoker.diagnosis.incident_words import (
    GPU_OF_OOM,
    OPEN_ASSERT_OR_DRAFTER,
    OPEN_GPU_ERROR_OR_DRAFTER,
    OPEN_LOAD_ERROR_OR_DRAFTER,
)
from stoker.diagnosis.log_lines import shortened
from stoker.diagnosis.wordings.model_files import SD_UNKNOWN_FORMAT

# The builds whose GPU has memory of its own beside the system's (Metal's is the system's).
SPLIT_OOM_KINDS = frozenset({"cuda-oom", "rocm-oom", "vulkan-oom"})
# The model's weights buffer failing with no buffer type named (llama.cpp's llm_load_tensors
# before the type was printed): the weights are split between the GPU and the CPU by the
# offload, so the line is either's. A KV or compute buffer sits with the offloaded layers
# (offload_kqv), so those lines keep naming the build's device.
WEIGHTS_UNNAMED = re.compile(r"unable to allocate (backend )?buffer\b", re.IGNORECASE)

# LocalAI's load error naming the draft model beside the model (pkg/model/initializers.go).
_LOAD_WITH_DRAFT = re.compile(r"\(with draft model: ", re.IGNORECASE)
# ggml-cuda/vendors/hip.h's VMM pool out of memory (catalogue hip.vmm-oom): the GPU's memory
# or ROCm's VMM failing with memory free (llama.cpp#11405, koboldcpp-rocm#105).
_HIP_VMM_OOM = re.compile(r"HipVMM Failure: (out of memory|hipErrorOutOfMemory)\b", re.IGNORECASE)
_PYTHON_39_DLL_NOT_LOADED = re.compile(r"Error loading Python DLL '[^']*python3(9|1\d)\.dll'")
# LLamaSharp's RuntimeError over any DllNotFoundException, the loader's reason dropped
# (catalogue llamasharp.native-load-failed; LLamaSharp#285: a glibc too old).
_LLAMASHARP_LOAD_FAILED = re.compile(r"The native library cannot be correctly loaded\.|Failed to load the native "
                                     r"library\. Please check the log", re.IGNORECASE)

# common's chat-template apply (catalogue arg.template-needs-jinja) without b11434's hint `, try
# using --jinja`: the model's template is not in the built-in list, and the builds that print the
# bare words include ones with a Jinja engine the launch did not turn on (containers/ramalama#1212)
# and ones with none, whose only cure is a newer build (gpustack#1060: llama-box 0.0.107, llama.cpp
# b4490, a model's new template; fixed by 0.0.108). The hint says the build has Jinja.
_TEMPLATE_UNKNOWN_NO_HINT = re.compile(r"this custom template is not supported(?!, try using --jinja)")

@dataclass(frozen=True)
class OpenReading:
    """A reading left open: the two candidates, the sentence a person reads, the rule, and the
    advice when the two want other remedies (None: the kind's own advice stands)."""

    candidates: tuple[str, str]
    title: str
    rule: str
    advice: str | None = None


@dataclass(frozen=True)
class _OpenLine:
    """A deciding line that follows either of two causes: read as `kind`, left open between
    `candidates` with `title` ({line} is the line) under `rule`, with `advice` when the two want
    other remedies, unless a line of the log matches `settled_by`, which rules out every cause
    but `kind`."""

    kind: str
    pattern: re.Pattern[str]
    candidates: tuple[str, str]
    title: str
    rule: str
    settled_by: re.Pattern[str] | None = None
    advice: str | None = None
    # the pattern is looked for on every line of the log, not only the deciding one: where the
    # deciding line is a generic error whose name the engine prints on a line of its own
    anywhere: bool = False


# llama-server's `couldn't bind HTTP server socket, hostname: H, port: P` (tools/server, b11434
# and before) keeps no errno: a taken port (EADDRINUSE) and an address this machine does not have
# (EADDRNOTAVAIL: a mistyped --host, 127.0.0.0 on macOS, a LAN address since changed) end the same
# way. On loopback or the wildcard the address is this machine's, so the port is the reading;
# on any other host it is left open (ramalama#876: --host 127.0.0.0).
_LOOPBACK_OR_ANY = r"(?:127\.0\.0\.1|localhost|0\.0\.0\.0|::1?|\[::1?\])"
_BIND_ON_OTHER_HOST = re.compile(
    rf"couldn't bind (HTTP server|to server) socket, hostname: (?!{_LOOPBACK_OR_ANY}(?:,|\s|$))\S+"
    # ... and Lemonade's wording, `Failed to bind IPv4 HTTP server to <host>:<port>`
    rf"|Failed to bind (?:IPv4 |IPv6 )?HTTP server to (?!{_LOOPBACK_OR_ANY}:\d)\S+")

# A GPU code object that would not load (catalogue gpu.invalid-kernel-image). From CUDA it is left
# open: cudaErrorInvalidKernelImage follows a build without this GPU's code and a driver that cannot
# read the build's code objects alike (ollama#16533, a 535 driver), and the log does not say which.
_INVALID_KERNEL_IMAGE = entry("gpu.invalid-kernel-image").pattern
# ... but HIP (ROCm clr hipamd/src/hip_platform.cpp ihipLaunchKernel_validate, 2023 to 2026) returns
# hipErrorInvalidImage at a launch when it holds no function for the device: the fat binary had no
# code object for its ISA (hip_fatbin.cpp's `Cannot find CO in the bundle`). ggml loads no module
# files (hipModuleLoad's empty-file case), so from ggml's HIP build the error is the build lacking
# this gfx (lemonade-sdk/llamacpp-rocm#92 and #108: gfx1035 under a gfx103X build; unsloth#7669: a
# gfx1036 iGPU under a gfx110X build; inference-snaps#337: gfx1103 outside the snap's targets).
_HIP_INVALID_IMAGE = re.compile(r"ROCm error:? device kernel image is invalid|\bhipErrorInvalidImage\b",
                                re.IGNORECASE)
# cudaErrorUnknown (999; CUDA_ERROR_UNKNOWN in the driver API): CUDA's word for a fault it cannot
# name, and what its first call says when the driver and the runtime disagree (a driver older than
# the runtime in a container or wheel, or one updated without a reboot: streamlit-llama#2) as much as
# for a fault on the device.
_CUDA_UNKNOWN_ERROR = re.compile(r"CUDA error:? 999\b|\bcudaErrorUnknown\b|\bCUDA_ERROR_UNKNOWN\b"
                                 r"|CUDA error: unknown error")
# ... unless the error came back from work on the device's own memory, which the runtime reaches only
# after it found the device and allocated on it with this driver, so a driver it cannot talk to is
# ruled out and the fault is on the GPU: an op's kernel (ggml-cuda.cu ggml_cuda_compute_forward,
# b11434: `%s: %s failed` after cudaGetLastError, then ggml_cuda_error's `in function
# ggml_cuda_compute_forward`; llama.cpp#25721, MUL_MAT_ID's kernel reading out of bounds), or a
# copy from one CUDA buffer to another (ggml_backend_cuda_buffer_cpy_tensor and
# ggml_backend_cuda_cpy_tensor_async, both only when source and destination are CUDA buffers:
# cudaMemcpyAsync device to device or cudaMemcpyPeerAsync between two GPUs; jan#2707, after the
# first request had been answered), or a copy out of a CUDA buffer into the host's memory
# (ggml_backend_cuda_get_tensor_async, which asserts the tensor's buffer is this device's before
# its cudaMemcpyAsync device to host, and the buffer's own ggml_backend_cuda_buffer_get_tensor and
# _get_tensor_2d: the results of work already done on the device; ollama#3097, mid-request after
# many answered).
_CUDA_ERROR_FROM_WORK_ON_THE_DEVICE = re.compile(
    r"\bggml_cuda_compute_forward: \S+ failed\b"
    r"|in function (ggml_cuda_compute_forward"
    r"|ggml_backend_cuda_buffer_cpy_tensor|ggml_backend_cuda_cpy_tensor_async"
    r"|ggml_backend_cuda_get_tensor_async|ggml_backend_cuda_buffer_get_tensor(_2d)?)\b")

# cudaErrorSharedObjectInitFailed (303; CUDA_ERROR_SHARED_OBJECT_INIT_FAILED): a module of the
# build's kernels would not load. With lazy loading, CUDA 12's default (CUDA_MODULE_LOADING=LAZY),
# modules load at a kernel's first use, so a GPU whose memory the load has already taken fails
# there, in the first launch of the warm-up (openclaw-windows-node#1242: with
# CUDA_MODULE_LOADING=EAGER the same launch fails as `cudaMalloc failed: out of memory`, three
# times of three; ollama#17380: intermittent, only on loads whose host buffer fell back to pageable
# memory); it also follows a driver or runtime fault on a supported GPU (llama.cpp#26481, fixed by
# an engine rollback). The line does not say which. ggml's HIP builds say `ROCm error`, read by the
# catalogue's hip.no-binary-for-gpu.
_CUDA_SHARED_OBJECT_INIT_FAILED = re.compile(r"CUDA error:? shared object initialization failed"
                                             r"|\bcudaErrorSharedObjectInitFailed\b"
                                             r"|\bCUDA_ERROR_SHARED_OBJECT_INIT_FAILED\b")

# stable-diffusion.cpp's `get sd version from file failed` (src/stable-diffusion.cpp new_sd_ctx,
# 2024 to 2026): ModelLoader::get_sd_version found no tensor name of a family it knows. It looks for
# the names under `model.diffusion_model.`, the prefix the loader gives a file passed with
# --diffusion-model, so a file holding only the diffusion model (FLUX, Z-Image, Qwen-Image, Wan,
# published without their VAE and text encoders) passed with --model fails here as much as a family
# this build does not know (stable-diffusion.cpp#884, answered in #655: use --diffusion-model). A
# file in no format the loader reads says so first (`unknown format`): then the file is at fault.
_SD_VERSION_UNKNOWN = re.compile(r"get sd version from file failed:")
_SD_FILE_UNREADABLE = re.compile(SD_UNKNOWN_FORMAT)

# A load that failed on the model path `unknown`: the default of llama.cpp's `model_alias` in
# common's gpt_params (2023 to 2024, `std::string model_alias = "unknown"`), not a path anyone types.
# It reaches the loader where the path should be when the program calling llama.cpp lays out the
# parameters differently from the library it loaded (bindings and a native library from two builds:
# java-llama.cpp#12), or when that program passed none; the file is not what failed.
_MODEL_PATH_IS_THE_ALIAS_DEFAULT = re.compile(r"failed to (open|load model) '?unknown'?(:|\s|$)")

# A load that failed on a Windows path holding characters outside ASCII (a user name in Cyrillic,
# Chinese or with accents, shown as is or already garbled to U+FFFD): a program that hands the path
# on in the system's code page, or an engine that reads its argv that way, cannot open the file at
# all (llama.cpp#5802 until ggml_fopen's wide-character open, PR 6248; ollama#3120 and #5329 in 2024,
# #16493 in 0.30.4 of 2026; LM Studio's %TEMP% in lmstudio-bug-tracker#2231). llama.cpp's own
# reason (gguf's `failed to open GGUF file`) is lost where a wrapper keeps only the loader's throw,
# so the path and a damaged file end the same way.
_MODEL_ON_A_NON_ASCII_WINDOWS_PATH = re.compile(
    r"(failed to load model from|failed to open GGUF file|failed to load model) '?[A-Za-z]:[\\/]"
    r"[^\n]{0,160}?[^\x00-\x7F]")

# Ollama's load abandoned because the request's context ended (llm/server.go WaitUntilRunning:
# `client connection closed before server finished loading, aborting load`, and the scheduler's
# `timed out waiting for llama runner to start: context canceled`): the engine did not time out, the
# client left. A client's own timeout (ollama#8006: 90 s; magic-lists-for-navidrome#34: 15 s) and a
# person pressing Ctrl-C (ollama#7408: 5 s) print the same lines.
_CLIENT_LEFT_THE_LOAD = re.compile(r"client connection closed before server finished loading"
                                   r"|timed out waiting for llama runner to start: context canceled")

# The Metal compiler's error on ggml's embedded source (catalogue metal.source-rejected): a macOS too
# old for a feature the shaders use, or shaders this newer compiler rejects.
_METAL_SOURCE_ERROR = entry("metal.source-rejected").pattern

# The SYCL runtime's build of the device code for this GPU failed (catalogue sycl.program-build-failed).
_SYCL_PROGRAM_BUILD_FAILED = entry("sycl.program-build-failed").pattern

OPEN_BY_LINE = (
    _OpenLine("gpu-error", _METAL_SOURCE_ERROR, ("gpu-error", "system-too-old"),
              "The Metal compiler rejected the engine's shaders ({line}): this macOS may be too old for a "
              "feature they use, or the build's shaders may not suit this newer macOS and GPU; Stoker does "
              "not guess. A build made for this macOS (or a newer one) tells.", "metal-source-rejected"),
    _OpenLine("gpu-error", _CUDA_UNKNOWN_ERROR, ("gpu-error", "cuda-driver-too-old"),
              "CUDA reported an error it cannot name ({line}): a fault on the GPU, or a driver that does "
              "not match the CUDA runtime (older than it, or updated without a reboot); Stoker does not "
              "guess. Update the driver and restart the machine first.", "cuda-unknown-error",
              settled_by=_CUDA_ERROR_FROM_WORK_ON_THE_DEVICE),
    _OpenLine("gpu-error", _CUDA_SHARED_OBJECT_INIT_FAILED, ("gpu-error", "cuda-oom"),
              "CUDA could not load the engine's kernels ({line}): CUDA loads them at their first use, so "
              "the GPU's memory running out by then reads this way, as does a fault of the driver on a "
              "supported GPU; the line does not say which, and Stoker does not guess.",
              "cuda-kernels-not-loaded",
              advice=("Start the same model once with CUDA_MODULE_LOADING=EAGER in its environment: if it then "
                      "fails with `out of memory`, the plan is too large for the GPU (a smaller context or "
                      "fewer GPU layers fits); if it loads, update the GPU driver."),
              # ggml_cuda_error prints its `file:line: CUDA error` before or after the named error
              anywhere=True),
    _OpenLine("gpu-error", _SYCL_PROGRAM_BUILD_FAILED, ("gpu-error", "no-kernel-image"),
              "The GPU driver could not compile the engine's device code for this GPU ({line}): the "
              "driver's compiler may be at fault, or the code may use what this device lacks; the "
              "build log under that line names which, and Stoker does not guess.", "sycl-program-build-failed",
              advice=("Update the Intel GPU driver (its compiler builds the device code), then try a build of the "
                      "engine made for this GPU; the lines under `Build program log` name what the compiler refused.")),
    _OpenLine("port-in-use", _BIND_ON_OTHER_HOST, ("port-in-use", "bad-argument"),
              "The engine could not listen ({line}) on a host address that is neither loopback nor all "
              "addresses: the port may be taken, or this machine may not have that address (check "
              "--host); the engine does not say which, and Stoker does not guess.", "bind-on-another-host"),
    _OpenLine("startup-timeout", _CLIENT_LEFT_THE_LOAD, ("startup-timeout", "stopped"),
              "The client closed its connection before the model finished loading ({line}), and the "
              "load was abandoned: the client's own time limit ran out, or a person cancelled the "
              "request; the log does not say which, and Stoker does not guess.",
              "client-left-the-load",
              advice=("Let the first request wait for the load (a cold start of a large model takes minutes): "
                      "raise the client's timeout, or load the model before the app asks, and do not cancel "
                      "while it loads.")),
    _OpenLine("bad-model", _MODEL_PATH_IS_THE_ALIAS_DEFAULT, ("stale-library", "bad-argument"),
              "The engine was handed `unknown` as the model path ({line}): llama.cpp's default model "
              "alias, not a file. The program calling the engine and its llama library may be from two "
              "builds that lay out their parameters differently, or no model path was passed; Stoker "
              "does not guess.",
              "model-path-is-the-alias-default",
              advice=("Install the bindings and their native llama library from one build (rebuild both, and remove "
                      "older copies of the library from the program's folder and the PATH), then check that the "
                      "program passes the model's path.")),
    _OpenLine("bad-model", _MODEL_ON_A_NON_ASCII_WINDOWS_PATH, ("bad-model", "bad-argument"),
              "The model could not be loaded from a Windows path with characters outside ASCII ({line}): "
              "a program that passes such a path in the system's code page cannot open the file, or the "
              "file itself may be damaged or unsupported; Stoker does not guess. Loading it from a folder "
              "whose path is plain ASCII tells (for Ollama, OLLAMA_MODELS).", "model-on-a-non-ascii-path",
              advice=("Put the model in a folder whose whole path is plain ASCII (for Ollama, set OLLAMA_MODELS to "
                      "such a folder, e.g. C:\\ollama-models) and load it again; if it still fails there, the file "
                      "itself is at fault: download it again.")),
    _OpenLine("bad-model", _SD_VERSION_UNKNOWN, ("bad-model", "bad-argument"),
              "stable-diffusion.cpp found no model family it knows in the file ({line}): a file holding only "
              "the diffusion model, passed with --model instead of --diffusion-model, reads this way, as "
              "does a family this build does not know; Stoker does not guess.", "sd-family-not-found",
              settled_by=_SD_FILE_UNREADABLE,
              advice=("If the file holds only the diffusion model (FLUX, Z-Image, Qwen-Image and Wan files are "
                      "published without their VAE and text encoders), pass it with --diffusion-model and "
                      "give the VAE and text encoders their own flags; otherwise update stable-diffusion.cpp "
                      "to a build that knows the model.")),
    _OpenLine("bad-argument", _TEMPLATE_UNKNOWN_NO_HINT, ("bad-argument", "bad-model"),
              "The engine does not know the model's chat template ({line}): a build with a Jinja engine "
              "renders it when started with --jinja, and an older build without one cannot, the model "
              "being newer than the build; the line does not say which build this is, and Stoker does not "
              "guess.", "template-unknown-to-the-build",
              advice=("Start the engine with `--jinja`; if the build does not know that option, update it to a "
                      "newer one (b11434, Stoker's, renders templates with Jinja by default).")),
    # LocalAI pkg/model reports one load error for the model and its draft together
    # (`Failed to load model: X (with draft model: Y). Error: ...`): either file's
    _OpenLine("bad-model", _LOAD_WITH_DRAFT, ("bad-model", "drafter-failure"),
              "A model failed to load ({line}) where the error covers the model and its draft model "
              "together: either file may be the one this build cannot read; Stoker does not guess, and "
              "retries without the drafter to tell.", "load-error-covers-the-draft"),
    # ROCm's virtual-memory pool out of memory: the GPU's memory ran out, or ROCm's VMM
    # failed with memory free (llama.cpp#11405, koboldcpp-rocm#105; llama.cpp turned HIP
    # VMM off by default for it in #11420). Only the load without VMM tells them apart.
    _OpenLine("rocm-oom", _HIP_VMM_OOM, ("rocm-oom", "gpu-error"),
              "ROCm's virtual-memory pool ran out of memory ({line}): the GPU's memory may be used up, "
              "or ROCm's VMM may have failed with memory free (a known ROCm fault, why llama.cpp builds "
              "HIP without VMM by default); Stoker does not guess.", "hip-vmm-out-of-memory",
              advice=("Start the same model once with a build that has HIP VMM off (llama.cpp's default since "
                      "January 2025, GGML_HIP_NO_VMM=ON; koboldcpp-rocm: -DGGML_CUDA_NO_VMM=1): if it loads, "
                      "ROCm's VMM was at fault; if it runs out of memory there too, use a smaller plan.")),
    # LLamaSharp turns every native load failure into one RuntimeError and drops the
    # loader's reason: a missing library or dependency, or a libllama built on a newer
    # glibc than this system's (LLamaSharp#285).
    _OpenLine("no-kernel-image", _INVALID_KERNEL_IMAGE, ("no-kernel-image", "gpu-error"),
              "The GPU runtime could not load the build's code for this device ({line}): the build may "
              "lack this GPU's architecture, or its code objects, the runtime or the driver may be at "
              "fault on a supported GPU; Stoker does not guess. A driver update, then a build made for "
              "this GPU, tells.", "kernel-image-invalid",
              settled_by=_HIP_INVALID_IMAGE),
    _OpenLine("missing-library", _LLAMASHARP_LOAD_FAILED, ("missing-library", "system-too-old"),
              "LLamaSharp could not load its native library ({line}) and did not keep the loader's "
              "reason: a library or dependency may be missing, or the library may need a newer system "
              "(glibc) than this one; Stoker does not guess.", "native-load-failed-reason-dropped",
              advice=("Check the native library's dependencies (`ldd libllama.so` on Linux, `dumpbin /dependents` "
                      "on Windows): a `not found` line is a missing library; a `version GLIBC_2.xx not found` "
                      "means the library was built for a newer system than this one (use a newer OS or image, "
                      "or build llama.cpp on it).")),
    # PyInstaller's bundled Python 3.9 or later that Windows would not load: a dependency missing,
    # or Windows 7 (Python 3.9 dropped it; its DLL needs Windows 8's api-ms-win-core-path, koboldcpp#147)
    _OpenLine("missing-library", _PYTHON_39_DLL_NOT_LOADED, ("missing-library", "system-too-old"),
              "The program's bundled Python could not be loaded ({line}): a DLL it needs may be missing "
              "(an antivirus may have removed it), or Windows may be older than that Python supports "
              "(Python 3.9 and later need Windows 8.1 or newer); Stoker does not guess.",
              "bundled-python-not-loaded"),
    # A bundle's part of glibc (its libpthread, libdl...) needing a version the system's libc
    # lacks (catalogue ld.glibc-part-bundled): an old system or an incomplete bundle.
    _OpenLine("system-too-old", entry("ld.glibc-part-bundled").pattern, ("system-too-old", "stale-library"),
              "A bundled part of glibc needs a version this system's libc lacks ({line}): the system may "
              "be older than the glibc the bundle came from, or the bundle may lack the libc that goes "
              "with its parts; Stoker does not guess.", "glibc-part-bundled",
              advice=("A program that ships glibc's libpthread, libdl or librt must ship the libc.so.6 (and "
                      "ld.so) of the same glibc, or none of them (LocalAI#9099 bundled the rest): use a build "
                      "whose bundle is whole, or one built for this system's glibc (`ldd --version`).")),
)
# The same, where what leaves it open is not the line but the launch (a drafter was loaded).
_OPEN_BY_UNSURE: dict[str, tuple[tuple[str, str], str, str]] = {
    OPEN_ASSERT_OR_DRAFTER: (
        ("assertion-failed", "drafter-failure"),
        "The engine aborted on a failed check ({line}) while a speculative drafter was loaded: the "
        "check does not say whether the drafter or the model itself tripped it; Stoker does not guess, "
        "and retries without the drafter to tell.", "assertion-with-a-drafter"),
    OPEN_LOAD_ERROR_OR_DRAFTER: (
        ("bad-model", "drafter-failure"),
        "A model failed to load ({line}) and the log does not say whether it was the model or its "
        "draft model: llama.cpp prints the same load error for both; Stoker does not guess, and "
        "retries without the drafter to tell.", "load-error-of-an-unnamed-load"),
    # A GPU runtime error (an illegal memory access, a launch failure) while a drafter is
    # loaded: the drafter's graph or the target's may have faulted (llama.cpp#27750: a
    # fault on the target's second GPU, the draft pinned to the first).
    OPEN_GPU_ERROR_OR_DRAFTER: (
        ("gpu-error", "drafter-failure"),
        "The GPU reported an error ({line}) while a speculative drafter was loaded: the drafter or "
        "the model itself may have caused it; Stoker does not guess, and retries without the drafter "
        "to tell.", "gpu-error-with-a-drafter"),
}


def left_open(kind: str, unsure: str | None, evidence: str | None,
              tail: tuple[str, ...]) -> OpenReading | None:
    """The reading left open when the deciding line follows either of two causes and the log has
    nothing to choose between them, else None: the answer is then `unknown` with both, since a
    confident wrong kind sends the user the wrong way."""
    line = shortened(evidence or "", 120)
    if kind in SPLIT_OOM_KINDS and WEIGHTS_UNNAMED.search(evidence or ""):
        # llama.cpp before the buffer type was named (`unable to allocate backend buffer`),
        # and Ollama's wrapping of it: with layers split between the GPU and the CPU the
        # failing buffer is either's (ollama#5764: a 40 GB model on an 8 GB GPU ran out of RAM)
        return OpenReading((kind, "host-oom"),
                           f"An allocation failed ({line}) and the log does not say on which device: the "
                           f"{GPU_OF_OOM[kind]} GPU's memory or the system memory (RAM); Stoker does not "
                           "guess. Both are memory: Stoker retries with a smaller plan.",
                           "allocation-on-an-unnamed-device")
    for open_line in OPEN_BY_LINE:
        if kind != open_line.kind:
            continue
        opening = evidence if open_line.pattern.search(evidence or "") else None
        if opening is None and open_line.anywhere:
            opening = next((raw for raw in tail if open_line.pattern.search(raw)), None)
        if opening is not None:
            settled = open_line.settled_by
            if settled is not None and any(settled.search(raw) for raw in tail):
                return None
            return OpenReading(open_line.candidates, open_line.title.format(line=shortened(opening, 120)),
                               open_line.rule, open_line.advice)
    by_unsure = _OPEN_BY_UNSURE.get(unsure) if unsure is not None else None
    if by_unsure is not None:
        candidates, title, rule = by_unsure
        return OpenReading(candidates, title.format(line=line), rule)
    return None
