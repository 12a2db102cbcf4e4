"""What this (or another) machine has to give a model: RAM, cores and GPU devices.

Values only. `shell/probe.py` fills them from psutil, `llama-server --list-devices`,
nvidia-smi and sysfs; `--machine FILE` fills them from JSON (`machine_from_json`), so
plans can be made for a machine that is not this one. Unknown is `None`, never 0.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Device:
    """One accelerator as the engine names it (`CUDA0`, `ROCm0`, `Vulkan0`, `MTL0` …)."""

    name: str
    description: str
    backend: str  # cuda | rocm | vulkan | metal | sycl | opencl | other
    total_bytes: int | None
    free_bytes: int | None
    kind: str = "unknown"  # discrete | integrated | unknown
    # Facts from vendor tools, when known (diagnostics and blockers).
    compute_cap: str | None = None  # NVIDIA, e.g. "8.9"
    gfx_target: str | None = None  # AMD, e.g. "gfx1100"
    driver_cuda_version: str | None = None  # highest CUDA the NVIDIA driver supports


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

    @property
    def gpus(self) -> tuple[Device, ...]:
        return tuple(d for d in self.devices if d.backend not in ("cpu", "blas", "rpc"))
