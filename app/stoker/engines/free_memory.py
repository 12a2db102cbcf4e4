"""Read what memory is free right now: RAM (a memory cgroup's room under a limit) and live VRAM.

Other applications (a game, a browser, ComfyUI) grow while models are resident; the
supervisor reads this every 2 s while a model is loaded (stoker/fleet/memory_watch.py) and the fleet
decides what to unload (stoker/fleet/residency.py `yield_to_desktop`).

- RAM: psutil's "available" (free plus reclaimable page cache). Under a memory cgroup with
  a limit (a container, a systemd slice with MemoryMax, the OOM tests), the host's figure is
  the wrong one: the kernel kills inside the group when the GROUP is full. There the room is
  the limit minus the group's working set (usage less its inactive file pages, which the
  kernel reclaims before it kills, as `docker stats` counts it), the tightest of the group
  and its ancestors; cgroup v1 and v2 alike.
- VRAM: only where a live reading exists. The engine's `--list-devices` figure is cached
  (stoker/engines/probe.py) and may be hours old, so it is never used here: NVIDIA GPUs are
  read through nvidia-smi (their devices carry a compute capability once merged with its
  live numbers). AMD (rocm-smi / sysfs) and Metal's working set are not read yet: those
  pools are left out, and nothing is decided about them.

It reads and reports; it decides nothing. nvidia-smi may block for up to its timeout, so a
caller runs `read_free_memory` off the supervisor thread.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import psutil

from stoker.engines.probe import probe_machine

CGROUP_ROOT = Path("/sys/fs/cgroup")
V1_NO_LIMIT = 1 << 60  # v1 says "no limit" with a number near 2**63


@dataclass(frozen=True)
class PoolReading:
    name: str  # "CPU" for RAM, else the engine's device name (CUDA0 …)
    free_bytes: int
    total_bytes: int  # under a cgroup, its limit


@dataclass(frozen=True)
class FreeReading:
    pools: tuple[PoolReading, ...]
    unified: bool = False  # the GPU's memory is the RAM (Apple silicon, some APUs)
    source: str = "host"  # "host" or "cgroup <path>": where the RAM figure came from


def _int_file(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _stat_value(path: Path, *names: str) -> int:
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return 0
    for line in lines:
        key, _, value = line.partition(" ")
        if key in names and value.strip().isdigit():
            return int(value)
    return 0


def _group_room(group: Path, version: int) -> tuple[int, int] | None:
    """(room, limit) of one group with a limit; None without one (or unreadable)."""
    if version == 1:
        limit = _int_file(group / "memory.limit_in_bytes")
        usage = _int_file(group / "memory.usage_in_bytes")
        inactive = _stat_value(group / "memory.stat", "total_inactive_file")
        if limit is None or limit >= V1_NO_LIMIT or usage is None:
            return None
    else:
        limit = _int_file(group / "memory.max")  # "max" reads as None: no limit
        usage = _int_file(group / "memory.current")
        inactive = _stat_value(group / "memory.stat", "inactive_file")
        if limit is None or usage is None:
            return None
    return max(0, limit - max(0, usage - inactive)), limit


def own_cgroups(proc_cgroup: str, root: Path = CGROUP_ROOT) -> list[tuple[Path, int]]:
    """The memory cgroup this process is in and each ancestor, innermost first, from the
    text of /proc/self/cgroup (v1's memory controller line, else v2's unified line)."""
    rel, version = None, 0
    for line in proc_cgroup.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        if "memory" in parts[1].split(","):
            rel, version = parts[2], 1
            break
        if parts[0] == "0" and parts[1] == "":
            rel, version = parts[2], 2
    if rel is None:
        return []
    base = root / "memory" if version == 1 else root
    if version == 2 and not (base / "cgroup.controllers").exists() and (root / "unified").is_dir():
        base = root / "unified"
    groups = []
    path = Path(rel)
    while True:
        groups.append((base / str(path).lstrip("/"), version))
        if path == path.parent:
            break
        path = path.parent
    return groups


def cgroup_room(root: Path = CGROUP_ROOT, proc_cgroup: str | None = None) -> tuple[int, int, Path] | None:
    """(room, limit, group) of the tightest memory cgroup this process is in; None when no
    group above it has a limit (or none is readable: not Linux)."""
    if proc_cgroup is None:
        try:
            proc_cgroup = Path("/proc/self/cgroup").read_text()
        except OSError:
            return None
    best = None
    for group, version in own_cgroups(proc_cgroup, root):
        got = _group_room(group, version)
        if got is not None and (best is None or got[0] < best[0]):
            best = (got[0], got[1], group)
    return best


def read_free_memory(gpu_binary: str | None) -> FreeReading:
    """RAM always; the live VRAM of the GPUs `gpu_binary` (a resident engine's build) lists,
    when a vendor tool reads it live. `gpu_binary` None: RAM only (no model holds a GPU)."""
    vm = psutil.virtual_memory()
    room = cgroup_room()
    if room is not None:
        ram = PoolReading("CPU", room[0], room[1])
        source = f"cgroup {room[2]}"
    else:
        ram = PoolReading("CPU", int(vm.available), int(vm.total))
        source = "host"
    if gpu_binary is None:
        return FreeReading((ram,), source=source)
    machine = probe_machine(gpu_binary)
    live = tuple(PoolReading(d.name, d.free_bytes, d.total_bytes) for d in machine.devices
                 if d.compute_cap is not None and d.free_bytes is not None and d.total_bytes is not None)
    return FreeReading((ram, *live), unified=machine.unified_memory, source=source)
