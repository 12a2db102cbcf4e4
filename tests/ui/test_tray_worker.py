"""This machine's RPC worker in the tray and in Settings, and the offer to use a worker that
came back: against a fake supervisor that publishes snapshots the way the real one does.
The lines themselves are decided (and tested state by state) in stoker.desktop.tray_view; here
the menu shows them and its actions send ShareWorker / StartWorker / StopWorker /
UseWorkerAgain."""

from __future__ import annotations

import time

from PySide6.QtCore import QPoint
from PySide6.QtWidgets import QDialogButtonBox

from stoker.base.paths import stoker_paths
from stoker.base.store import SettingsStore
from stoker.desktop.app import StokerApp
from stoker.desktop.services import model_key
from stoker.diagnosis.views import IncidentView
from stoker.engines.rpc import WorkerDeviceView
from stoker.fleet.commands import ShareWorker, StartWorker, StopWorker, UseWorkerAgain
from stoker.fleet.snapshot import EngineState, EngineView, WorkerView
from tests.ui.fakes import FakeServices, entries, grab_menus
from tests.ui.test_settings_gateway import StoreServices

MIB = 2 ** 20
CPU = WorkerDeviceView("CPU", "AMD EPYC", 24105 * MIB, 24105 * MIB)


def worker(state=EngineState.READY, **kw) -> WorkerView:
    base = dict(host="127.0.0.1", port=50052, endpoint="127.0.0.1:50052", state=state, pid=4242,
                devices=(CPU,))
    base.update(kw)
    return WorkerView(**base)


def published(qtbot, stoker, snap):
    qtbot.waitUntil(lambda: getattr(stoker.bridge.latest(), "seq", 0) == snap.seq, timeout=2000)
    stoker.tray.rebuild_menu()
    return stoker.tray


def test_the_worker_line_and_the_offer_to_use_a_worker_again(qtbot, fake_supervisor, tmp_path, screenshots):
    a = model_key(str(tmp_path / "a.gguf"))
    stoker = StokerApp(fake_supervisor, FakeServices(tmp_path, entries(a)))
    assert stoker.tray.show()
    engine = EngineView(model_id="a:q4_1", model_path=a, state=EngineState.READY, backend="cpu",
                        bytes_by_device=(("CPU", 60 * MIB), ("RPC0", 70 * MIB)))
    incident = IncidentView(at=time.time() - 60, kind="rpc-worker-exit",
                            summary="The RPC worker on 127.0.0.1:50052 stopped: rpc-server was ended by signal 9 "
                                    "while ready.", evidence=None, advice="", action="restarting in 1 s")
    snap = fake_supervisor.publish_engines(engine, worker=worker(restarts=1, last_incident=incident),
                                           workers_back=("192.168.1.21:50052",))
    tray = published(qtbot, stoker, snap)

    line = tray.find_action("worker")
    assert line.text() == "RPC worker 127.0.0.1:50052: ready · CPU 23.5 GiB free · 1 restart"
    details = [x.text() for x in line.menu().actions()]
    assert "Other machines use it with --rpc 127.0.0.1:50052" in details
    assert any(d.startswith("Lends CPU (AMD EPYC)") for d in details)
    last = tray.find_action("info-worker-incident")
    assert last.text().startswith("Last incident ") and "ended by signal 9" in last.toolTip()
    assert tray.find_action("worker-stop").isEnabled() and not tray.find_action("worker-start").isEnabled()
    assert "RPC worker 127.0.0.1:50052: ready" in tray.tray.toolTip()
    use = tray.find_action("use-worker:192.168.1.21:50052")
    assert use.text() == "Use 192.168.1.21:50052 again" and use.isEnabled()
    assert tray.shown_state == "ready"  # a worker that is back is an offer, not a fault

    tray.menu.popup(QPoint(40, 40))
    qtbot.waitUntil(tray.menu.isVisible, timeout=5000)
    line = tray.find_action("worker")  # opening the menu rebuilt it
    tray.menu.setActiveAction(line)
    qtbot.waitUntil(lambda: line.menu().isVisible(), timeout=5000)
    qtbot.wait(200)
    assert grab_menus(tray.menu, line.menu()).save(str(screenshots / "tray-menu-worker.png"))
    tray.menu.hide()

    tray.rebuild_menu()
    tray.find_action("use-worker:192.168.1.21:50052").trigger()
    tray.find_action("worker-stop").trigger()
    assert fake_supervisor.commands == [UseWorkerAgain("192.168.1.21:50052"), StopWorker()]

    # Given up: the icon says the machine is degraded, and Start tries again.
    snap = fake_supervisor.publish_engines(engine, worker=worker(EngineState.FAILED, pid=None, restarts=5,
                                                                 last_error="gave up: 6 failures within 120 s"))
    tray = published(qtbot, stoker, snap)
    assert tray.shown_state == "degraded"
    assert tray.find_action("worker").text().startswith("RPC worker 127.0.0.1:50052: failed")
    assert tray.find_action("use-worker:192.168.1.21:50052") is None
    start = tray.find_action("worker-start")
    assert start.isEnabled() and not tray.find_action("worker-stop").isEnabled()
    start.trigger()
    assert fake_supervisor.commands[-1] == StartWorker()


def test_settings_share_this_machine_as_a_worker(qtbot, fake_supervisor, tmp_path, stoker_home):
    stoker = StokerApp(fake_supervisor, StoreServices(tmp_path))
    dialog = stoker.open_settings()
    qtbot.waitUntil(lambda: dialog.pending == 0, timeout=10_000)
    save = dialog.buttons.button(QDialogButtonBox.StandardButton.Save)
    assert not dialog.worker_enabled.isChecked() and dialog.worker_port.value() == 50052

    dialog.worker_enabled.setChecked(True)
    dialog.worker_host.setText("192.168.1.20")
    assert "no authentication" in dialog.worker_note.text()
    assert "lets other machines reach it" in dialog.error.text() and not save.isEnabled()
    dialog.worker_allow_remote.setChecked(True)
    assert dialog.error.text() == "" and save.isEnabled()
    dialog.worker_port.setValue(50060)
    dialog.worker_cache.setChecked(True)
    save.click()
    qtbot.waitUntil(lambda: dialog.saved, timeout=10_000)
    assert fake_supervisor.commands == [ShareWorker("192.168.1.20", 50060, True, allow_remote=True)]
    stored = SettingsStore(stoker_paths().config).load()
    assert (stored.worker_enabled, stored.worker_host, stored.worker_port, stored.worker_cache,
            stored.worker_allow_remote) == (True, "192.168.1.20", 50060, True, True)

    # Saved again unchanged: nothing to do; unticked: the worker stops.
    dialog = stoker.open_settings()
    qtbot.waitUntil(lambda: dialog.pending == 0, timeout=10_000)
    assert dialog.worker_enabled.isChecked() and dialog.worker_host.text() == "192.168.1.20"
    dialog.buttons.button(QDialogButtonBox.StandardButton.Save).click()
    qtbot.waitUntil(lambda: dialog.saved, timeout=10_000)
    assert len(fake_supervisor.commands) == 1
    dialog = stoker.open_settings()
    qtbot.waitUntil(lambda: dialog.pending == 0, timeout=10_000)
    dialog.worker_enabled.setChecked(False)
    dialog.buttons.button(QDialogButtonBox.StandardButton.Save).click()
    qtbot.waitUntil(lambda: dialog.saved, timeout=10_000)
    assert fake_supervisor.commands[-1] == StopWorker()
    assert SettingsStore(stoker_paths().config).load().worker_enabled is False
