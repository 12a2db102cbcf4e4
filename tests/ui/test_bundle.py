"""The frozen bundle that packaging/build-bundle.sh makes, run as a user runs it: `--version`,
`inspect` and `plan` on the demo model, then the tray under the test display, seen through the
bundle's own `stoker status --json` (`tray_shown: true`), and `stoker stop`.

STOKER_BUNDLE names the executable (packaging/test.sh builds it first and sets it, with
STOKER_REQUIRE_BUNDLE=1 so a missing bundle fails CI instead of skipping).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psutil
import pytest

from stoker.base.store import SettingsStore

pytestmark = [pytest.mark.engine, pytest.mark.ui]
REPO = Path(__file__).resolve().parents[2]
DEFAULT = {"darwin": "dist/Stoker.app/Contents/MacOS/Stoker"}.get(sys.platform, "dist/stoker/stoker")


@pytest.fixture(scope="module")
def bundle() -> Path:
    path = Path(os.environ.get("STOKER_BUNDLE") or REPO / DEFAULT)
    if not path.is_file():
        msg = f"no frozen bundle at {path}; build it with `bash packaging/build-bundle.sh`"
        if os.environ.get("STOKER_REQUIRE_BUNDLE") == "1":
            pytest.fail(msg)
        pytest.skip(msg)
    return path


@pytest.fixture
def env(stoker_home, engine_binary, tmp_path):
    SettingsStore(stoker_home / "config").update(engine=str(engine_binary))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env["STOKER_HOME"] = str(stoker_home)
    return env


def frozen(bundle, *args, env, cwd, timeout=60):
    return subprocess.run([str(bundle), *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)


def test_frozen_stoker_inspects_plans_and_shows_its_tray(bundle, env, demo_model, engine_binary, tmp_path):
    version = frozen(bundle, "--version", env=env, cwd=tmp_path)
    assert version.returncode == 0, version.stderr
    assert version.stdout.startswith("stoker 0.") and "(bundle)" in version.stdout

    inspect = frozen(bundle, "inspect", str(demo_model), "--json", env=env, cwd=tmp_path)
    assert inspect.returncode == 0, inspect.stderr
    assert json.loads(inspect.stdout)["summary"]["architecture"] == "llama"

    plan = frozen(bundle, "plan", str(demo_model), "--json", env=env, cwd=tmp_path)
    assert plan.returncode == 0, plan.stderr
    planned = json.loads(plan.stdout)
    assert planned["kind"] == "plan" and planned["ctx"] > 0 and planned["argv"]

    tray = subprocess.Popen([str(bundle), "tray", str(demo_model), "--port", "0"], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        status, end = None, time.monotonic() + 120
        while time.monotonic() < end:
            r = frozen(bundle, "status", "--json", env=env, cwd=tmp_path)
            if r.returncode == 0:
                status = json.loads(r.stdout)
                if status.get("tray_shown") is True and status.get("state") == "ready":
                    break
            assert tray.poll() is None, tray.communicate()[1]
            time.sleep(0.3)  # paces the poll
        assert status and status["tray_shown"] is True and status["state"] == "ready", status
        engine_pid = status["pid"]
        engine = psutil.Process(engine_pid)
        assert Path(engine.exe()) == engine_binary.resolve()
        # The engine loads the system's libraries, not the ones frozen into the bundle.
        assert str(bundle.parent) not in engine.environ().get("LD_LIBRARY_PATH", "")
        # The endpoint serves from its own process: the bundle's executable again (no Python).
        gateway = psutil.Process(status["gateway"]["pid"])
        assert "--stoker-gateway-process" in gateway.cmdline()
        with urllib.request.urlopen(status["gateway"]["url"] + "/v1/models", timeout=10) as resp:
            listed = json.loads(resp.read())
        assert [m["status"] for m in listed["data"] if m["id"] == "smollm2-135m-instruct:q4_1"] == ["loaded"]
        stop = frozen(bundle, "stop", env=env, cwd=tmp_path)
        assert stop.returncode == 0, stop.stderr
        _out, err = tray.communicate(timeout=60)
    finally:
        if tray.poll() is None:
            tray.kill()
            tray.communicate()
    assert tray.returncode == 0, err
    assert "Traceback" not in err
    assert not psutil.pid_exists(engine_pid) or psutil.Process(engine_pid).status() == "zombie"
    assert not psutil.pid_exists(gateway.pid) or gateway.status() == "zombie"


@pytest.mark.timeout(1200)  # `stoker setup` from the bundle may rebuild the engine (900 s bound)
def test_frozen_setup_builds_installs_and_fetches_the_model(bundle, tmp_path, engine_dir):
    """`stoker setup` from the bundle (no pip of its own: it borrows a Python on PATH), reusing
    the test build folder so the compile is incremental; then the same without compiler or
    CMake on PATH says exactly what to install."""
    from tests.conftest import TEST_HOME

    build_dir = TEST_HOME / "cache" / "build" / engine_dir.name
    home = tmp_path / "fresh-home"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["STOKER_HOME"] = str(home)
    assert build_dir.is_dir(), f"no build folder {build_dir}; run `STOKER_HOME={TEST_HOME} stoker setup`"
    r = frozen(bundle, "setup", "--backend", "cpu", "--build-dir", str(build_dir), env=env,
               cwd=tmp_path, timeout=900)
    assert r.returncode == 0, r.stderr[-2000:]
    assert (home / "data" / "engines" / "llama-server" / engine_dir.name / "manifest.json").is_file()
    assert (home / "data" / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf").stat().st_size == 98362432
    version = frozen(bundle, "--version", env=env, cwd=tmp_path)
    assert f"engine {engine_dir.name}" in version.stdout

    empty = tmp_path / "empty-path"
    empty.mkdir()
    bare = dict(env, PATH=str(empty), STOKER_HOME=str(tmp_path / "bare-home"))
    r = frozen(bundle, "setup", "--backend", "cpu", "--skip-model", env=bare, cwd=tmp_path)
    assert r.returncode == 2 and r.stdout == ""
    if sys.platform.startswith("linux"):
        assert r.stderr == (
            "stoker: Building llama-server needs a C++ compiler, CMake and Python 3 with venv, which are "
            "not installed: on Debian/Ubuntu `sudo apt install build-essential cmake python3-venv`, on "
            "Fedora `sudo dnf install gcc-c++ make cmake python3`, on Arch `sudo pacman -S base-devel "
            "cmake python`; then run `stoker setup` again.\n")
