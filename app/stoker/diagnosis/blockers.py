"""What stops an engine build from using this machine, found before launch and after start.

A CUDA build newer than the driver allows (cudaBlocker), a ROCm build without kernels for
the AMD GPUs here (rocmBlocker, or just some GPUs hidden from it), a runtime library that
is not installed (missingRuntime: `ldd` says `not found`, the Visual C++ runtime DLLs on
Windows, no libcuda), a GPU build that came up without its GPU (gpuUnused), and the OOM
killer (outOfMemory). Each comes back as an stoker.fleet.snapshot.BlockerView, so the tray
shows it as it is. Pure: the shell runs nvidia-smi, reads the KFD topology, runs ldd and
lists DLLs, then passes the text or values in.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from stoker.diagnosis.exit_report import Incident
from stoker.diagnosis.incident_words import VC_REDIST_URL
from stoker.diagnosis.views import BlockerView

VC_RUNTIME_DLLS = ("vcruntime140.dll", "vcruntime140_1.dll", "msvcp140.dll")


def _version(text: str | None) -> tuple[int, ...] | None:
    m = re.search(r"(\d+)(?:\.(\d+))?(?:\.(\d+))?", text or "")
    if not m:
        return None
    return tuple(int(g) for g in m.groups() if g is not None)


def cuda_blocker(build_cuda_runtime: str | None, driver_cuda_version: str | None) -> BlockerView | None:
    """cudaBlocker when the driver's highest CUDA version is below the build's runtime.

    `driver_cuda_version` is the `CUDA Version: 12.4` nvidia-smi prints (what the driver
    supports), `build_cuda_runtime` the toolkit the build was compiled with. Unknown
    either way: no blocker (the start-up check catches what this cannot see).
    """
    build, driver = _version(build_cuda_runtime), _version(driver_cuda_version)
    if build is None or driver is None:
        return None
    # CUDA's minor-version compatibility is not relied on: llama.cpp builds carry PTX
    # (e.g. `60-virtual`) that only a driver of the build's version can JIT-compile.
    if driver[:2] >= build[:2]:
        return None
    b, d = ".".join(map(str, build[:2])), ".".join(map(str, driver[:2]))
    return BlockerView(
        kind="cudaBlocker",
        message=f"The CUDA build needs CUDA {b}, but this NVIDIA driver supports CUDA up to {d}.",
        advice=f"Update the NVIDIA driver to one that supports CUDA {b} or newer; until then "
               "Stoker uses the next build in line (Vulkan, then CPU).",
    )


# Code objects built for a generic target run on every member of its family (ROCm 6.1+).
_GENERIC_FAMILIES = {
    "gfx9-generic": {"gfx900", "gfx902", "gfx904", "gfx906", "gfx909", "gfx90c"},
    "gfx9-4-generic": {"gfx940", "gfx941", "gfx942", "gfx950"},
    "gfx10-1-generic": {"gfx1010", "gfx1011", "gfx1012", "gfx1013"},
    "gfx10-3-generic": {"gfx1030", "gfx1031", "gfx1032", "gfx1033", "gfx1034", "gfx1035", "gfx1036"},
    "gfx11-generic": {"gfx1100", "gfx1101", "gfx1102", "gfx1103", "gfx1150", "gfx1151", "gfx1152",
                      "gfx1153"},
    "gfx12-generic": {"gfx1200", "gfx1201"},
}


def _base_gfx(target: str) -> str:
    """`gfx90a:sramecc+:xnack-` -> `gfx90a` (feature flags do not change the ISA family)."""
    return target.strip().lower().split(":")[0]


def _has_kernels(build_targets: set[str], gpu: str) -> bool:
    if gpu in build_targets:
        return True
    return any(gpu in members for fam, members in _GENERIC_FAMILIES.items() if fam in build_targets)


def rocm_visible_devices(build_gfx_targets: Iterable[str] | None,
                         gpu_gfx_targets: Iterable[str | None]) -> tuple[tuple[int, ...], BlockerView | None]:
    """Which AMD GPUs (by ROCm index, in the runtime's order) the build has kernels for.

    A GPU without kernels would crash the engine (`invalid device function`) or be
    counted in VRAM it cannot use, so the launch and the device probe hide it
    (`rocm_visibility_env`). No GPU left: rocmBlocker. Unknown build targets: all visible.
    """
    gpus = [(_base_gfx(g) if g else None) for g in gpu_gfx_targets]
    if build_gfx_targets is None:
        return tuple(range(len(gpus))), None
    built = {_base_gfx(t) for t in build_gfx_targets if t}
    visible = tuple(i for i, g in enumerate(gpus) if g is not None and _has_kernels(built, g))
    if visible:
        return visible, None
    have = ", ".join(sorted({g for g in gpus if g})) or "none found"
    made = ", ".join(sorted(built)) or "no targets"
    return (), BlockerView(
        kind="rocmBlocker",
        message=f"The ROCm build has no kernels for this machine's AMD GPUs ({have}); it was built for {made}.",
        advice=f"Stoker uses the Vulkan build instead; for ROCm, rebuild with AMDGPU_TARGETS including "
               f"{have.split(', ')[0]} (`stoker setup` does this for the GPUs it finds).",
    )


def rocm_visibility_env(visible: tuple[int, ...], total: int) -> tuple[tuple[str, str], ...]:
    """Environment for the ROCm launch and its `--list-devices` probe: hide GPUs without kernels.

    Only ROCR_VISIBLE_DEVICES is set: HIP_VISIBLE_DEVICES indexes the devices *left after*
    ROCR's filter, so setting both to the same list would hide the wrong ones. Nothing is
    set when every GPU is visible.
    """
    if len(visible) == total:
        return ()
    return (("ROCR_VISIBLE_DEVICES", ",".join(map(str, visible)) if visible else "-1"),)


# What a person installs for each library ldd cannot find.
_LIBRARY_ADVICE = (
    (r"^libcuda\.so", "the NVIDIA driver (libcuda) is not installed; install the NVIDIA driver"),
    (r"^libcu(dart|blas|blasLt)\.so", "the CUDA runtime is not installed; install the CUDA toolkit "
                                      "runtime libraries of the version the build names"),
    (r"^lib(amdhip64|rocblas|hipblas|hipblaslt|rocsolver)\.so", "the ROCm runtime is not installed; "
                                                                "install ROCm (rocm-hip-runtime, rocblas, hipblas)"),
    (r"^libvulkan\.so", "the Vulkan loader is not installed; install libvulkan1 and your GPU's Vulkan driver"),
    (r"^libgomp\.so", "the OpenMP runtime is not installed; install libgomp1"),
    (r"^lib(ggml|llama|mtmd)", "the build's own libraries are not next to the binary; reinstall it "
                               "with `stoker setup`"),
)


def missing_runtime_from_ldd(ldd_output: str) -> BlockerView | None:
    """missingRuntime from `ldd llama-server` output (`libcudart.so.12 => not found`)."""
    missing = []
    for line in (ldd_output or "").splitlines():
        m = re.match(r"\s*(\S+)\s*=>\s*not found", line)
        if m and m.group(1) not in missing:
            missing.append(m.group(1))
    if not missing:
        return None
    advice = []
    for lib in missing:
        for pattern, text in _LIBRARY_ADVICE:
            if re.search(pattern, lib) and text not in advice:
                advice.append(text)
                break
        else:
            advice.append(f"{lib} is not installed; install the package that provides it")
    return BlockerView(
        kind="missingRuntime",
        message=f"The engine build needs {', '.join(missing)}, which {'is' if len(missing) == 1 else 'are'} "
                "not installed.",
        advice=_sentence("; ".join(advice)),
    )


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:] + "."


def windows_vc_runtime_missing(present_dlls: Iterable[str]) -> BlockerView | None:
    """missingRuntime when the Visual C++ runtime DLLs are found neither beside the
    binary nor in System32 (`present_dlls`: file names found there, any case)."""
    have = {d.lower() for d in present_dlls}
    missing = [d for d in VC_RUNTIME_DLLS if d not in have]
    if not missing:
        return None
    return BlockerView(
        kind="missingRuntime",
        message=f"The Microsoft Visual C++ runtime is not installed ({', '.join(missing)} missing).",
        advice=f"Install the Visual C++ Redistributable from {VC_REDIST_URL}, then start the engine again.",
    )


def cuda_driver_missing(build_backend: str | None, libcuda_found: bool) -> BlockerView | None:
    """missingRuntime for a CUDA build on a machine without libcuda (no NVIDIA driver)."""
    if build_backend != "cuda" or libcuda_found:
        return None
    return BlockerView(
        kind="missingRuntime",
        message="The CUDA build needs the NVIDIA driver (libcuda), which is not installed.",
        advice="Install the NVIDIA driver; until then Stoker uses the next build in line (Vulkan, then CPU).",
    )


def gpu_unused_blocker(evidence: str | None, backend: str | None) -> BlockerView | None:
    """gpuUnused for the build running now, from `diagnosis.gpu_unused_from_log`."""
    if not evidence:
        return None
    name = {"cuda": "CUDA", "rocm": "ROCm", "vulkan": "Vulkan", "metal": "Metal"}.get(backend or "", "GPU")
    return BlockerView(
        kind="gpuUnused",
        message=f"The {name} build is running on the CPU: it found no usable GPU ({evidence.strip()}).",
        advice="Check the GPU driver (nvidia-smi / rocminfo / vulkaninfo) and restart the engine; "
               "it answers meanwhile, only slower.",
    )


def out_of_memory_blocker(model_name: str | None, while_starting: bool, evidence: str) -> BlockerView:
    """outOfMemory: the OS stopped the engine for memory, with the model and when."""
    model = model_name or "the model"
    when = "while it was loading" if while_starting else "while it was serving"
    return BlockerView(
        kind="outOfMemory",
        message=f"The system ran out of memory running {model} {when} ({evidence.strip()}).",
        advice="Stoker restarts it with a plan that leaves more memory free; close other large "
               "programs or choose a smaller context if it happens again.",
    )


def blocker_from_incident(incident: Incident, model_name: str | None, phase: str,
                          backend: str | None) -> BlockerView | None:
    """The health-view blocker an incident amounts to, if any (None for ordinary failures)."""
    kind = incident.kind
    if kind == "host-oom":
        return out_of_memory_blocker(model_name, phase == "starting", incident.evidence)
    if kind == "gpu-unused":
        return gpu_unused_blocker(incident.evidence, backend)
    if kind in ("missing-library", "system-too-old"):
        # system-too-old: the runtime version the build needs is missing from this system.
        return BlockerView("missingRuntime", incident.title + f" ({incident.evidence.strip()})", incident.advice)
    if kind == "stale-library":
        return BlockerView("libraryConflict", incident.title + f" ({incident.evidence.strip()})", incident.advice)
    if kind == "cuda-driver-too-old":
        return BlockerView("cudaBlocker", incident.title, incident.advice)
    if kind == "no-kernel-image" and backend == "rocm":
        return BlockerView("rocmBlocker", incident.title, incident.advice)
    return None
