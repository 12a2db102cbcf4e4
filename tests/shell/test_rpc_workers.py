"""Two machines on one: two `stoker worker` processes on loopback ports stand in for two hosts.

Real processes throughout: the rpc-server and RPC-capable llama-server of `stoker setup --rpc`,
the demo model, `stoker run --rpc` with a memory budget too small for the model alone. The
plan puts layers on RPC0 and RPC1 and says so, `status --json` lists the devices, a chat
answers through the gateway; a killed worker's rpc-server is restarted by `stoker worker`;
a worker that is stopped gives the rpc-worker-lost incident, the model serves again on what
is left, and once the worker is back the status says so.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import psutil
import pytest

from stoker.shell.process import free_loopback_port
from tests.conftest import TEST_HOME, _missing
from tests.shell.engine_helpers import chat
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
            time.sleep(0.05)
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
        with pytest.raises(Exception):  # the engine dies under this request: the worker is gone
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
        back = wait_status(lambda s: any(b["kind"] == "rpcWorkerBack" for b in s["blockers"]), timeout=30)
        assert any(f"127.0.0.1:{p2}" in b["message"] for b in back["blockers"])

        run.proc.send_signal(signal.SIGINT)
        assert run.proc.wait(30) == 0
    finally:
        if run is not None:
            run.close()
        w1.stop()
        w2.stop()
