"""Bridge ordering, tray looks and menu actions, notifications: against a fake supervisor."""

from __future__ import annotations

import threading
import time

from stoker.desktop.app import StokerApp
from stoker.desktop.bridge import SnapshotBridge
from stoker.diagnosis.views import BlockerView, IncidentView
from stoker.fleet.commands import Restart, Stop, SwitchModel
from stoker.fleet.snapshot import AppSnapshot, EngineState
from tests.ui.fakes import FakeServices, entries


def snap(seq, state=EngineState.READY, **kw):
    base = dict(model_path="/m/a.gguf", backend="cpu", ctx=2048, kv_type_k="f16",
                kv_type_v="f16", endpoint="http://127.0.0.1:9", gateway_url="http://127.0.0.1:9")
    base.update(kw)
    return AppSnapshot(seq=seq, state=state, **base)


def test_out_of_order_snapshots_never_show_stale_state(qtbot):
    bridge = SnapshotBridge()
    shown = []
    bridge.snapshot_ready.connect(lambda s: shown.append(s.seq))
    order = [1, 2, 5, 3, 4, 6, 6, 2]

    def from_another_thread():
        for seq in order:
            bridge.push(snap(seq, EngineState.READY if seq % 2 else EngineState.STARTING))

    t = threading.Thread(target=from_another_thread)
    t.start()
    t.join()
    qtbot.waitUntil(lambda: bridge.dropped + len(shown) == len(order), timeout=2000)
    assert shown == [1, 2, 5, 6]
    assert bridge.latest().seq == 6 and bridge.dropped == 4


def test_tray_follows_snapshots_and_menu_sends_commands(qtbot, fake_supervisor, tmp_path):
    services = FakeServices(tmp_path, entries("/m/a.gguf", "/m/b.gguf"))
    stoker = StokerApp(fake_supervisor, services)
    assert stoker.tray.show()
    qtbot.waitUntil(lambda: len(stoker.models) == 2, timeout=2000)
    fake_supervisor.publish(snap(1, EngineState.STARTING))
    qtbot.waitUntil(lambda: stoker.tray.shown_state == "loading", timeout=2000)
    fake_supervisor.publish(snap(2, blockers=(BlockerView("gpuUnused", "GPU unused",
                                                           "update the driver"),)))
    qtbot.waitUntil(lambda: stoker.tray.shown_state == "degraded", timeout=2000)
    assert "a · cpu · ctx 2,048 · KV f16" in stoker.tray.tray.toolTip()
    # A late, older snapshot must not bring "loading" back.
    fake_supervisor.publish(snap(1, EngineState.STARTING))
    qtbot.wait(50)
    assert stoker.tray.shown_state == "degraded"

    stoker.tray.rebuild_menu()
    texts = [a.text() for a in stoker.tray.menu.actions()]
    assert any("GPU unused" in t for t in texts)
    assert stoker.tray.find_action("action-start").isEnabled() is False
    stoker.tray.find_action("action-stop").trigger()
    stoker.tray.find_action("action-restart").trigger()
    stoker.tray.find_action("model:/m/b.gguf").trigger()
    stoker.tray.find_action("model:/m/a.gguf").trigger()  # already running: nothing sent
    assert fake_supervisor.commands == [Stop(), Restart(), SwitchModel("/m/b.gguf")]
    stoker.tray.find_action("action-copy-endpoint").trigger()
    from PySide6.QtGui import QGuiApplication

    assert QGuiApplication.clipboard().text() == "http://127.0.0.1:9/v1"


def test_incident_is_notified_once(qtbot, fake_supervisor, tmp_path):
    stoker = StokerApp(fake_supervisor, FakeServices(tmp_path))
    stoker.tray.show()
    fake_supervisor.publish(snap(1))
    inc = IncidentView(at=time.time(), kind="crash", summary="engine killed by SIGKILL",
                       evidence=None, advice="", action="restarting in 1 s")
    fake_supervisor.publish(snap(2, incidents=(inc,)))
    fake_supervisor.publish(snap(3, incidents=(inc,)))
    qtbot.waitUntil(lambda: getattr(stoker.bridge.latest(), "seq", 0) == 3, timeout=2000)
    assert [n.title for n in stoker.notifier.shown] == ["a: crash"]


def test_quit_sends_shutdown_and_finishes(qtbot, fake_supervisor, tmp_path):
    stoker = StokerApp(fake_supervisor, FakeServices(tmp_path))
    stoker.tray.show()
    with qtbot.waitSignal(stoker.finished, timeout=3000):
        stoker.tray.rebuild_menu()
        stoker.tray.find_action("action-quit").trigger()
    assert not stoker.tray_shown
    assert type(fake_supervisor.commands[-1]).__name__ == "Shutdown"


def test_every_state_icon_renders_crisp_at_every_size_for_both_panels():
    from PySide6.QtGui import QColor, QPalette

    from stoker.desktop.icons import SIZES, panel_is_dark, render_pixmap, state_icon
    from stoker.desktop.tray_view import TRAY_STATES

    for state in TRAY_STATES:
        for panel in ("light", "dark"):
            icon = state_icon(state, panel)
            sizes = {s.width() for s in icon.availableSizes()}
            assert set(SIZES) <= sizes
            pix = render_pixmap(state, panel, 22)
            img = pix.toImage()
            opaque = sum(1 for x in range(22) for y in range(22) if img.pixelColor(x, y).alpha())
            assert opaque > 40  # something is drawn, not an empty square
        # The two variants differ: each is drawn for its panel.
        assert render_pixmap(state, "light", 22).toImage() != render_pixmap(state, "dark", 22).toImage()
    dark = QPalette()
    dark.setColor(QPalette.ColorRole.Window, QColor("#202124"))
    light = QPalette()
    light.setColor(QPalette.ColorRole.Window, QColor("#f1f3f4"))
    assert panel_is_dark(dark) and not panel_is_dark(light)


def test_a_download_progress_line_shows_in_the_tray(qtbot, fake_supervisor, tmp_path):
    stoker = StokerApp(fake_supervisor, FakeServices(tmp_path, entries("/m/a.gguf")))
    assert stoker.tray.show()
    settings = stoker.open_settings()
    qtbot.waitUntil(lambda: settings.pending == 0, timeout=10000)
    assert settings._on_progress == stoker.tray.set_activity  # what "Get a model…" reports to
    stoker.tray.set_activity("Downloading gemma-3-270m-it-Q4_K_M.gguf: 30 MiB of 241 MiB")
    assert stoker.tray.tray.toolTip().endswith("Downloading gemma-3-270m-it-Q4_K_M.gguf: 30 MiB of 241 MiB")
    stoker.tray.rebuild_menu()
    assert stoker.tray.find_action("info-activity").text().startswith("Downloading gemma")
    stoker.tray.set_activity(None)
    stoker.tray.rebuild_menu()
    assert stoker.tray.find_action("info-activity") is None
    settings.close()
