"""What this (or another) machine has to give a model: RAM, cores and GPU devices.

Values only. `stoker/engines/probe.py` fills them from psutil, `llama-server --list-devices`,
nvidia-smi and sysfs; `--machine FILE` fills them from JSON (`machine_from_json`), so
plans can be made for a machine that is not this one. Unknown is `None`, never 0.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Device:
    """One accelerator as the engine names it (`CUDA0`, `ROCm0`, `Vulkan0`, `MTL0` …)."""

    name: str
    description: str
    backend: str  # cuda | rocm | vulkan | metal | sycl | opencl | rpc | other
    total_bytes: int | None
    free_bytes: int | None
    kind: str = "unknown"  # discrete | integrated | unknown
    # Facts from vendor tools, when known (diagnostics and blockers).
    compute_cap: str | None = None  # NVIDIA, e.g. "8.9"
    gfx_target: str | None = None  # AMD, e.g. "gfx1100"
    driver_cuda_version: str | None = None  # highest CUDA the NVIDIA driver supports
    # Memory bandwidth when a machine file says it; else stoker/planning/speed.py's table by description.
    bandwidth_bytes_per_s: int | None = None


@dataclass(frozen=True)
class Machine:
    os: str  # linux | darwin | windows
    arch: str  # x86_64 | arm64 …
    ram_total_bytes: int
    ram_available_bytes: int | None
    physical_cores: int | None
    logical_cores: int | None
    devices: tuple[Device, ...] = ()
    unified_memory: bool = False  # GPU memory is host RAM (Apple Silicon, GB10, iGPU)
    source: str = "probed"  # probed | file:<path>
    # Why a fact is missing or stale (a tool absent, a probe that failed), one sentence each.
    notes: tuple[str, ...] = ()
    # Host RAM read bandwidth, bytes/s, as measured on this machine (stoker/engines/bandwidth.py) or given
    # by a machine file; it prices the layers a plan leaves on the CPU (stoker/planning/speed.py).
    ram_bandwidth_bytes_per_s: int | None = None

    @property
    def gpus(self) -> tuple[Device, ...]:
        return tuple(d for d in self.devices if d.backend not in ("cpu", "blas", "rpc"))


# ---------------------------------------------------------------- machine description files

_UNITS = (("_bytes", 1), ("_mib", 1024 ** 2), ("_gib", 1024 ** 3))
# "rpc": a device an RPC worker on another machine lends (stoker/engines/rpc.py); its description is
# the worker's HOST:PORT, which the launch passes as --rpc.
_BACKENDS = ("cuda", "rocm", "vulkan", "metal", "sycl", "opencl", "rpc", "other")


def _size(obj: dict[str, Any], stem: str, where: str, required: bool) -> int | None:
    """Read `stem_bytes`, `stem_mib` or `stem_gib` (exactly one) as bytes."""
    found = [(k, obj[stem + suffix], mult) for suffix, mult in _UNITS
             for k in (stem + suffix,) if k in obj]
    if len(found) > 1:
        raise ValueError(f"{where} gives {stem} twice ({', '.join(k for k, _, _ in found)}); keep one")
    if not found:
        if required:
            raise ValueError(f"{where} needs {stem}_gib (or {stem}_mib / {stem}_bytes)")
        return None
    key, value, mult = found[0]
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise ValueError(f"{where}: {key} must be a non-negative number, got {value!r}")
    return int(value * mult)


def machine_from_json(text: str, source: str) -> Machine:
    """A Machine from a description file, so a plan can be made for a machine that is not this one.

    Format (sizes as `*_bytes`, `*_mib` or `*_gib`; unknown values may be left out):
      {"os": "linux", "arch": "x86_64", "ram_total_gib": 32, "ram_available_gib": 28,
       "physical_cores": 8, "logical_cores": 16, "unified_memory": false,
       "ram_bandwidth_gb_s": 50,
       "devices": [{"name": "CUDA0", "description": "NVIDIA GeForce RTX 4070",
                    "backend": "cuda", "kind": "discrete", "total_mib": 12282, "free_mib": 11800}]}
    `ram_bandwidth_gb_s` (and a device's `bandwidth_gb_s`, else the table in stoker/planning/speed.py)
    are memory bandwidths in 10^9 bytes/s; left out, they are unknown.
    Raises ValueError with one sentence naming the file and what is wrong.
    """
    where = f"machine file {source}"
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{where} is not valid JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{where} must hold one JSON object describing the machine")
    os_name = str(data.get("os", "linux")).lower()
    if os_name not in ("linux", "darwin", "windows"):
        raise ValueError(f"{where}: os must be linux, darwin or windows, got {data.get('os')!r}")
    ram_total = _size(data, "ram_total", where, required=True)
    if not ram_total:
        raise ValueError(f"{where}: ram_total must be more than 0")
    ram_available = _size(data, "ram_available", where, required=False)
    if ram_available is not None and ram_available > ram_total:
        raise ValueError(f"{where}: ram_available is larger than ram_total")

    def count(key: str) -> int | None:
        v = data.get(key)
        if v is None:
            return None
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{where}: {key} must be a whole number ≥ 1, got {v!r}")
        return v

    raw_devices = data.get("devices", [])
    if not isinstance(raw_devices, list):
        raise ValueError(f"{where}: devices must be a list of objects")
    devices = []
    for i, d in enumerate(raw_devices):
        dwhere = f"{where}, device {i}"
        if not isinstance(d, dict) or not isinstance(d.get("name"), str) or not d["name"]:
            raise ValueError(f"{dwhere} needs a name such as \"CUDA0\"")
        backend = str(d.get("backend") or _backend_from_name(d["name"])).lower()
        if backend not in _BACKENDS:
            raise ValueError(f"{dwhere}: backend must be one of {', '.join(_BACKENDS)}, got {backend!r}")
        total = _size(d, "total", dwhere, required=False)
        free = _size(d, "free", dwhere, required=False)
        if total is not None and free is not None and free > total:
            raise ValueError(f"{dwhere}: free memory is larger than total memory")
        kind = str(d.get("kind", "unknown")).lower()
        if kind not in ("discrete", "integrated", "unknown"):
            raise ValueError(f"{dwhere}: kind must be discrete, integrated or unknown, got {kind!r}")
        devices.append(Device(name=d["name"], description=str(d.get("description", d["name"])),
                              backend=backend, total_bytes=total, free_bytes=free, kind=kind,
                              compute_cap=d.get("compute_cap"), gfx_target=d.get("gfx_target"),
                              driver_cuda_version=d.get("driver_cuda_version"),
                              bandwidth_bytes_per_s=_bandwidth(d, dwhere)))
    unified = data.get("unified_memory", os_name == "darwin" and data.get("arch") == "arm64")
    if not isinstance(unified, bool):
        raise ValueError(f"{where}: unified_memory must be true or false, got {unified!r}")
    return Machine(os=os_name, arch=str(data.get("arch", "x86_64")), ram_total_bytes=ram_total,
                   ram_available_bytes=ram_available, physical_cores=count("physical_cores"),
                   logical_cores=count("logical_cores"), devices=tuple(devices),
                   unified_memory=unified, source=f"file:{source}",
                   ram_bandwidth_bytes_per_s=_bandwidth(data, where, "ram_bandwidth_gb_s"))


def _bandwidth(obj: dict[str, Any], where: str, key: str = "bandwidth_gb_s") -> int | None:
    v = obj.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0:
        raise ValueError(f"{where}: {key} must be a positive number of GB/s, got {v!r}")
    return int(v * 1_000_000_000)


def _backend_from_name(name: str) -> str:
    for prefix, backend in (("CUDA", "cuda"), ("ROCm", "rocm"), ("Vulkan", "vulkan"), ("MTL", "metal"),
                            ("Metal", "metal"), ("SYCL", "sycl"), ("GPUOpenCL", "opencl"), ("RPC", "rpc")):
        if name.startswith(prefix):
            return backend
    return "other"
