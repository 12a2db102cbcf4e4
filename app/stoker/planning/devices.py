"""Turn what the engine and vendor tools print about GPUs into `Device` values.

The engine's own `--list-devices` output is the truth about which GPUs a build can
use; nvidia-smi and the AMD KFD topology add facts the engine does not print (compute
capability, the highest CUDA the driver supports, the gfx target). This module only
parses and merges text it is given: running the tools is `app/stoker/engines/probe.py`'s job,
so nothing here touches processes, files or the clock.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from stoker.planning.machine import Device

MIB = 1024 * 1024
GIB = 1024 * MIB

# `  <name>: <description> (<total> MiB, <free> MiB free)`. The description may hold
# parentheses of its own ("AMD Radeon RX 6800 XT (RADV NAVI21)"), so the greedy
# description backtracks to the LAST memory group on the line.
_DEVICE_LINE = re.compile(
    r"^\s*(?P<name>[^\s:]+):\s*(?P<desc>.*)\(\s*(?P<total>\d+)\s*MiB,\s*(?P<free>\d+)\s*MiB free\s*\)\s*$"
)

# Name prefix -> backend, longest prefixes first so "GPUOpenCL" is not read as something else.
_BACKEND_PREFIXES = (
    ("GPUOpenCL", "opencl"),
    ("OpenCL", "opencl"),
    ("Vulkan", "vulkan"),
    ("CUDA", "cuda"),
    ("ROCm", "rocm"),
    ("HIP", "rocm"),
    ("SYCL", "sycl"),
    ("MTL", "metal"),
    ("Metal", "metal"),
    ("MUSA", "other"),
    ("CANN", "other"),
    ("RPC", "rpc"),
    ("BLAS", "blas"),
)

# Backends that are not a GPU of this machine: a CPU accelerator library, or a remote host.
NOT_A_LOCAL_GPU = ("cpu", "blas", "rpc")


def backend_from_device_name(name: str) -> str:
    """The engine backend a device belongs to, read from its name prefix (`CUDA0` -> cuda)."""
    for prefix, backend in _BACKEND_PREFIXES:
        if name.lower().startswith(prefix.lower()):
            return backend
    return "other"


@dataclass(frozen=True)
class ListedDevice:
    """One line of `--list-devices`, before deciding whether it is a usable GPU."""

    name: str
    description: str
    total_mib: int
    free_mib: int


def parse_list_devices_lines(stdout: str) -> tuple[ListedDevice, ...]:
    """Every device line in `--list-devices` output; headers, `(none)` and noise are skipped."""
    found = []
    for line in stdout.splitlines():
        m = _DEVICE_LINE.match(line)
        if m:
            found.append(ListedDevice(m["name"], m["desc"].strip(), int(m["total"]), int(m["free"])))
    return tuple(found)


def parse_list_devices(stdout: str) -> tuple[Device, ...]:
    """The GPUs (and remote RPC devices) a build lists, as `Device` values.

    BLAS is a CPU library, not a GPU, and a 0/0 MiB device reports nothing the engine
    would use; both are left out (see `list_devices_notes` for a sentence about them).
    """
    devices = []
    for listed in parse_list_devices_lines(stdout):
        backend = backend_from_device_name(listed.name)
        if backend == "blas" or (listed.total_mib == 0 and listed.free_mib == 0):
            continue
        devices.append(
            Device(
                name=listed.name,
                description=listed.description,
                backend=backend,
                total_bytes=listed.total_mib * MIB,
                free_bytes=listed.free_mib * MIB,
                kind=classify_device_kind(listed.name, listed.description),
            )
        )
    return tuple(devices)


def list_devices_notes(stdout: str) -> tuple[str, ...]:
    """Sentences about listed devices that `parse_list_devices` left out, and why."""
    notes = []
    for listed in parse_list_devices_lines(stdout):
        backend = backend_from_device_name(listed.name)
        if backend == "blas":
            notes.append(f"{listed.name} ({listed.description}) is a CPU math library, not a GPU.")
        elif listed.total_mib == 0 and listed.free_mib == 0:
            notes.append(
                f"{listed.name} ({listed.description}) did not report its memory, "
                "so the engine will not place layers on it."
            )
    return tuple(notes)


# --- memory kind from a device's name -------------------------------------------------

# Intel's Arc board SKUs (A380, A770, B580, Pro A60 …) are cards; "Arc Graphics" alone is
# the integrated GPU of Core Ultra chips.
_INTEL_ARC_BOARD = re.compile(r"\barc\b(?:\s*\(tm\))?\s*(?:pro\s+)?[ab]\d{2,3}[a-z]?\b", re.I)
_AMD_DISCRETE = re.compile(
    r"\b(?:rx\s*\d|rx\s+vega|radeon\s+vii|radeon\s+pro\s+w|radeon\s+ai\s+pro|instinct|firepro|"
    r"pro\s+w\d|mi\d{2,3})",
    re.I,
)
_AMD_INTEGRATED = re.compile(r"radeon(?:\s*\(tm\))?\s+graphics|\bvega\b|radeon\s+\d{3,4}m\b", re.I)
# NVIDIA parts whose memory is the host's: DGX Spark's GB10 and the Jetson modules.
_NVIDIA_INTEGRATED = re.compile(r"\bgb10\b|dgx\s+spark|jetson|\borin\b|\bxavier\b|tegra", re.I)


def classify_device_kind(name: str, description: str) -> str:
    """`discrete`, `integrated` or `unknown`, from the device's name and description.

    Vendor words decide: Qualcomm/Adreno and Apple are integrated; Intel is integrated
    unless an Arc board SKU; AMD RX/VII/PRO W/AI PRO/Instinct/FirePro are cards while
    "Radeon Graphics", Vega and 780M-style names are integrated; NVIDIA is a card
    except GB10 and Jetson-class parts. Anything else is unknown, not guessed.
    """
    text = f"{description} {name}"
    low = text.lower()
    if "qualcomm" in low or "adreno" in low:
        return "integrated"
    if "apple" in low or name.upper().startswith("MTL"):
        return "integrated"
    if "intel" in low:
        return "discrete" if _INTEL_ARC_BOARD.search(text) else "integrated"
    if "amd" in low or "radeon" in low or "instinct" in low or "firepro" in low:
        if _AMD_DISCRETE.search(text):
            return "discrete"
        if _AMD_INTEGRATED.search(text):
            return "integrated"
        return "unknown"
    if "nvidia" in low or "geforce" in low or "quadro" in low or "tesla" in low or "rtx" in low:
        return "integrated" if _NVIDIA_INTEGRATED.search(text) else "discrete"
    return "unknown"


# --- nvidia-smi ------------------------------------------------------------------------


@dataclass(frozen=True)
class NvidiaGpu:
    """One row of `nvidia-smi --query-gpu=index,name,memory.total,memory.free,compute_cap,driver_version`."""

    index: int
    name: str
    total_bytes: int | None
    free_bytes: int | None
    compute_cap: str | None
    driver_version: str | None


NVIDIA_SMI_QUERY = "index,name,memory.total,memory.free,compute_cap,driver_version"


def _smi_value(text: str) -> str | None:
    text = text.strip()
    # GB10 reports memory as "[N/A]"; older drivers say "[Not Supported]".
    if not text or text.startswith("[") or text.upper() in ("N/A", "NOT SUPPORTED"):
        return None
    return text


def _smi_mib(text: str) -> int | None:
    value = _smi_value(text)
    if value is None:
        return None
    value = value.replace("MiB", "").strip()
    try:
        return int(float(value)) * MIB
    except ValueError:
        return None


def parse_nvidia_smi(csv_text: str) -> tuple[NvidiaGpu, ...]:
    """Rows of the nvidia-smi query above (`--format=csv,noheader,nounits`; units tolerated).

    A header line or a malformed row is skipped rather than guessed at.
    """
    gpus = []
    for line in csv_text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 6 or not parts[0].isdigit():
            continue
        gpus.append(
            NvidiaGpu(
                index=int(parts[0]),
                name=parts[1],
                total_bytes=_smi_mib(parts[2]),
                free_bytes=_smi_mib(parts[3]),
                compute_cap=_smi_value(parts[4]),
                driver_version=_smi_value(parts[5]),
            )
        )
    return tuple(gpus)


_CUDA_VERSION = re.compile(r"CUDA Version:\s*([0-9]+(?:\.[0-9]+)*)")


def parse_nvidia_smi_cuda_version(text: str) -> str | None:
    """The highest CUDA the driver supports, from plain `nvidia-smi`'s header ("CUDA Version: 12.4")."""
    m = _CUDA_VERSION.search(text)
    return m.group(1) if m else None


# --- AMD -------------------------------------------------------------------------------


def gfx_target_from_version(version: int) -> str | None:
    """KFD's `gfx_target_version` (major*10000 + minor*100 + stepping) as a gfx name.

    110000 -> gfx1100, 90010 -> gfx90a, 110501 -> gfx1151. 0 is a CPU node: None.
    """
    if version <= 0:
        return None
    major, minor, stepping = version // 10000, (version // 100) % 100, version % 100
    return f"gfx{major}{minor:x}{stepping:x}"


def parse_kfd_properties(text: str) -> str | None:
    """The gfx target of one `/sys/class/kfd/kfd/topology/nodes/N/properties` file, or None (CPU node)."""
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == "gfx_target_version" and parts[1].isdigit():
            return gfx_target_from_version(int(parts[1]))
    return None


_ROCMINFO_GFX = re.compile(r"^\s*Name:\s*(gfx[0-9a-f]+)\s*$", re.I | re.M)


def parse_rocminfo(text: str) -> tuple[str, ...]:
    """gfx targets of the GPU agents in `rocminfo` output, in agent order (duplicates kept)."""
    return tuple(m.group(1).lower() for m in _ROCMINFO_GFX.finditer(text))


# --- merging vendor facts into the engine's devices ---------------------------------------


def _index_of(name: str, prefix: str) -> int | None:
    if name.lower().startswith(prefix.lower()):
        rest = name[len(prefix):]
        if rest.isdigit():
            return int(rest)
    return None


def _same_gpu_name(a: str, b: str) -> bool:
    a, b = a.lower().strip(), b.lower().strip()
    return bool(a) and bool(b) and (a in b or b in a)


def _match_nvidia(device: Device, gpus: tuple[NvidiaGpu, ...]) -> NvidiaGpu | None:
    # By CUDA index, then name, then (a CUDA device with one GPU on the machine) the only one.
    if device.backend == "cuda":
        idx = _index_of(device.name, "CUDA")
        by_index = [g for g in gpus if g.index == idx]
        if len(by_index) == 1 and _same_gpu_name(by_index[0].name, device.description):
            return by_index[0]
    by_name = [g for g in gpus if _same_gpu_name(g.name, device.description)]
    if by_name:
        return by_name[0]
    if device.backend == "cuda" and gpus:
        idx = _index_of(device.name, "CUDA")
        by_index = [g for g in gpus if g.index == idx]
        return by_index[0] if by_index else gpus[0]
    return None


def merge_nvidia_facts(
    devices: tuple[Device, ...], gpus: tuple[NvidiaGpu, ...], cuda_version: str | None
) -> tuple[Device, ...]:
    """Devices with compute capability, driver CUDA version and live free memory from nvidia-smi.

    Free memory is taken from nvidia-smi only when it reported one (it is read live,
    the engine's list may be cached); totals stay as the engine reported them.
    """
    merged = []
    for device in devices:
        gpu = _match_nvidia(device, gpus)
        if gpu is None:
            merged.append(device)
            continue
        merged.append(
            replace(
                device,
                compute_cap=gpu.compute_cap or device.compute_cap,
                driver_cuda_version=cuda_version or device.driver_cuda_version,
                free_bytes=gpu.free_bytes if gpu.free_bytes is not None else device.free_bytes,
            )
        )
    return tuple(merged)


def merge_amd_facts(devices: tuple[Device, ...], gfx_targets: tuple[str, ...]) -> tuple[Device, ...]:
    """Devices with their AMD gfx target: ROCm<i> gets the i-th GPU's; any AMD device gets
    the target when every AMD GPU on the machine shares one."""
    if not gfx_targets:
        return devices
    only = gfx_targets[0] if len(set(gfx_targets)) == 1 else None
    merged = []
    for device in devices:
        target = None
        idx = _index_of(device.name, "ROCm")
        if device.backend == "rocm" and idx is not None and idx < len(gfx_targets):
            target = gfx_targets[idx]
        elif only and ("amd" in device.description.lower() or "radeon" in device.description.lower()
                       or device.backend == "rocm"):
            target = only
        merged.append(replace(device, gfx_target=target) if target else device)
    return tuple(merged)


def devices_from_nvidia_smi(gpus: tuple[NvidiaGpu, ...], cuda_version: str | None) -> tuple[Device, ...]:
    """NVIDIA GPUs as seen by nvidia-smi, for when no engine build listed its devices.

    Named `nvidia<index>` rather than `CUDA<index>`: nvidia-smi counts in PCI order and
    CUDA fastest-first, so claiming the engine's name would be a guess.
    """
    return tuple(
        Device(
            name=f"nvidia{g.index}",
            description=g.name,
            backend="cuda",
            total_bytes=g.total_bytes,
            free_bytes=g.free_bytes,
            kind=classify_device_kind("", g.name),
            compute_cap=g.compute_cap,
            driver_cuda_version=cuda_version,
        )
        for g in gpus
    )


@dataclass(frozen=True)
class AmdGpu:
    """One AMD GPU from sysfs: its gfx target and VRAM (None when sysfs did not say)."""

    gfx_target: str | None
    total_bytes: int | None
    used_bytes: int | None
    name: str = "AMD GPU"


def devices_from_amd_sysfs(gpus: tuple[AmdGpu, ...]) -> tuple[Device, ...]:
    """AMD GPUs found in sysfs, for when no engine build listed its devices (named `amd<i>`)."""
    out = []
    for i, g in enumerate(gpus):
        free = g.total_bytes - g.used_bytes if g.total_bytes is not None and g.used_bytes is not None else None
        desc = g.name if g.gfx_target is None else f"{g.name} ({g.gfx_target})"
        out.append(
            Device(
                name=f"amd{i}",
                description=desc,
                backend="rocm",
                total_bytes=g.total_bytes,
                free_bytes=free,
                kind=classify_device_kind("", g.name),
                gfx_target=g.gfx_target,
            )
        )
    return tuple(out)


# --- unified memory --------------------------------------------------------------------


def decide_unified_memory(os: str, arch: str, devices: tuple[Device, ...], ram_total: int | None) -> bool:
    """Whether the GPU's memory is the host's RAM, so RAM and VRAM are one pool.

    True for Apple Silicon, NVIDIA GB10 / DGX Spark, a machine whose only GPUs are
    integrated (an iGPU is used only when no card exists), and a GPU not named as a card
    that reports at least 0.75 x RAM (a shared pool reported as VRAM).
    """
    if os == "darwin" and arch in ("arm64", "aarch64"):
        return True
    gpus = [d for d in devices if d.backend not in NOT_A_LOCAL_GPU]
    if any(_NVIDIA_INTEGRATED.search(f"{d.description} {d.name}") for d in gpus):
        return True
    if gpus and not any(d.kind == "discrete" for d in gpus) and any(d.kind == "integrated" for d in gpus):
        return True
    if ram_total:
        # Only for GPUs the name does not already call a card: a 24 GiB RTX 4090 in a
        # 24 GiB box is still discrete memory, however the sizes compare.
        largest = max((d.total_bytes for d in gpus if d.total_bytes is not None and d.kind != "discrete"),
                      default=None)
        if largest is not None and largest >= 0.75 * ram_total:
            return True
    return False
