"""UI tests need a real X display with a system-tray host (Xvfb + trayer, tests/xvfb_run.py).

Without one they skip with the command to run; in CI (STOKER_REQUIRE_ENGINE=1) they fail,
so a missing tray host is never a silent pass. The xcb platform is forced: `offscreen`
has no system tray at all.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCREENSHOTS = REPO / "artifacts" / "screenshots"
RUN_HINT = "run `.venv/bin/python -m tests.xvfb_run .venv/bin/pytest tests/ui`"


def _no_tray(why: str):
    if os.environ.get("STOKER_REQUIRE_ENGINE") == "1":
        pytest.fail(f"{why}; the UI tests must run under a tray host in CI ({RUN_HINT})")
    pytest.skip(f"{why}; {RUN_HINT}")


def pytest_configure(config):
    # pytest-qt's session-wide QApplication is made before any per-test fixture can skip;
    # without a display, xcb would abort the whole run, so let it come up offscreen and
    # have `_tray_host` skip (or fail in CI) each test with the reason.
    os.environ["QT_QPA_PLATFORM"] = "xcb" if os.environ.get("DISPLAY") else "offscreen"


@pytest.fixture(scope="session")
def qapp_args():
    return ["stoker-tests"]


@pytest.fixture(autouse=True)
def _tray_host(request):
    if not os.environ.get("DISPLAY") or os.environ.get("QT_QPA_PLATFORM") != "xcb":
        _no_tray("no X display")
    if not os.environ.get("STOKER_TEST_TRAY_HOST"):
        _no_tray("no system-tray host was started")
    qapp = request.getfixturevalue("qapp")
    from PySide6.QtWidgets import QSystemTrayIcon

    if not QSystemTrayIcon.isSystemTrayAvailable():
        _no_tray("Qt sees no system tray on this display")
    qapp.setQuitOnLastWindowClosed(False)
    yield


@pytest.fixture
def screenshots() -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return SCREENSHOTS


class FakeSupervisor:
    """submit/subscribe/snapshot like stoker.fleet.supervisor.Supervisor, driven by the test."""

    def __init__(self):
        from stoker.fleet.snapshot import AppSnapshot, EngineState

        self.commands = []
        self._subs = []
        self._snap = AppSnapshot(seq=0, state=EngineState.STOPPED)
        self._stopped = threading.Event()

    def start(self):
        return self

    def submit(self, command):
        from stoker.fleet.commands import Shutdown

        self.commands.append(command)
        if isinstance(command, Shutdown):
            self._stopped.set()

    def subscribe(self, callback):
        self._subs.append(callback)
        if self._snap.seq:
            callback(self._snap)
        return lambda: self._subs.remove(callback) if callback in self._subs else None

    def publish(self, snap):
        self._snap = snap
        for cb in list(self._subs):
            cb(snap)

    def snapshot(self):
        return self._snap

    def publish_engines(self, *engines, gateway_url="http://127.0.0.1:7857", **kw):
        """A snapshot as the multi-model supervisor makes it: `engines` (EngineView) are the
        resident models, the first one focused (its state and path are the snapshot's)."""
        from stoker.fleet.snapshot import AppSnapshot, EngineState

        focus = engines[0] if engines else None
        base = dict(state=focus.state if focus else EngineState.STOPPED,
                    model_path=focus.model_path if focus else None,
                    model_id=focus.model_id if focus else None,
                    backend=focus.backend if focus else None, ctx=focus.ctx if focus else None,
                    gateway_url=gateway_url, endpoint=gateway_url, engines=tuple(engines))
        base.update(kw)
        snap = AppSnapshot(seq=self._snap.seq + 1, **base)
        self.publish(snap)
        return snap

    def join(self, timeout=None):
        return self._stopped.wait(timeout)


@pytest.fixture
def fake_supervisor():
    return FakeSupervisor()
