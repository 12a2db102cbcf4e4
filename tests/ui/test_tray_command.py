"""`stoker tray` as a user runs it: a tray process answering `stoker status` / `stoker stop`,
and the one-line headless fallback when there is no tray."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import psutil
import pytest

from stoker.base.store import SettingsStore

pytestmark = [pytest.mark.engine, pytest.mark.ui]
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def stoker(*args, env, timeout=30):
    return subprocess.run([sys.executable, "-m", "stoker", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=timeout)


def wait_status(env, pred, deadline_s=90):
    end = time.monotonic() + deadline_s
    last = None
    while time.monotonic() < end:
        r = stoker("status", "--json", env=env)
        if r.returncode == 0:
            last = json.loads(r.stdout)
            if pred(last):
                return last
        time.sleep(0.3)  # paces the poll
    raise AssertionError(f"status never matched; last: {last}")


@pytest.fixture
def env(stoker_home, engine_binary):
    SettingsStore(stoker_home / "config").update(engine=str(engine_binary))
    return dict(os.environ, STOKER_HOME=str(stoker_home))


def run_until_stopped(proc, env, engine_binary):
    try:
        r = stoker("stop", env=env)
        assert r.returncode == 0, r.stderr
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    children = [p for p in psutil.process_iter(["exe"])
                if p.info["exe"] == str(engine_binary) and p.ppid() == proc.pid]
    assert children == []
    return proc.returncode, out, err


def test_tray_process_reports_its_icon_and_stops_cleanly(env, demo_model, engine_binary):
    proc = subprocess.Popen([sys.executable, "-m", "stoker", "tray", str(demo_model), "--port", "0"], cwd=REPO,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    status = wait_status(env, lambda s: s.get("state") == "ready")
    assert status["tray_shown"] is True and status["backend"] == "cpu" and status["pid"]
    engine_pid = status["pid"]
    code, _out, err = run_until_stopped(proc, env, engine_binary)
    assert code == 0, err
    assert not psutil.pid_exists(engine_pid) or psutil.Process(engine_pid).status() == "zombie"


def test_without_a_tray_it_says_so_and_runs_headless(env, demo_model, engine_binary):
    env = dict(env, QT_QPA_PLATFORM="offscreen")
    proc = subprocess.Popen([sys.executable, "-m", "stoker", "tray", str(demo_model), "--port", "0"],
                            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    status = wait_status(env, lambda s: s.get("state") == "ready")
    assert status.get("tray_shown") in (None, False)
    code, out, err = run_until_stopped(proc, env, engine_binary)
    assert err.count("no system tray is available here") == 1
    assert "ready:" in out and code == 0
