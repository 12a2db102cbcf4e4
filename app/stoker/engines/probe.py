"""Read this machine's facts: RAM, cores, OS, and the GPUs an engine build can use.

Sources: psutil for RAM and cores; `<llama-server> --list-devices` for the GPUs a build
sees (the only honest answer to "what will the engine use"); nvidia-smi for compute
capability, the driver's CUDA version and live free VRAM; AMD's KFD topology in sysfs
(or rocminfo) for gfx targets and VRAM.

Freshness: the `--list-devices` output is cached under `<cache>/devices/`, keyed by the
binary's identity (resolved path, size, mtime and the same of the libggml libraries
beside it), and re-run only when that changes, so device totals and the engine's "free"
figure can be stale. nvidia-smi is cheap and runs on every probe, so NVIDIA free memory
is live; RAM available is always live. AMD sysfs is read live.

Never raises for a missing tool or a failing binary: the Machine says what is known
and `notes` says, one sentence each, what could not be learned and why.
"""

from __future__ import annotations

import contextlib
import os
import platform
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import psutil

from stoker.base.paths import stoker_paths
from stoker.base.rpc_address import RpcWorker
from stoker.base.store import read_json, write_json_atomic
from stoker.engines.bandwidth import cached_cpu_bandwidth
from stoker.engines.find import discover_engines
from stoker.engines.identity import binary_identity
from stoker.engines.process import clean_engine_env, probe_process_kwargs
from stoker.engines.rpc import worker_of_device
from stoker.planning.devices import (
    NVIDIA_SMI_QUERY,
    AmdGpu,
    decide_unified_memory,
    devices_from_amd_sysfs,
    devices_from_nvidia_smi,
    list_devices_notes,
    merge_amd_facts,
    merge_nvidia_facts,
    parse_kfd_properties,
    parse_list_devices,
    parse_nvidia_smi,
    parse_nvidia_smi_cuda_version,
    parse_rocminfo,
)
from stoker.planning.machine import Device, Machine

LIST_DEVICES_TIMEOUT_S = 20
VENDOR_TOOL_TIMEOUT_S = 5
CACHE_SCHEMA = 1
KFD_NODES = Path("/sys/class/kfd/kfd/topology/nodes")
DRM = Path("/sys/class/drm")


def host_os() -> str:
    name = platform.system().lower()
    return {"darwin": "darwin", "windows": "windows"}.get(name, name or "unknown")


def host_arch() -> str:
    arch = platform.machine().lower()
    return {"amd64": "x86_64", "x64": "x86_64", "aarch64": "arm64", "arm64": "arm64"}.get(arch, arch or "unknown")


def engine_env(binary: Path, base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for running an engine binary outside a launch: no inherited
    LLAMA_ARG_* (the engine would obey them) or API key, and the binary's folder first on
    the library and program paths so the libraries beside it are the ones loaded."""

    env = clean_engine_env(base=base)
    folder = str(binary.parent)
    env["PATH"] = folder + os.pathsep + env["PATH"] if env.get("PATH") else folder
    if os.name != "nt":
        key = "DYLD_LIBRARY_PATH" if host_os() == "darwin" else "LD_LIBRARY_PATH"
        env[key] = folder + os.pathsep + env[key] if env.get(key) else folder
    return env


def _run(argv: list[str], timeout: float, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:

    # Its own process group: a Ctrl-C meant for Stoker must not end a probe and read as "no GPU".
    return subprocess.run(argv, capture_output=True, text=True, errors="replace", timeout=timeout,
                          env=env, stdin=subprocess.DEVNULL, **probe_process_kwargs())


def _cache_file(identity: str) -> Path:
    return stoker_paths().cache / "devices" / f"{identity[:32]}.json"


def run_list_devices(binary: Path | str, *, use_cache: bool = True) -> tuple[str | None, tuple[str, ...]]:
    """`<binary> --list-devices` stdout, from the cache when the binary is unchanged.

    Returns (stdout, notes); stdout is None when the probe failed (the note says why).
    Failures are not cached, so a fixed driver is seen on the next probe.
    """

    binary = Path(binary).expanduser()
    if not binary.is_file():
        return None, (f"The engine binary {binary} does not exist, so its GPUs were not listed.",)
    identity = binary_identity(binary)
    if identity is None:
        return None, (f"The engine binary {binary} cannot be read, so its GPUs were not listed.",)
    cache = _cache_file(identity)
    notes: list[str] = []
    if use_cache:
        cached, problem = read_json(cache)
        if problem:
            notes.append(problem)
        if (isinstance(cached, dict) and cached.get("schema") == CACHE_SCHEMA
                and cached.get("identity") == identity and isinstance(cached.get("stdout"), str)):
            return cached["stdout"], tuple(notes)
    with tempfile.TemporaryDirectory(prefix="stoker-probe-") as empty:
        env = engine_env(binary.resolve())
        env["XDG_CONFIG_HOME"] = empty  # keep ~/.config/llama.cpp/config.ini out of the probe
        try:
            proc = _run([str(binary), "--list-devices"], LIST_DEVICES_TIMEOUT_S, env)
        except subprocess.TimeoutExpired:
            return None, (*notes, f"{binary} --list-devices did not finish within {LIST_DEVICES_TIMEOUT_S} s, "
                                  "so its GPUs are unknown.")
        except OSError as exc:
            return None, (*notes, f"{binary} could not be run ({exc.strerror or exc}), so its GPUs are unknown.")
    if proc.returncode != 0:
        tail = next((ln.strip() for ln in reversed((proc.stderr or proc.stdout).splitlines()) if ln.strip()), "")
        return None, (*notes, f"{binary} --list-devices exited with status {proc.returncode}"
                              + (f" ({tail})" if tail else "") + ", so its GPUs are unknown.")
    try:
        write_json_atomic(cache, {"schema": CACHE_SCHEMA, "identity": identity, "binary": str(binary.resolve()),
                                  "stdout": proc.stdout})
    except OSError as exc:
        notes.append(f"Could not cache the device list in {cache.parent} ({exc.strerror or exc}).")
    return proc.stdout, tuple(notes)


def probe_nvidia() -> tuple[tuple, str | None, tuple[str, ...]]:
    """(NvidiaGpu rows, driver CUDA version, notes) from nvidia-smi; empty when it is absent."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return (), None, ()
    try:
        query = _run([smi, f"--query-gpu={NVIDIA_SMI_QUERY}", "--format=csv,noheader,nounits"],
                     VENDOR_TOOL_TIMEOUT_S)
    except (subprocess.TimeoutExpired, OSError) as exc:
        return (), None, (f"nvidia-smi did not answer ({type(exc).__name__}); NVIDIA facts are unknown.",)
    if query.returncode != 0:
        first = (query.stdout.strip() or query.stderr.strip()).splitlines()[:1]
        return (), None, (f"nvidia-smi failed ({first[0] if first else f'status {query.returncode}'}); "
                          "the NVIDIA driver may not be loaded.",)
    gpus = parse_nvidia_smi(query.stdout)
    cuda = None
    try:
        header = _run([smi], VENDOR_TOOL_TIMEOUT_S)
        cuda = parse_nvidia_smi_cuda_version(header.stdout)
    except (subprocess.TimeoutExpired, OSError):
        pass
    notes = () if cuda or not gpus else ("nvidia-smi did not say which CUDA version the driver supports.",)
    return gpus, cuda, notes


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def probe_amd(nodes_dir: Path = KFD_NODES, drm_dir: Path = DRM) -> tuple[tuple[AmdGpu, ...], tuple[str, ...]]:
    """AMD GPUs from the KFD topology (gfx target) and the DRM render node (VRAM), or rocminfo."""
    gpus: list[AmdGpu] = []
    if nodes_dir.is_dir():
        nodes = sorted((p for p in nodes_dir.iterdir() if p.name.isdigit()), key=lambda p: int(p.name))
        for node in nodes:
            try:
                props = (node / "properties").read_text()
            except OSError:
                continue
            gfx = parse_kfd_properties(props)
            if gfx is None:
                continue  # a CPU node
            minor = next((int(ln.split()[1]) for ln in props.splitlines()
                          if ln.startswith("drm_render_minor ") and ln.split()[1].isdigit()), None)
            device = drm_dir / f"renderD{minor}" / "device" if minor is not None else None
            total = _read_int(device / "mem_info_vram_total") if device else None
            used = _read_int(device / "mem_info_vram_used") if device else None
            gpus.append(AmdGpu(gfx, total, used))
        return tuple(gpus), ()
    rocminfo = shutil.which("rocminfo")
    if rocminfo is None:
        return (), ()
    try:
        proc = _run([rocminfo], VENDOR_TOOL_TIMEOUT_S)
    except (subprocess.TimeoutExpired, OSError) as exc:
        return (), (f"rocminfo did not answer ({type(exc).__name__}); AMD gfx targets are unknown.",)
    return tuple(AmdGpu(gfx, None, None) for gfx in parse_rocminfo(proc.stdout)), ()


def _unlisted_vendor_gpus(engine_devices: tuple[Device, ...], vendor: tuple[Device, ...]) -> tuple[str, ...]:
    # NVIDIA names match between nvidia-smi and the engine; sysfs has no AMD marketing
    # name, so an AMD GPU counts as listed when the engine lists any AMD device.
    listed = " ".join(d.description.lower() for d in engine_devices)
    engine_has_amd = any("amd" in d.description.lower() or "radeon" in d.description.lower()
                         or d.backend == "rocm" for d in engine_devices)
    missing = [d for d in vendor
               if (d.name.startswith("nvidia") and d.description.lower() not in listed)
               or (d.name.startswith("amd") and not engine_has_amd)]
    return tuple(
        f"{d.description} is on this machine but the engine build does not list it "
        "(a CPU-only build, or a driver the build cannot use)."
        for d in missing
    )


def probe_machine(engine_binary: str | Path | None = None, *, use_cache: bool = True) -> Machine:
    """This machine's facts; the GPUs are the ones `engine_binary` lists when one is given,
    else the ones vendor tools report. See the module docstring for what may be stale."""
    notes: list[str] = []
    vm = psutil.virtual_memory()
    os_name, arch = host_os(), host_arch()

    nvidia, cuda_version, nv_notes = probe_nvidia()
    amd, amd_notes = probe_amd() if os_name == "linux" else ((), ())
    notes += [*nv_notes, *amd_notes]
    vendor_devices = devices_from_nvidia_smi(nvidia, cuda_version) + devices_from_amd_sysfs(amd)

    engine_stdout = None
    if engine_binary is not None:
        engine_stdout, probe_notes = run_list_devices(engine_binary, use_cache=use_cache)
        notes += probe_notes
    if engine_stdout is not None:
        devices = parse_list_devices(engine_stdout)
        notes += list_devices_notes(engine_stdout)
        devices = merge_nvidia_facts(devices, nvidia, cuda_version)
        devices = merge_amd_facts(devices, tuple(g.gfx_target for g in amd if g.gfx_target))
        notes += _unlisted_vendor_gpus(devices, vendor_devices)
    else:
        devices = vendor_devices  # the caller knows whether it gave no engine; no note for that


    measured = cached_cpu_bandwidth(engine_binary) if engine_binary is not None else None
    return Machine(
        os=os_name,
        arch=arch,
        ram_total_bytes=int(vm.total),
        ram_available_bytes=int(vm.available),
        physical_cores=psutil.cpu_count(logical=False),
        logical_cores=psutil.cpu_count(logical=True),
        devices=devices,
        unified_memory=decide_unified_memory(os_name, arch, devices, int(vm.total)),
        source="probed",
        notes=tuple(notes),
        ram_bandwidth_bytes_per_s=measured.effective_bytes_per_s if measured is not None else None,
    )


# ---------------------------------------------------------------- RPC workers' devices

def probe_workers(binary: Path | str, workers, *, use_cache: bool = True
                  ) -> tuple[tuple[Device, ...], tuple, tuple[str, ...]]:
    """The devices RPC workers lend, as the RPC build of llama-server lists them.

    Returns (devices, unreachable workers, notes). Each worker gets a short TCP connect
    first: the engine itself aborts on a worker that is not there, or waits on one that
    does not answer, so an unreachable worker is a sentence here and is left out. The list
    is asked of the engine one worker at a time (`--list-devices --rpc HOST:PORT`) and
    cached per worker under `<cache>/devices/rpc-*.json`; a worker that was unreachable and
    is back is asked afresh (`use_cache` False asks every worker). The names are renumbered
    RPC0, RPC1 … in the order given, as the engine numbers them for the whole `--rpc` list.
    """

    binary = Path(binary).expanduser()
    devices: list[Device] = []
    gone, notes = [], []
    for w in workers:
        if not reachable(w):
            gone.append(w)
            notes.append(f"The RPC worker {w.endpoint} did not accept a connection within a second, so it "
                         "is left out; start `stoker worker` there (or its SSH tunnel) and Stoker uses it "
                         "on the next start.")
            _forget_worker(w)
            continue
        cache = stoker_paths().cache / "devices" / f"rpc-{w.host}-{w.port}.json"
        cached, _ = read_json(cache) if use_cache else (None, None)
        stdout = cached.get("stdout") if isinstance(cached, dict) and cached.get("schema") == CACHE_SCHEMA \
            and cached.get("identity") == binary_identity(binary) else None
        if stdout is None:
            try:
                proc = _run([str(binary), "--rpc", w.endpoint, "--list-devices"], LIST_DEVICES_TIMEOUT_S,
                            engine_env(binary.resolve()))
            except (subprocess.TimeoutExpired, OSError) as exc:
                gone.append(w)
                notes.append(f"The RPC worker {w.endpoint} accepted a connection but did not list its devices "
                             f"({type(exc).__name__}), so it is left out.")
                continue
            if proc.returncode != 0:
                gone.append(w)
                notes.append(f"The RPC worker {w.endpoint} could not be asked for its devices (the engine "
                             f"exited with status {proc.returncode}), so it is left out.")
                continue
            stdout = proc.stdout
            with contextlib.suppress(OSError):
                write_json_atomic(cache, {"schema": CACHE_SCHEMA, "identity": binary_identity(binary),
                                          "worker": w.endpoint, "stdout": stdout})
        for d in parse_list_devices(stdout):
            if d.backend == "rpc" and worker_of_device(d.description, (w,)) is not None:
                devices.append(Device(name=f"RPC{len(devices)}", description=w.endpoint, backend="rpc",
                                      total_bytes=d.total_bytes, free_bytes=d.free_bytes, kind="unknown"))
    return tuple(devices), tuple(gone), tuple(notes)


def _forget_worker(worker) -> None:
    """A worker that went away may come back with other devices or memory: ask it afresh."""
    with contextlib.suppress(OSError):
        (stoker_paths().cache / "devices" / f"rpc-{worker.host}-{worker.port}.json").unlink()


CONNECT_TIMEOUT_S = 1.0  # a worker that does not accept within this is not there


def reachable(worker: RpcWorker, timeout_s: float = CONNECT_TIMEOUT_S) -> bool:
    """A TCP connect within `timeout_s`: the check before the engine is asked (it would hang
    or abort on a worker that is not there)."""
    try:
        with socket.create_connection((worker.host, worker.port), timeout=timeout_s):
            return True
    except OSError:
        return False


def this_machine() -> Machine:
    binary = None
    try:
        binary = next((b.binary for b in discover_engines() if b.usable), None)
    except Exception:  # no build yet: the vendor tools still say what the GPUs are
        binary = None
    return probe_machine(binary)
