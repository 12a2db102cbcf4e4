"""probe_machine on the real host, with fake engine / vendor tools for caching and failure shapes."""

from __future__ import annotations

import os
import stat
import sys
import time
from pathlib import Path

import pytest

from stoker.engines import probe
from stoker.engines.identity import binary_identity
from stoker.engines.probe import engine_env, probe_amd, probe_machine, run_list_devices
from stoker.planning.devices import MIB

pytestmark = pytest.mark.skipif(os.name == "nt", reason="fake tools are shell scripts")

CUDA_LINE = "  CUDA0: NVIDIA GeForce RTX 4090 (24080 MiB, 23517 MiB free)"


def make_script(path: Path, body: str) -> Path:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def fake_engine(folder: Path, lines: str = CUDA_LINE, rc: int = 0) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "libggml-base.so").write_bytes(b"base")
    return make_script(folder / "llama-server", f"""\
echo run >> "{folder}/runs"
env > "{folder}/env"
echo "Available devices:"
printf '%s\\n' "{lines}"
echo "noise on stderr" >&2
exit {rc}
""")


def runs(folder: Path) -> int:
    p = folder / "runs"
    return len(p.read_text().splitlines()) if p.exists() else 0


def test_real_host_facts(stoker_home):
    m = probe_machine()
    assert m.ram_total_bytes > 256 * MIB
    assert m.ram_available_bytes is not None and 0 < m.ram_available_bytes <= m.ram_total_bytes
    assert m.logical_cores and m.logical_cores >= 1
    assert m.physical_cores is None or m.physical_cores <= m.logical_cores
    assert m.os == {"linux": "linux", "darwin": "darwin"}.get(sys.platform, m.os)
    assert m.arch and m.source == "probed"


def test_list_devices_is_cached_by_binary_identity(stoker_home, tmp_path):
    folder = tmp_path / "engine"
    binary = fake_engine(folder)
    m = probe_machine(binary)
    assert [d.name for d in m.devices] == ["CUDA0"]
    assert m.devices[0].total_bytes == 24080 * MIB
    assert runs(folder) == 1
    probe_machine(binary)
    assert runs(folder) == 1  # unchanged binary: the cache answers
    assert list((stoker_home / "cache" / "devices").glob("*.json"))

    # A backend library appearing beside the binary changes its identity.
    (folder / "libggml-cuda.so").write_bytes(b"cuda")
    probe_machine(binary)
    assert runs(folder) == 2
    probe_machine(binary)
    assert runs(folder) == 2

    # So does a library changing size, or the binary being replaced.
    (folder / "libggml-base.so").write_bytes(b"base, rebuilt")
    probe_machine(binary)
    assert runs(folder) == 3
    fake_engine(folder, lines="  Vulkan0: AMD Radeon RX 7900 XTX (24560 MiB, 24000 MiB free)")
    m = probe_machine(binary)
    assert runs(folder) == 4 and m.devices[0].name == "Vulkan0"

    probe_machine(binary, use_cache=False)
    assert runs(folder) == 5


def test_binary_identity_tracks_libraries(tmp_path):
    binary = fake_engine(tmp_path / "e")
    a = binary_identity(binary)
    assert a == binary_identity(binary)
    lib = tmp_path / "e" / "libggml-base.so"
    before = lib.stat().st_mtime_ns
    lib.write_bytes(b"base")  # same size, and a new mtime set outright (no wait for the clock to tick)
    os.utime(lib, ns=(before + 1_000_000_000, before + 1_000_000_000))
    assert binary_identity(binary) != a


def test_probe_env_is_sanitised(stoker_home, tmp_path, monkeypatch):
    monkeypatch.setenv("LLAMA_ARG_CTX_SIZE", "999")
    monkeypatch.setenv("LLAMA_API_KEY", "secret")
    folder = tmp_path / "engine"
    probe_machine(fake_engine(folder))
    env = dict(line.split("=", 1) for line in (folder / "env").read_text().splitlines() if "=" in line)
    assert not any(k.startswith("LLAMA_ARG_") for k in env) and "LLAMA_API_KEY" not in env
    assert env["PATH"].split(os.pathsep)[0] == str(folder.resolve())
    lib_var = "DYLD_LIBRARY_PATH" if sys.platform == "darwin" else "LD_LIBRARY_PATH"
    assert env[lib_var].split(os.pathsep)[0] == str(folder.resolve())
    assert env["XDG_CONFIG_HOME"] != os.environ.get("XDG_CONFIG_HOME")
    assert engine_env(folder / "x", {"PATH": "/bin"})["PATH"] == f"{folder}{os.pathsep}/bin"


def test_failing_binary_is_noted_and_not_cached(stoker_home, tmp_path):
    folder = tmp_path / "engine"
    binary = fake_engine(folder, lines="error: libcuda.so.1: cannot open shared object file", rc=1)
    m = probe_machine(binary)
    assert m.devices == ()
    assert any("--list-devices exited with status 1 (noise on stderr)" in n for n in m.notes)
    probe_machine(binary)
    assert runs(folder) == 2  # failures are retried, not remembered


def test_missing_and_hanging_binaries_never_raise(stoker_home, tmp_path, monkeypatch):
    m = probe_machine(tmp_path / "nope" / "llama-server")
    assert any("does not exist" in n for n in m.notes)
    monkeypatch.setattr(probe, "LIST_DEVICES_TIMEOUT_S", 0.5)
    hang = make_script(tmp_path / "hang", "exec sleep 30\n")
    start = time.monotonic()
    m = probe_machine(hang)
    assert time.monotonic() - start < 10
    assert any("did not finish" in n for n in m.notes)
    not_exec = tmp_path / "plain"
    not_exec.write_text("not a program")
    stdout, notes = run_list_devices(not_exec, use_cache=False)
    assert stdout is None and "could not be run" in notes[0]


def test_nvidia_smi_facts_are_merged(stoker_home, tmp_path, monkeypatch):
    tools = tmp_path / "tools"
    tools.mkdir()
    make_script(tools / "nvidia-smi", """\
case "$1" in
  --query-gpu=*) echo "0, NVIDIA GeForce RTX 4090, 24564, 20000, 8.9, 550.54.14" ;;
  *) echo "| NVIDIA-SMI 550.54.14   Driver Version: 550.54.14   CUDA Version: 12.4 |" ;;
esac
""")
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ['PATH']}")
    m = probe_machine(fake_engine(tmp_path / "engine"))
    (cuda,) = m.devices
    assert cuda.compute_cap == "8.9" and cuda.driver_cuda_version == "12.4"
    assert cuda.free_bytes == 20000 * MIB  # live from nvidia-smi, not the cached list
    assert not m.unified_memory

    # A CPU-only build on the same machine: the GPU is named in a note, not planned on.
    m = probe_machine(fake_engine(tmp_path / "cpu", lines="  (none)"))
    assert m.devices == ()
    assert any("RTX 4090 is on this machine but the engine build does not list it" in n for n in m.notes)

    # No engine: the vendor tool's view.
    m = probe_machine()
    assert [d.name for d in m.devices] == ["nvidia0"] and m.devices[0].total_bytes == 24564 * MIB


def test_failing_nvidia_smi_is_a_note(stoker_home, tmp_path, monkeypatch):
    tools = tmp_path / "tools"
    tools.mkdir()
    make_script(tools / "nvidia-smi", "echo 'NVIDIA-SMI has failed because it could not communicate with "
                                      "the NVIDIA driver.'; exit 9\n")
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ['PATH']}")
    m = probe_machine()
    assert any(n.startswith("nvidia-smi failed (NVIDIA-SMI has failed") for n in m.notes)


def test_amd_sysfs(tmp_path):
    nodes, drm = tmp_path / "nodes", tmp_path / "drm"
    (nodes / "0").mkdir(parents=True)
    (nodes / "0" / "properties").write_text("cpu_cores_count 16\ngfx_target_version 0\n")
    (nodes / "1").mkdir()
    (nodes / "1" / "properties").write_text("simd_count 192\ngfx_target_version 110000\ndrm_render_minor 128\n")
    (nodes / "2").mkdir()
    (nodes / "2" / "properties").write_text("gfx_target_version 100300\ndrm_render_minor 129\n")
    dev = drm / "renderD128" / "device"
    dev.mkdir(parents=True)
    (dev / "mem_info_vram_total").write_text(str(24 * 1024 * MIB))
    (dev / "mem_info_vram_used").write_text(str(1024 * MIB))
    gpus, notes = probe_amd(nodes, drm)
    assert [g.gfx_target for g in gpus] == ["gfx1100", "gfx1030"]
    assert gpus[0].total_bytes == 24 * 1024 * MIB and gpus[0].used_bytes == 1024 * MIB
    assert gpus[1].total_bytes is None  # no sysfs VRAM file: unknown, not 0
    assert notes == ()


def test_real_cpu_engine_lists_no_gpus(stoker_home, engine_binary):
    binary = engine_binary
    stdout, notes = run_list_devices(binary, use_cache=False)
    assert stdout is not None, notes
    assert "Available devices:" in stdout and "(none)" in stdout
    m = probe_machine(binary)
    assert m.devices == () and not m.unified_memory
