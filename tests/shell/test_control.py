"""Control channel: status/stop round trip, second instance refused, stale socket removed, TCP+token."""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import tempfile
from pathlib import Path

import pytest

from stoker.diagnosis.views import IncidentView
from stoker.fleet.snapshot import AppSnapshot, EngineState
from stoker.fleet.status_report import status_lines, status_object
from stoker.instance.control import AlreadyRunning, ControlServer, request, socket_path

IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


def handler_with(calls):
    def handle(req):
        calls.append(req["op"])
        if req["op"] == "status":
            return {"ok": True, "status": {"state": "ready", "instance_pid": 1234}}
        if req["op"] == "stop":
            return {"ok": True}
        return {"ok": False, "error": f"unknown op {req['op']!r}"}

    return handle


@pytest.mark.parametrize("transport", ["unix", "tcp"])
def test_round_trip_and_second_instance_refused(tmp_path, transport):
    calls = []
    with ControlServer(handler_with(calls), run_dir=tmp_path, transport=transport):
        assert request("status", run_dir=tmp_path, transport=transport)["status"]["state"] == "ready"
        assert request("stop", run_dir=tmp_path, transport=transport) == {"ok": True}
        with pytest.raises(AlreadyRunning, match=r"already running \(pid 1234\).*stoker stop"):
            ControlServer(handler_with([]), run_dir=tmp_path, transport=transport).claim()
    assert calls == ["status", "stop", "status"]
    assert request("status", run_dir=tmp_path, transport=transport) is None  # closed: nobody


def test_nothing_running_is_none(tmp_path):
    assert request("status", run_dir=tmp_path) is None


def test_stale_socket_file_is_removed_and_reclaimed(tmp_path):
    path = socket_path(tmp_path)
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(path))
    dead.close()  # the file stays, nobody listens: what a crashed instance leaves
    assert path.exists()
    with ControlServer(handler_with([]), run_dir=tmp_path):
        assert request("status", run_dir=tmp_path)["ok"]


@pytest.fixture
def short_tmp(monkeypatch):
    """A shared temp folder with a short name (pytest's own are too long for a socket)."""
    folder = Path(tempfile.mkdtemp(prefix="st"))
    folder.chmod(0o1777)
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_long_run_dir_uses_a_short_socket_path(tmp_path, monkeypatch, short_tmp):
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    deep = tmp_path / ("x" * 120)
    with ControlServer(handler_with([]), run_dir=deep):
        path = socket_path(deep)
        assert len(str(path)) < 100 and request("status", run_dir=deep)["ok"]
        # Not a guessable name in the shared temp folder: in a folder of this user's, 0700.
        assert path.parent == short_tmp / f"stoker-{os.getuid()}"
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700


def test_a_long_run_dir_prefers_the_users_runtime_folder(tmp_path, monkeypatch, short_tmp):
    runtime = tmp_path / "run-user"
    runtime.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    deep = tmp_path / ("x" * 120)
    with ControlServer(handler_with([]), run_dir=deep):
        assert socket_path(deep).parent == runtime and request("status", run_dir=deep)["ok"]
    runtime.chmod(0o755)  # a runtime folder others may enter is passed over
    assert socket_path(deep, create=True).parent == Path(tempfile.gettempdir()) / f"stoker-{os.getuid()}"


@pytest.mark.skipif(not IS_ROOT, reason="making a folder another user owns needs root")
def test_a_squatted_short_socket_folder_is_refused_not_used(tmp_path, monkeypatch, short_tmp):
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    squat = short_tmp / f"stoker-{os.getuid()}"
    squat.mkdir(mode=0o777)
    os.chown(squat, 65534, 65534)  # another user made it first
    deep = tmp_path / ("x" * 120)
    with pytest.raises(OSError, match="not a folder only you can use"):
        ControlServer(handler_with([]), run_dir=deep).claim()
    assert request("status", run_dir=deep) is None  # a client never talks to a squatter's socket
    assert list(squat.iterdir()) == []


def test_tcp_needs_the_token(tmp_path):
    with ControlServer(handler_with([]), run_dir=tmp_path, transport="tcp"):
        port = json.loads((tmp_path / "control.json").read_text())["port"]
        with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
            s.sendall(b'{"op": "stop", "token": "wrong"}\n')
            answer = json.loads(s.makefile().readline())
    assert answer == {"ok": False, "error": "the control token does not match"}


def test_garbage_request_gets_an_error_not_a_dead_server(tmp_path):
    with ControlServer(handler_with([]), run_dir=tmp_path):
        with socket.socket(socket.AF_UNIX) as s:
            s.connect(str(socket_path(tmp_path)))
            s.sendall(b"not json\n")
            assert json.loads(s.makefile().readline())["ok"] is False
        assert request("status", run_dir=tmp_path)["ok"]


def test_status_object_and_lines():
    snap = AppSnapshot(seq=7, state=EngineState.READY, model_name="SmolLM2", backend="cpu",
                       engine_build="b11434-cpu", endpoint="http://127.0.0.1:5000", pid=42,
                       ctx=2048, slots=1, kv_type_k="f16", kv_type_v="f16", started_at=100.0,
                       restarts=1, incidents=(IncidentView(90.0, "host-oom", "killed", None, "close",
                                                           "restarting in 1 s"),))
    obj = status_object(snap, now=165.0, instance_pid=9)
    assert obj["schema"] == 2 and obj["state"] == "ready" and obj["uptime_s"] == 65.0
    assert obj["last_incident"]["kind"] == "host-oom" and obj["restarts"] == 1
    text = "\n".join(status_lines(obj))
    assert "endpoint:  http://127.0.0.1:5000/v1" in text and "1m 05s" in text
    assert "context:   2,048, 1 slot(s), KV f16/f16" in text and "pid 42" in text
    stopped = status_lines(status_object(AppSnapshot(seq=1, state=EngineState.STOPPED), 0))
    assert stopped == ["state:     stopped", "restarts:  0"]


def test_status_carries_the_settings_problems():
    snap = AppSnapshot(seq=3, state=EngineState.READY, problems=("settings.json was not valid JSON",))
    obj = status_object(snap, 0)
    assert obj["problems"] == ["settings.json was not valid JSON"]
    assert "problem:   settings.json was not valid JSON" in status_lines(obj)


def test_two_claims_at_once_leave_exactly_one_holder(tmp_path):
    """The lock decides, not a check-then-bind race: 8 threads claim together, one wins."""
    import threading

    barrier = threading.Barrier(8)
    won, lost = [], []

    def claim():
        server = ControlServer(handler_with([]), run_dir=tmp_path)
        barrier.wait()
        try:
            server.claim()
            won.append(server)
        except AlreadyRunning as exc:
            lost.append(str(exc))

    threads = [threading.Thread(target=claim) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(won) == 1 and len(lost) == 7
    assert all("already running" in m for m in lost)
    won[0].close()
