"""`stoker run/status/stop` as a user runs them: real processes, the real engine, the demo model.

One `stoker run` goes through: READY with an endpoint, a chat answer, `status --json`,
kill -9 of the engine → restart → READY with one restart and the incident, a second
instance refused, SIGINT → exit 0 with no llama-server left. A second test covers `stoker stop`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.shell.engine_helpers import chat, engines_running

pytestmark = pytest.mark.engine
REPO = Path(__file__).resolve().parents[2]


def stoker(*args, timeout=30):
    return subprocess.run([sys.executable, "-m", "stoker", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=timeout, env=os.environ.copy())


class Running:
    """A `stoker run` subprocess whose stdout lines are collected by a thread."""

    def __init__(self, *args):
        self.proc = subprocess.Popen([sys.executable, "-m", "stoker", "run", *args], cwd=REPO,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     env=os.environ.copy())
        self.lines: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_line(self, prefix: str, timeout: float = 60, after: int = 0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in self.lines[after:]:
                if line.startswith(prefix):
                    return line
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)  # paces the poll
        raise AssertionError(f"no line starting {prefix!r}; output so far: {self.lines}")

    def close(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def status_json() -> dict:
    result = stoker("status", "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def wait_status(predicate, timeout=60) -> dict:
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = status_json()
        if predicate(last):
            return last
        time.sleep(0.2)  # paces the poll
    raise AssertionError(f"status never matched; last: {last}")


@pytest.fixture
def run_args(engine_binary, demo_model, stoker_home):
    return (str(demo_model), "--headless", "--engine", str(engine_binary), "--ctx", "1024",
            "--slots", "1", "--port", "0")


def test_run_ready_chat_status_crash_restart_ctrl_c(run_args, engine_binary, stoker_home):
    run = Running(*run_args)
    try:
        endpoint = run.wait_line("endpoint: ").split()[1].removesuffix("/v1")
        run.wait_line("ready: ")
        assert chat(endpoint)
        status = status_json()
        assert status["schema"] == 2 and status["state"] == "ready"
        assert status["gateway"]["url"] == endpoint and status["engines"][0]["state"] == "ready"
        assert status["backend"] == "cpu" and status["ctx"] == 1024
        assert status["kv_type_k"] and status["kv_type_v"]
        assert status["endpoint"] == endpoint and status["pid"] and status["restarts"] == 0
        assert status["tray_shown"] is False
        first_pid = status["pid"]
        assert [p.pid for p in engines_running(engine_binary)] == [first_pid]

        second = stoker("run", *run_args)
        assert second.returncode == 2 and "already running" in second.stderr

        os.kill(first_pid, signal.SIGKILL)
        again = wait_status(lambda s: s["state"] == "ready" and s["pid"] != first_pid)
        assert again["restarts"] == 1 and again["incidents"] == 1
        assert again["last_incident"]["summary"] and "restart" in again["last_incident"]["action"]
        assert again["endpoint"] == endpoint and chat(endpoint)  # the same URL after kill -9
        assert any(line.startswith("incident: ") for line in run.lines)
        human = stoker("status")
        assert human.returncode == 0 and "restarts:  1" in human.stdout

        run.proc.send_signal(signal.SIGINT)
        assert run.proc.wait(30) == 0
    finally:
        run.close()
    assert engines_running(engine_binary) == []
    gone = stoker("status")
    assert gone.returncode == 1 and "no Stoker instance is running" in gone.stderr
    settings = json.loads((stoker_home / "config" / "settings.json").read_text())
    assert settings["last_model"].endswith("SmolLM2-135M-Instruct.Q4_1.gguf")


def test_stop_command_ends_the_instance(run_args, engine_binary):
    run = Running(*run_args)
    try:
        run.wait_line("endpoint: ")
        result = stoker("stop")
        assert result.returncode == 0 and "stopped" in result.stdout
        assert run.proc.wait(10) == 0
    finally:
        run.close()
    assert engines_running(engine_binary) == []
    assert stoker("stop").returncode == 1


def test_bad_model_is_one_sentence_and_exit_1(engine_binary, stoker_home, tmp_path):
    result = stoker("run", str(tmp_path / "missing.gguf"), "--headless", "--port", "0",
                    "--engine", str(engine_binary))
    assert result.returncode == 1
    assert "failed: no model named" in result.stderr, result.stderr  # failures go to stderr
    assert "failed:" not in result.stdout and "Traceback" not in result.stderr
    assert result.stdout.rstrip().endswith("stopped")


def test_without_headless_and_without_a_tray_it_says_so_and_runs_headless(engine_binary, stoker_home,
                                                                          tmp_path):
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen")
    env.pop("DISPLAY", None)
    result = subprocess.run([sys.executable, "-m", "stoker", "run", str(tmp_path / "missing.gguf"),
                             "--engine", str(engine_binary)], cwd=REPO, capture_output=True,
                            text=True, timeout=60, env=env)
    assert "no system tray is available here; running headless" in result.stderr
    assert result.returncode == 1 and "failed: no model named" in result.stderr, result.stderr


def test_ps_load_unload_through_the_running_instance(run_args, engine_binary, demo_model, tmp_path):
    other = tmp_path / "SmolLM2-135M-Other.Q4_1.gguf"
    other.write_bytes(demo_model.read_bytes())
    run = Running(*run_args)
    try:
        run.wait_line("ready: ")
        loaded = stoker("load", str(other), "--pin")
        assert loaded.returncode == 0 and "smollm2-135m-other:q4_1" in loaded.stdout, loaded.stderr
        both = wait_status(lambda s: sum(e["state"] == "ready" for e in s["engines"]) == 2)
        assert {e["id"]: e["pinned"] for e in both["engines"]} == {
            "smollm2-135m-instruct:q4_1": False, "smollm2-135m-other:q4_1": True}
        table = stoker("ps")
        assert table.returncode == 0 and "smollm2-135m-other:q4_1" in table.stdout and "yes" in table.stdout
        assert stoker("unload", "smollm2-135m-other:q4_1").returncode == 0
        wait_status(lambda s: [e["id"] for e in s["engines"]] == ["smollm2-135m-instruct:q4_1"])
        missing = stoker("load", "no-such-model")
        assert missing.returncode == 1 and "no model is called" in missing.stderr
    finally:
        run.close()
    assert engines_running(engine_binary) == []
