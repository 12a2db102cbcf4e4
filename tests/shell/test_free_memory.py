"""Reading free memory (a cgroup's room under a limit) and keeping measured load times."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from stoker.diagnosis import memory_cgroup
from stoker.engines import load_times
from stoker.engines.free_memory import cgroup_room, own_cgroups

MIB = 1024 ** 2


def test_the_own_cgroup_is_read_from_proc_self_cgroup_v1_and_v2(tmp_path):
    v1 = "9:name=systemd:/\n4:memory:/slice/app\n0::/\n"
    assert own_cgroups(v1, tmp_path) == [(tmp_path / "memory/slice/app", 1), (tmp_path / "memory/slice", 1),
                                        (tmp_path / "memory", 1)]
    (tmp_path / "cgroup.controllers").write_text("memory\n")
    assert own_cgroups("0::/user.slice/app\n", tmp_path)[0] == (tmp_path / "user.slice/app", 2)


def test_the_room_is_the_tightest_limit_less_the_working_set(tmp_path):
    (tmp_path / "cgroup.controllers").write_text("memory\n")
    outer, inner = tmp_path / "outer", tmp_path / "outer/inner"
    inner.mkdir(parents=True)
    (outer / "memory.max").write_text(str(1000 * MIB))
    (outer / "memory.current").write_text(str(900 * MIB))
    (outer / "memory.stat").write_text(f"anon 1\ninactive_file {300 * MIB}\n")
    (inner / "memory.max").write_text("max\n")  # no limit of its own: the parent's counts
    (inner / "memory.current").write_text(str(100 * MIB))
    room, limit, group = cgroup_room(tmp_path, "0::/outer/inner\n")
    assert (room, limit, group) == (400 * MIB, 1000 * MIB, outer)  # 1000 - (900 - 300)
    assert cgroup_room(tmp_path, "0::/\n") is None


@pytest.mark.skipif(sys.platform != "linux" or not memory_cgroup.available(),
                    reason="needs a writable memory cgroup (Linux, root or delegated v2)")
def test_a_process_in_a_limited_cgroup_reads_the_group_s_room_not_the_host_s():
    group = memory_cgroup.MemoryCgroup.create(512 * MIB)
    try:
        code = ("import json; from stoker.engines.free_memory import read_free_memory; "
                "r = read_free_memory(None); "
                "print(json.dumps([r.pools[0].free_bytes, r.pools[0].total_bytes, r.source]))")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                             preexec_fn=group.enter_fn(), check=True).stdout
        free, total, source = json.loads(out)
        assert total == 512 * MIB and 0 < free < 512 * MIB and str(group.path) in source
    finally:
        group.remove()


def test_load_times_keep_the_median_of_the_last_loads_per_file_and_build(stoker_home, tmp_path):
    model, binary = tmp_path / "m.gguf", tmp_path / "llama-server"
    model.write_bytes(b"GGUF" + b"\0" * 64)
    binary.write_bytes(b"\x7fELF" + b"\0" * 64)
    assert load_times.load_seconds(str(model), str(binary)) is None
    for s in (4.0, 1.0, 2.0):
        load_times.record_load(str(model), str(binary), s)
    assert load_times.load_seconds(str(model), str(binary)) == 2.0
    for s in (3.0,) * load_times.MAX_TIMES:
        load_times.record_load(str(model), str(binary), s)
    assert load_times.load_seconds(str(model), str(binary)) == 3.0  # the oldest ones are gone
    model.write_bytes(b"GGUF" + b"\1" * 80)  # another file under the same name
    assert load_times.load_seconds(str(model), str(binary)) is None
    assert load_times.record_load(str(model), str(binary), 0.0) is None  # no time, nothing kept


def test_the_watch_reads_ram_on_the_pass_and_a_gpu_off_the_thread_each_interval():
    import threading

    from stoker.engines.free_memory import FreeReading, PoolReading
    from stoker.fleet.memory_watch import MemoryWatch
    from stoker.planning.planner import PlanPolicy

    woken = threading.Event()
    threads: list[str] = []

    def read(gpu):
        threads.append(threading.current_thread().name)
        pools = (PoolReading("CPU", 3 * 1024 ** 3, 32 * 1024 ** 3),)
        return FreeReading(pools + ((PoolReading("CUDA0", 512 * MIB, 8 * 1024 ** 3),) if gpu else ()))

    watch = MemoryWatch(woken.set, interval_s=1.0, read=read, policy=PlanPolicy)
    try:
        assert watch.next_due(False, 10.0) is None and watch.poll(False, None, 10.0) is None
        assert watch.next_due(True, 10.0) == 10.0  # the first one at once
        got = watch.poll(True, None, 10.0)  # RAM only: read at once, on this thread
        assert got is not None and dict(got.free_by_pool) == {"CPU": 3 * 1024 ** 3}
        assert dict(got.reserve_by_pool) == {"CPU": PlanPolicy().os_reserve(32 * 1024 ** 3)}
        assert threads == [threading.current_thread().name]
        assert watch.poll(True, None, 10.4) is None and watch.next_due(True, 10.4) == 11.0
        # Half an interval on, a pass made for something else takes it; a GPU is read off the thread.
        assert watch.poll(True, "/engine", 10.6) is None
        assert woken.wait(10)
        got = watch.poll(True, "/engine", 11.0)
        assert got is not None and dict(got.reserve_by_pool)["CUDA0"] == PlanPolicy().device_margin_bytes
        assert threads[-1].startswith("stoker-memory")
    finally:
        watch.close()


def test_only_vram_read_live_counts_a_cached_engine_figure_is_left_out(monkeypatch):
    from stoker.engines import free_memory
    from stoker.planning.machine import Device, Machine

    gib = 1024 ** 3
    machine = Machine(os="linux", arch="x86_64", ram_total_bytes=64 * gib, ram_available_bytes=20 * gib,
                      physical_cores=8, logical_cores=16, devices=(
                          Device("CUDA0", "NVIDIA RTX 4090", "cuda", 24 * gib, 3 * gib, compute_cap="8.9"),
                          Device("Vulkan0", "AMD Radeon", "vulkan", 16 * gib, 15 * gib)))
    asked = []
    monkeypatch.setattr(free_memory, "probe_machine", lambda binary: asked.append(binary) or machine)
    got = free_memory.read_free_memory("/engines/llama-server")
    assert asked == ["/engines/llama-server"]
    assert [(p.name, p.free_bytes, p.total_bytes) for p in got.pools[1:]] == [("CUDA0", 3 * gib, 24 * gib)]
    assert got.pools[0].name == "CPU" and not got.unified
    assert [p.name for p in free_memory.read_free_memory(None).pools] == ["CPU"]  # no GPU model: RAM only
