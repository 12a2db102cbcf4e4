"""Two machines on one: two `stoker worker` processes on loopback ports stand in for two hosts.

Real processes throughout: the rpc-server and RPC-capable llama-server of `stoker setup --rpc`,
the demo model, `stoker run --rpc` with a memory budget too small for the model alone. The
plan puts layers on RPC0 and RPC1 and says so, `status --json` lists the devices, a chat
answers through the gateway; a killed worker's rpc-server is restarted by `stoker worker`;
a worker that is stopped gives the rpc-worker-lost incident, the model serves again on what
is left, and once the worker is back the status says so; the tray's "Use HOST:PORT again"
(UseWorkerAgain, through the real Supervisor and RealPreparer) spreads it over both again.
This machine's own worker (ShareWorker) runs under the supervisor with its own tray line.
A port another program holds, and an rpc-server without its libraries, are refused aloud with
the diagnosed kind and no restart loop.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

import httpx
import psutil
import pytest

from stoker.base.overrides import ModelOverrides
from stoker.base.paths import stoker_paths
from stoker.base.rpc_address import parse_workers
from stoker.desktop.tray_view import menu_view
from stoker.engines.probe import reachable
from stoker.engines.process import free_loopback_port
from stoker.fleet.commands import ShareWorker, Shutdown, StartModel, StopWorker, UseWorkerAgain
from stoker.fleet.restart import RestartPolicy
from stoker.fleet.rpc_worker import WorkerSupervisor, rpc_server_binary
from stoker.fleet.snapshot import EngineState as S
from stoker.fleet.status_report import status_object
from tests.conftest import TEST_HOME, _missing
from tests.shell.engine_helpers import chat, engine_key
from tests.shell.test_run_cli import REPO, Running, status_json, wait_status

pytestmark = pytest.mark.engine


@pytest.fixture
def rpc_home(stoker_home, demo_model):
    """The test's STOKER_HOME with the installed RPC build linked in (setup makes it once)."""
    build = TEST_HOME / "data" / "engines" / "rpc" / "b11434-cpu-rpc"
    if not (build / "rpc-server").is_file():
        _missing("the RPC build (stoker setup --rpc)")
    (stoker_home / "data" / "engines" / "rpc").mkdir(parents=True)
    (stoker_home / "data" / "engines" / "rpc" / build.name).symlink_to(build)
    return stoker_home


class Worker:
    def __init__(self, port: int, *extra: str):
        self.port = port
        self.proc = subprocess.Popen([sys.executable, "-m", "stoker", "worker", "--port", str(port), *extra],
                                     cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     env=os.environ.copy())
        self.lines: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_for(self, words: str, timeout: float = 30) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            hit = next((ln for ln in self.lines if words in ln), None)
            if hit:
                return hit
            time.sleep(0.05)  # paces the poll
        raise AssertionError(f"worker {self.port} never said {words!r}: {self.lines}")

    def server_pid(self) -> int:
        return next(c.pid for c in psutil.Process(self.proc.pid).children() if "rpc-server" in c.name())

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def test_a_model_split_over_two_loopback_workers_survives_losing_one(rpc_home, demo_model):
    p1, p2 = free_loopback_port(), free_loopback_port()
    w1, w2 = Worker(p1), Worker(p2)
    run = None
    try:
        w1.wait_for("ready")
        w2.wait_for("ready")
        # The worker keeps its rpc-server up: kill -9 is followed by a restart with backoff.
        os.kill(w1.server_pid(), signal.SIGKILL)
        w1.wait_for("ready (pid", timeout=30)
        w1.wait_for("1 restart", timeout=30)

        run = Running(str(demo_model), "--rpc", f"127.0.0.1:{p1},127.0.0.1:{p2}", "--headless",
                      "--port", "0", "--ctx", "2048", "--memory-budget", "0.08")
        endpoint = run.wait_line("endpoint: ").split()[1].removesuffix("/v1")
        run.wait_line("ready: ", timeout=120)
        status = status_json()
        engine = status["engines"][0]
        assert engine["engine_build"] == "b11434-cpu-rpc"
        assert {"CPU", "RPC0", "RPC1"} <= set(engine["bytes"]) and engine["bytes"]["RPC1"] > 0
        split = next(d["what"] for d in status["plan_decisions"] if d["what"].startswith("split across"))
        assert f"RPC0 (127.0.0.1:{p1})" in split and f"RPC1 (127.0.0.1:{p2})" in split
        assert "this machine's CPU" in split
        assert chat(endpoint)

        w2.stop()
        with pytest.raises(httpx.HTTPError):  # the engine dies under this request: the worker is gone
            chat(endpoint)
        again = wait_status(lambda s: s["state"] == "ready" and s["restarts"] >= 1
                            and s["last_incident"] and s["last_incident"]["kind"] == "rpc-worker-lost",
                            timeout=120)
        assert f"127.0.0.1:{p2}" in again["last_incident"]["action"]
        assert "RPC1" not in again["engines"][0]["bytes"]
        assert any("split across" in d["what"] and f"127.0.0.1:{p1}" in d["what"]
                   for d in again["plan_decisions"])
        assert chat(endpoint)
        assert any(ln.startswith("incident: ") and "rpc-worker-lost" in ln for ln in run.lines)

        w2 = Worker(p2)
        w2.wait_for("ready")
        back = wait_status(lambda s: f"127.0.0.1:{p2}" in s["rpc_workers_back"], timeout=30)
        assert back["rpc_workers_back"] == [f"127.0.0.1:{p2}"]

        run.proc.send_signal(signal.SIGINT)
        assert run.proc.wait(30) == 0
    finally:
        if run is not None:
            run.close()
        w1.stop()
        w2.stop()


def _focused(snap):
    return snap.engines[0] if snap.engines else None


def _bytes(snap) -> dict:
    e = _focused(snap)
    return dict(e.bytes_by_device) if e is not None else {}


def test_use_a_worker_again_once_it_is_back(rpc_home, demo_model):
    """Kill one of two workers: the model serves on what is left; restart it: the snapshot
    and the tray offer it; UseWorkerAgain re-plans with both (layers on RPC0 and RPC1)."""
    from stoker.fleet.launcher import RealPreparer
    from stoker.fleet.supervisor import Supervisor, SupervisorOptions

    p1, p2 = free_loopback_port(), free_loopback_port()
    ep1, ep2 = f"127.0.0.1:{p1}", f"127.0.0.1:{p2}"
    w1, w2 = Worker(p1), Worker(p2)
    sup = None
    try:
        w1.wait_for("ready")
        w2.wait_for("ready")
        preparer = RealPreparer(remember_last_model=False, startup_deadline_s=120,
                                cli_overrides=ModelOverrides(ctx=2048),
                                memory_budget_bytes=int(0.08 * 1024 ** 3),
                                rpc_workers=parse_workers(f"{ep1},{ep2}"))
        sup = Supervisor(preparer, SupervisorOptions(policy=RestartPolicy(first_delay_s=0.2, cap_s=2.0),
                                                     stop_grace_s=5)).start()
        sup.submit(StartModel(str(demo_model)))
        both = sup.wait_for(lambda s: s.state is S.READY and {"RPC0", "RPC1"} <= set(_bytes(s)), 180)
        assert both is not None, sup.snapshot()
        endpoint = _focused(both).endpoint
        assert chat(endpoint, key=engine_key(sup))

        w2.stop()
        with pytest.raises(httpx.HTTPError):  # the engine dies under this request: the worker is gone
            chat(endpoint, key=engine_key(sup))
        left = sup.wait_for(lambda s: s.state is S.READY and s.restarts >= 1 and "RPC0" in _bytes(s)
                            and "RPC1" not in _bytes(s), 180)
        assert left is not None, sup.snapshot()
        assert left.incidents[-1].kind == "rpc-worker-lost"
        assert "the tray offers to use it again" in left.incidents[-1].action
        assert left.workers_back == () and menu_view(left).offers == ()
        assert chat(_focused(left).endpoint, key=engine_key(sup))

        w2 = Worker(p2)
        w2.wait_for("ready")
        offered = sup.wait_for(lambda s: ep2 in s.workers_back, 30)
        assert offered is not None, sup.snapshot()
        offers = menu_view(offered).offers
        assert [o.label for o in offers] == [f"Use {ep2} again"] and offers[0].endpoint == ep2
        assert status_object(offered, time.time())["rpc_workers_back"] == [ep2]
        pid_before = _focused(offered).pid

        sup.submit(UseWorkerAgain(offers[0].endpoint))
        again = sup.wait_for(lambda s: s.state is S.READY and _focused(s).pid != pid_before
                             and {"RPC0", "RPC1"} <= set(_bytes(s)), 180)
        assert again is not None, sup.snapshot()
        assert again.workers_back == () and menu_view(again).offers == ()
        split = next(what for what, _ in again.plan_decisions if what.startswith("split across"))
        assert f"RPC0 ({ep1})" in split and f"RPC1 ({ep2})" in split
        assert _bytes(again)["RPC1"] > 0
        assert chat(_focused(again).endpoint, key=engine_key(sup))
    finally:
        if sup is not None:
            sup.submit(Shutdown())
            assert sup.join(60)
        w1.stop()
        w2.stop()


def test_this_machine_shares_a_supervised_worker_with_its_own_line(rpc_home):
    """ShareWorker runs rpc-server under the supervisor: the snapshot's worker view (and the
    tray line decided from it) goes starting -> ready with the devices it lends, a kill -9 is
    an incident and a restart, StopWorker stops it; a LAN address without consent is refused."""
    from stoker.engines.launch import PreparationRefused
    from stoker.fleet.supervisor import FunctionPreparer, Supervisor, SupervisorOptions

    port = free_loopback_port()
    sup = Supervisor(FunctionPreparer(lambda path, attempt: PreparationRefused(path, "no model in this test")),
                     SupervisorOptions(stop_grace_s=5)).start()
    try:
        sup.submit(ShareWorker(port=port))
        ready = sup.wait_for(lambda s: s.worker is not None and s.worker.state is S.READY
                             and s.worker.devices, 30)
        assert ready is not None, sup.snapshot().worker
        w = ready.worker
        assert w.endpoint == f"127.0.0.1:{port}" and w.loopback and w.restarts == 0
        assert w.devices[0].name == "CPU" and w.devices[0].free_bytes > 0
        assert reachable(parse_workers(w.endpoint)[0])
        line = menu_view(ready, now=time.time()).worker
        assert line.title.startswith(f"RPC worker 127.0.0.1:{port}: ready · CPU ")
        assert line.can_stop and not line.can_start
        assert any(d.startswith(f"Other machines use it with --rpc 127.0.0.1:{port}") for d in line.details)
        assert status_object(ready, time.time())["worker"]["devices"][0]["name"] == "CPU"

        os.kill(w.pid, signal.SIGKILL)
        back = sup.wait_for(lambda s: s.worker.state is S.READY and s.worker.restarts == 1, 30)
        assert back is not None, sup.snapshot().worker
        assert back.worker.pid != w.pid
        inc = back.worker.last_incident
        # Diagnosis reads the kill: host-oom where the memory cgroup cannot rule the OOM killer
        # out (as for an engine), else an exit its log does not explain.
        assert inc is not None and inc.kind in ("host-oom", "rpc-worker-exit"), inc
        assert ("SIGKILL" if inc.kind == "host-oom" else "signal 9") in inc.summary
        assert "1 restart" in menu_view(back).worker.title
        assert menu_view(back).worker.last_incident[1].startswith(f"The RPC worker on 127.0.0.1:{port} stopped")

        sup.submit(StopWorker())
        stopped = sup.wait_for(lambda s: s.worker.state is S.STOPPED and s.worker.pid is None, 30)
        assert stopped is not None, sup.snapshot().worker
        assert not psutil.pid_exists(back.worker.pid) or psutil.Process(back.worker.pid).status() == "zombie"
        assert not reachable(parse_workers(f"127.0.0.1:{port}")[0])
        line = menu_view(stopped).worker
        assert line.can_start and not line.can_stop and "stopped" in line.title

        sup.submit(ShareWorker(host="192.168.1.20", port=port))
        refused = sup.wait_for(lambda s: s.worker.state is S.FAILED, 10)
        assert refused is not None and "no authentication" in refused.worker.last_error
    finally:
        sup.submit(Shutdown())
        assert sup.join(30)


def _ledger_kinds() -> list[str]:
    path = stoker_paths().data / "incidents.jsonl"
    return [json.loads(x)["kind"] for x in path.read_text().splitlines()] if path.exists() else []


def test_a_port_another_program_holds_is_refused_aloud_never_shown_ready(rpc_home):
    """Before this, the port answering was read as our rpc-server being ready, and its own
    `Failed to create server socket` exit restarted it in a loop."""
    holder = socket.create_server(("127.0.0.1", 0))
    port = holder.getsockname()[1]
    w = Worker(port)
    try:
        gave_up = w.wait_for("gave up")
        assert w.proc.wait(20) == 1
        assert gave_up.endswith(f"gave up: port {port} is already in use by another program"), w.lines
        assert not any(": ready" in ln for ln in w.lines), w.lines
        assert _ledger_kinds()[-1] == "port-in-use"
    finally:
        w.stop()
        holder.close()


def test_an_rpc_server_without_its_libraries_stops_at_once_as_missing_library(rpc_home, tmp_path):
    binary = rpc_server_binary()
    assert binary is not None
    lone = tmp_path / "rpc-server"
    shutil.copy2(binary, lone)  # without the ggml libraries that sit beside it
    sup = WorkerSupervisor(lone, "127.0.0.1", free_loopback_port(), log_dir=tmp_path,
                           policy=RestartPolicy(first_delay_s=0.1))
    assert sup.run_until(threading.Event()) is S.FAILED
    inc = sup.last_incident
    assert inc is not None and inc.kind == "missing-library", inc
    assert sup.state.restarts == 0  # a retry cannot mend it: no loop
    assert "stoker setup --rpc" in (inc.advice or "") and "libggml" in (inc.evidence or "")
