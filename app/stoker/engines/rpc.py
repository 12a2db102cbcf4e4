"""RPC workers: llama.cpp `rpc-server` processes on other machines whose devices an engine uses.

What is decided here, from values only (a worker's address, `HOST:PORT`, is
stoker/base/rpc_address.py's, a Settings value): which engine device belongs to which
worker (the engine names them `RPC0`, `RPC1` … in `--rpc` order, with the worker's
`host:port` as the description), which workers are left for the next attempt after one went
away, how many bytes a worker's debug log says it allocated, which devices a worker's
rpc-server says it lends, and the warning for a worker bound beyond loopback. Running
rpc-server and the TCP check are `stoker/fleet/rpc_worker.py` and `stoker/engines/probe.py`;
placing layers is `stoker/planning/planner.py`.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable
from dataclasses import dataclass

from stoker.base.rpc_address import RpcWorker

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})

NO_AUTH_WARNING = ("RPC has no authentication and no encryption: anyone who can reach this port can "
                   "run code on this machine's devices and read what it computes. Bind it only on a "
                   "trusted network, or keep it on 127.0.0.1 and reach it through an SSH tunnel "
                   "(ssh -N -L PORT:127.0.0.1:PORT this-host).")


def rpc_argument(workers: Iterable[RpcWorker]) -> str:
    """The engine's `--rpc` value."""
    return ",".join(w.endpoint for w in workers)


def is_loopback(host: str) -> bool:
    return host in LOOPBACK_HOSTS or host.startswith("127.")


def worker_of_device(description: str, workers: Iterable[RpcWorker]) -> RpcWorker | None:
    """The worker an engine device belongs to: the engine writes its `host:port` as the description."""
    desc = description.strip()
    return next((w for w in workers if w.endpoint == desc), None)


def remaining_workers(workers: Iterable[RpcWorker], unreachable: Collection[RpcWorker]) -> tuple[RpcWorker, ...]:
    """The workers the next attempt uses: every one but those found gone."""
    gone = set(unreachable)
    return tuple(w for w in workers if w not in gone)


# --------------------------------------------------------------------- a worker's own log

# With GGML_RPC_DEBUG set, `rpc-server` logs one `[alloc_buffer] device: 0, size: N -> remote_ptr: …` per buffer.
_ALLOC = re.compile(r"\[alloc_buffer\] device: (\d+), size: (\d+) -> remote_ptr: ([0-9a-fA-F]+)")
_FREE = re.compile(r"\[free_buffer\] remote_ptr: ([0-9a-fA-F]+)")


def allocated_bytes(lines: Iterable[str]) -> int | None:
    """Bytes a worker holds in buffers now, from its debug log (allocations less frees);
    None when the log has no allocation line (debug off, or nothing allocated yet)."""
    live: dict[str, int] = {}
    seen = False
    for line in lines:
        m = _ALLOC.search(line)
        if m:
            seen = True
            live[m.group(3)] = int(m.group(2))
            continue
        f = _FREE.search(line)
        if f:
            live.pop(f.group(1), None)
    return sum(live.values()) if seen else None


def allocated_by_last_client(lines: Iterable[str]) -> int | None:
    """Bytes the worker's latest client with buffers holds: its log from the last
    `Accepted client connection` that was followed by allocations (a TCP reachability
    check connects too, and allocates nothing)."""
    segments: list[list[str]] = [[]]
    for line in lines:
        if "Accepted client connection" in line:
            segments.append([])
        else:
            segments[-1].append(line)
    for segment in reversed(segments):
        found = allocated_bytes(segment)
        if found is not None:
            return found
    return None


# rpc-server's start-up banner lists what it lends, one device a line under `Devices:`:
#   CPU: AMD EPYC (24105 MiB, 24105 MiB free)
_DEVICE = re.compile(r"^\s+(?P<name>[A-Za-z][A-Za-z0-9_]*): (?P<desc>.*?) "
                     r"\((?P<total>\d+) MiB, (?P<free>\d+) MiB free\)\s*$")


def worker_devices(lines: Iterable[str]) -> tuple[WorkerDeviceView, ...]:
    """The devices of the last `Devices:` block in a worker's log (its latest start); () when
    the banner has not come through yet."""
    found: list[WorkerDeviceView] = []
    in_block = False
    for line in lines:
        if line.strip() == "Devices:":
            found, in_block = [], True
            continue
        if in_block:
            m = _DEVICE.match(line)
            if m:
                found.append(WorkerDeviceView(m["name"], m["desc"].strip(), int(m["total"]) * 2 ** 20,
                                              int(m["free"]) * 2 ** 20))
                continue
            in_block = False
    return tuple(found)


def worker_status_line(endpoint: str, phase: str, pid: int | None, restarts: int,
                       devices: tuple[str, ...] = ()) -> str:
    """`worker 127.0.0.1:50052: ready (pid 123), devices CPU (15 GiB free), 0 restarts`."""
    parts = [f"worker {endpoint}: {phase}"]
    if pid:
        parts[0] += f" (pid {pid})"
    if devices:
        parts.append("devices " + "; ".join(devices))
    parts.append(f"{restarts} restart{'s' if restarts != 1 else ''}")
    return ", ".join(parts)


@dataclass(frozen=True)
class WorkerDeviceView:
    """One device this machine's RPC worker lends, as its rpc-server listed it when it started."""

    name: str  # the worker's own device name: CPU, CUDA0, Metal …
    description: str
    total_bytes: int | None
    free_bytes: int | None  # free when the rpc-server started
