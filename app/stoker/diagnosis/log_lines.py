"""An engine log's lines as they were written: llama-server's own prefix taken off, a line the
reporter's terminal wrapped joined back, the GPU backend the lines show, and the memory a
buffer name lives in.

It exists so that the classifier (classify.py), the readers of what a ready engine silently
went without (silent_fallbacks.py) and the engine's memory report (engines/engine_log.py) read
lines the same way. Pure: strings in, strings out. It
must not decide what a failure is.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

_PREFIX = re.compile(r"^\s*(?:\[\d+\]\s+)?\d+\.\d+\.\d+\.\d+\s+[IWED]\s+")
# LocalAI (pkg/model, 2023 to 2026) tails its gRPC backend's stderr and stdout and logs each line as
# `GRPC(<model>-<address>): stderr <line>` after its own time and level: the engine's line, relayed.
_LOCALAI_RELAY = re.compile(r"^.*?\bGRPC\(.*?\): std(?:err|out) ")


def strip_log_prefix(line: str) -> str:
    """`0.00.204.629 E msg` -> `msg` (llama-server's time-since-start and level; a router
    child's `[pid] ` in front of it too); LocalAI's relay of its backend's line likewise."""
    line = line.rstrip("\r\n")
    if "GRPC(" in line:  # the relay's search scans the whole line: only where it can match
        line = _LOCALAI_RELAY.sub("", line, count=1)
    return _PREFIX.sub("", line)


def shortened(text: str, limit: int = 300) -> str:
    """The text without its outer blanks, cut to `limit` characters with an ellipsis."""
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def backend_from_log(lines: Iterable[str]) -> str | None:
    """The GPU backend a log shows was built in, else None (CPU build or unknown)."""
    lines = [strip_log_prefix(raw) for raw in lines]
    if any(re.search(r"found \d+ ROCm devices|loaded ROCm backend|\bROCm error\b|ROCm\d+:|ROCm\s*:"
                     r"|failed to initialize (ROCm|HIP)|built with HIP|\bhipError", line)
           for line in lines):
        return "rocm"
    for line in lines:
        if re.search(r"ggml_cuda_init|ggml_init_cublas|CUDA\s*:\s*ARCHS|loaded CUDA backend"
                     r"|\bCUDA error\b", line):
            return "cuda"
        if re.search(r"ggml_vulkan|loaded Vulkan backend|Vulkan\d+:", line):
            return "vulkan"
        if re.search(r"ggml_metal|loaded Metal backend|MTL\d+:", line):
            return "metal"
        # ggml-opencl.cpp's `ggml_opencl: ...` (the Adreno/Intel backend of 2024 on, and the
        # CLBlast one of 2023 before it), and ggml-sycl's init and device count (`ggml_init_sycl:` in
        # 2024, `Found %d SYCL devices:` in b11434)
        if re.search(r"\bggml_opencl:|loaded OpenCL backend", line):
            return "opencl"
        if re.search(r"\bggml_(sycl_init|init_sycl)\b|[Ff]ound \d+ SYCL devices|loaded SYCL backend", line):
            return "sycl"
    return None


# Buffer-type names map to the memory they live in: `CPU`, `CPU_Mapped`, `CPU_REPACK`, the CPU
# backend's AMX weights (`AMX`, ggml-cpu/amx/amx.cpp in b11434) and pinned host buffers
# (`CUDA_Host`, `ROCm_Host` …) are host RAM; `CUDA0` is that device.
HOST = "CPU"
_HOST_SUFFIXES = ("_Host", "_HOST")
_BUFFER_SUFFIXES = ("_Mapped", "_REPACK", "_AARCH64", "_KLEIDIAI", "_AMX", "_Split", "_split")


def device_of_buffer(buffer_name: str) -> str:
    """`CPU_Mapped` -> `CPU`, `CUDA_Host` -> `CPU`, `CUDA0` -> `CUDA0`."""
    name = buffer_name.strip()
    if name.endswith(_HOST_SUFFIXES) or name.upper() in ("CPU", "HOST", "AMX"):
        return HOST
    for suffix in _BUFFER_SUFFIXES:
        if name.endswith(suffix):
            base = name[: -len(suffix)]
            return HOST if base.upper() == "CPU" else base
    return name


def unwrapped(lines: Iterable[str]) -> Iterator[str]:
    """The lines with each one's indented continuation joined to it: a line that a terminal or
    the reporter wrapped when pasting it goes on in indented lines (text-generation-webui's
    `Server health check timed out after 28800 seconds` broken after "health",
    text-generation-webui#6907; Ollama's key=value lines broken between keys, ollama#10798).
    Only a line that starts at the margin takes continuations, so a paste indented as a whole
    stays line by line. Only the checks that read a wording across such a break use this,
    never the catalogue's scan, where an indented stack frame is a line of its own."""
    items = list(lines)
    i = 0
    while i < len(items):
        joined, j = items[i], i + 1
        if joined[:1] not in (" ", "\t"):
            while j < len(items) and items[j][:1] in (" ", "\t") and items[j].strip():
                joined = joined.rstrip() + " " + items[j].strip()
                j += 1
        yield joined
        i = j
